"""A sandbox for model-written Python: one process per run, under hard limits.

    result = run_sandboxed("print(2 ** 100)")
    result.stdout, result.stderr, result.exit_code, result.limit   # '1267...376\\n', '', 0, None

Each run is a fresh `python -I -B` process in its own session, in a private working directory
(a new temporary one unless `workdir` is given), with a minimal environment (no variable of the
parent's: no credentials). Before the code runs, the child (`_child.py`) sets kernel limits
(`RLIMIT_CPU`, `RLIMIT_AS` for memory, `RLIMIT_FSIZE`, `RLIMIT_NPROC`, no core files), moves
into a private network namespace (only a down loopback: no network at all), switches to the
unprivileged `nobody` user when started as root, and installs an audit hook that refuses, with
a `PermissionError("sandbox: ...")` the code sees, starting processes, opening sockets, writing
or changing files outside the working directory, reading other processes' `/proc` files,
signalling other processes and calling native code through ctypes. The parent enforces the
wall-clock and output limits (it kills the process group), and kills the whole group when the
run ends, so nothing is left behind.

`SandboxResult.limit` says which limit stopped the code (`SandboxLimit`), `describe()` the
text a model sees. Linux only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

__all__ = ["SandboxLimit", "SandboxLimits", "SandboxResult", "run_sandboxed", "run_sandboxed_async"]

CHILD = Path(__file__).with_name("_child.py")
NOBODY = 65534


class SandboxLimit(StrEnum):
    """Which limit stopped a run."""

    CPU = "cpu"
    WALL = "wall"
    MEMORY = "memory"
    OUTPUT = "output"
    PROCESSES = "processes"
    NETWORK = "network"
    FILESYSTEM = "filesystem"
    SIGNAL = "signal"
    NATIVE = "native_code"


_REFUSALS = {
    "sandbox: starting processes": SandboxLimit.PROCESSES,
    "sandbox: network access": SandboxLimit.NETWORK,
    "sandbox: writing outside": SandboxLimit.FILESYSTEM,
    "sandbox: changing files outside": SandboxLimit.FILESYSTEM,
    "sandbox: reading other processes": SandboxLimit.FILESYSTEM,
    "sandbox: signalling other processes": SandboxLimit.SIGNAL,
    "sandbox: calling native code": SandboxLimit.NATIVE,
}


@dataclass(frozen=True)
class SandboxLimits:
    """The limits of one run (defaults fit small math programs)."""

    cpu_seconds: int = 5
    """CPU time (SIGXCPU at this many seconds, SIGKILL one second later)."""
    wall_seconds: float = 10.0
    """Wall-clock time before the parent kills the process group."""
    memory_bytes: int = 512 * 1024**2
    """Address space (`RLIMIT_AS`): an allocation beyond it raises MemoryError."""
    output_bytes: int = 16 * 1024
    """Stdout plus stderr kept; more output kills the run (limit `output`)."""
    file_bytes: int = 16 * 1024**2
    """Largest file the code may write (`RLIMIT_FSIZE`)."""
    processes: int = 64
    """`RLIMIT_NPROC` of the sandbox user (a kernel backstop: starting processes is refused)."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {value}")


@dataclass(frozen=True)
class SandboxResult:
    """What one run printed, how it ended and which limit (if any) stopped it."""

    stdout: str
    stderr: str
    exit_code: int | None
    """The process's exit status (negative: killed by that signal)."""
    limit: SandboxLimit | None
    seconds: float
    truncated: bool = False
    """Output beyond `output_bytes` was dropped."""
    pid: int = 0
    """The run's process id (also its process group id)."""

    @property
    def ok(self) -> bool:
        """True when the code exited normally with status 0 under every limit."""
        return self.exit_code == 0 and self.limit is None

    def describe(self, max_chars: int = 2000) -> str:
        """The run as a tool message: output, errors and what stopped it."""
        parts = []
        if self.stdout:
            parts.append(_cut(self.stdout, max_chars))
        if self.stderr:
            parts.append("stderr:\n" + _cut(self.stderr, max_chars))
        if self.limit is not None:
            parts.append(f"[stopped: {_LIMIT_TEXT[self.limit]}]")
        elif self.exit_code not in (0, None):
            parts.append(f"[exit status {self.exit_code}]")
        if self.truncated:
            parts.append("[output truncated]")
        return "\n".join(parts) if parts else "[no output]"


_LIMIT_TEXT = {
    SandboxLimit.CPU: "CPU time limit exceeded",
    SandboxLimit.WALL: "wall-clock time limit exceeded; the process was killed",
    SandboxLimit.MEMORY: "memory limit exceeded",
    SandboxLimit.OUTPUT: "output limit exceeded; the process was killed",
    SandboxLimit.PROCESSES: "starting processes is not allowed",
    SandboxLimit.NETWORK: "network access is not allowed",
    SandboxLimit.FILESYSTEM: "only the working directory is writable",
    SandboxLimit.SIGNAL: "signalling other processes is not allowed",
    SandboxLimit.NATIVE: "calling native code (ctypes) is not allowed",
}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more chars)"


def _env(workdir: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }


async def _read(stream: asyncio.StreamReader, sink: bytearray, room: list[int]) -> bool:
    """Read `stream` into `sink` while `room` (shared with the other stream) lasts; True when
    the output went over the limit."""
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return False
        keep = chunk[: max(room[0], 0)]
        sink.extend(keep)
        room[0] -= len(chunk)
        if room[0] < 0:
            return True


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _classify(code: int | None, stderr: str, killed: SandboxLimit | None) -> SandboxLimit | None:
    if killed is not None:
        return killed
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        return SandboxLimit.CPU  # only the kernel's CPU limit sends these unless we killed it
    tail = stderr[-2000:]
    if "MemoryError" in tail:
        return SandboxLimit.MEMORY
    for marker, limit in _REFUSALS.items():
        if marker in tail:
            return limit
    return None


async def run_sandboxed_async(
    code: str, limits: SandboxLimits | None = None, *, workdir: Path | None = None
) -> SandboxResult:
    """Run `code` in a fresh sandboxed interpreter (see the module text); never raises for
    anything the code does. `workdir` (created if missing) persists files across runs."""
    limits = limits or SandboxLimits()
    own = workdir is None
    folder = Path(tempfile.mkdtemp(prefix="agentrl-sandbox-")) if workdir is None else workdir
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o700)
    cfg = json.dumps(asdict(limits))
    start = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-B",
        str(CHILD),
        cfg,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=folder,
        env=_env(folder),
        start_new_session=True,
    )
    out, err = bytearray(), bytearray()
    room = [limits.output_bytes]
    killed: SandboxLimit | None = None
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        try:
            process.stdin.write(code.encode("utf-8", "replace"))
            await process.stdin.drain()
            process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass
        readers = [
            asyncio.ensure_future(_read(process.stdout, out, room)),
            asyncio.ensure_future(_read(process.stderr, err, room)),
        ]
        done, _ = await asyncio.wait(
            readers, timeout=limits.wall_seconds, return_when=asyncio.FIRST_COMPLETED
        )
        if any(task.result() for task in done):
            killed = SandboxLimit.OUTPUT
        else:
            remaining = max(0.0, limits.wall_seconds - (time.monotonic() - start))
            done, pending = await asyncio.wait(readers, timeout=remaining)
            if any(task.result() for task in done):
                killed = SandboxLimit.OUTPUT
            elif pending:
                killed = SandboxLimit.WALL
        if killed is not None:
            _kill_group(process.pid)
        for task in readers:
            task.cancel()
        try:
            exit_code: int | None = await asyncio.wait_for(process.wait(), 5.0)
        except TimeoutError:
            exit_code = None
    finally:
        _kill_group(process.pid)
        if process.returncode is None:
            process.kill()
            await process.wait()
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    stderr = err.decode("utf-8", "replace")
    return SandboxResult(
        stdout=out.decode("utf-8", "replace"),
        stderr=stderr,
        exit_code=exit_code,
        limit=_classify(exit_code, stderr, killed),
        seconds=time.monotonic() - start,
        truncated=room[0] < 0,
        pid=process.pid,
    )


def run_sandboxed(
    code: str, limits: SandboxLimits | None = None, *, workdir: Path | None = None
) -> SandboxResult:
    """`run_sandboxed_async` for synchronous code (starts its own event loop)."""
    return asyncio.run(run_sandboxed_async(code, limits, workdir=workdir))
