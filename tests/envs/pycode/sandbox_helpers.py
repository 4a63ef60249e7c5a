"""Helpers of the sandbox tests: a run next to a normal one, and what is left of a run."""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from agentrl.envs.pycode.sandbox import SandboxLimits, SandboxResult, run_sandboxed

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=6.0, memory_bytes=512 * 1024**2)


def boot_seconds() -> float:
    """Now, in the clock of `/proc/<pid>/stat`'s start times (seconds since boot)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def alive_in(result: SandboxResult, returned_at: float | None = None) -> list[int]:
    """Processes of the host still in the run's PID namespace (strict mode) or process group
    (zombies, which hold nothing but a pid until reaped, aside).

    `returned_at` (`boot_seconds()` when the call returned; default: now) leaves out processes
    started after it: they cannot be the run's, and a namespace inode or a process group id of
    a run that has ended is reused by later runs (another test's sandbox on a busy machine)."""
    limit = boot_seconds() if returned_at is None else returned_at
    ticks = os.sysconf("SC_CLK_TCK")
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] == "Z" or int(fields[19]) / ticks > limit + 1 / ticks:
                continue
            if result.pid_namespace is not None:
                if os.stat(entry / "ns" / "pid").st_ino == result.pid_namespace:
                    alive.append(int(entry.name))
            elif int(fields[2]) == result.pid:
                alive.append(int(entry.name))
        except OSError:
            continue
    return alive


def beside(attack: str, limits: SandboxLimits = LIMITS, **kwargs: object) -> SandboxResult:
    """Run `attack` next to a normal program: the normal one must print 42, and no process of
    either run may be left once the call returns."""

    def returned(
        code: str, run_limits: SandboxLimits, **more: object
    ) -> tuple[SandboxResult, float]:
        result = run_sandboxed(code, run_limits, **more)  # type: ignore[arg-type]
        return result, boot_seconds()

    # each run on a thread of its own, so that the moment one returns is not held back by the
    # other's work (an event loop shared with 100 MB of output returned the normal run seconds
    # late, and a namespace inode freed in between was reused by another test's sandbox)
    with ThreadPoolExecutor(max_workers=2) as pool:
        bad_run = pool.submit(returned, attack, limits, **kwargs)
        good_run = pool.submit(returned, "print(6 * 7)", LIMITS)
        (bad, bad_at), (good, good_at) = bad_run.result(), good_run.result()
    assert good.ok and good.stdout == "42\n", good
    # each run is checked against the moment *it* returned: the one that ended first may have
    # its PID-namespace inode reused while the other still runs
    assert alive_in(bad, bad_at) == [] and alive_in(good, good_at) == []
    return bad


def outcomes(result: SandboxResult) -> dict[str, str]:
    """`name: OK|DENIED ...` lines the attack payloads print, as a dict."""
    found = {}
    for line in result.stdout.splitlines():
        name, _, rest = line.partition(": ")
        if rest.startswith(("OK", "DENIED")):
            found[name] = rest
    return found


HEADER = """
import os, sys
def attempt(name, fn):
    try:
        value = fn()
        print(f"{name}: OK {value!r}"[:200])
    except BaseException as exc:
        print(f"{name}: DENIED {type(exc).__name__}: {exc}"[:200])
"""
"""Defines `attempt(name, fn)`, which prints `name: OK value` or `name: DENIED error`."""

HOOK_OFF = """
import gc
for obj in gc.get_objects():
    cells = getattr(obj, '__closure__', None) if callable(obj) else None
    if getattr(obj, '__name__', '') == 'hook' and cells:
        for cell in cells:
            if getattr(cell.cell_contents, '__name__', '') == 'deny':
                cell.cell_contents = lambda *a: None
"""
"""Switches the audit hook off (its `deny` replaced through the garbage collector)."""

ATTACK = HEADER + HOOK_OFF
"""What an attack starts with: `attempt` defined and the audit hook off."""

PAYLOAD = """
def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return pid
attempt("fork", fork)
attempt("exec", lambda: os.execv("/bin/sh", ["sh", "-c", "echo escaped"]))
attempt("write", lambda: open(MARKER, "w").write("escaped"))
"""
"""After a bypass of the audit hook: a fork, an exec and a write outside the working folder
(`MARKER` is defined by the test)."""


def host_has_no(path: Path) -> bool:
    """True when `path` does not exist on the host (cleans it up if it does)."""
    if path.exists():
        with contextlib.suppress(OSError):
            path.unlink()
        return False
    return True
