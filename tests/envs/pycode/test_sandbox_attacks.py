"""The strict sandbox under attack, as model-written code would try it during RL.

Each case checks what the model sees, that a normal run beside it still prints 42 (`beside`),
and that no process of either run is left in its PID namespace. The audit hook is switched
off first, in seven ways, to show that the kernel (namespaces, read-only mounts, seccomp,
rlimits, a size-capped tmpfs) is what holds. `test_sandbox_nonroot.py` runs this module again
as an unprivileged user.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import tarfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from agentrl.envs.pycode.isolation import SandboxUnavailable, require_strict
from agentrl.envs.pycode.sandbox import (
    SandboxLimit,
    SandboxLimits,
    run_sandboxed,
    run_sandboxed_async,
)
from tests.envs.pycode.sandbox_helpers import (
    ATTACK,
    HEADER,
    HOOK_OFF,
    LIMITS,
    PAYLOAD,
    alive_in,
    beside,
    boot_seconds,
    host_has_no,
    outcomes,
)

try:
    require_strict()
    STRICT_PROBLEM = ""
except SandboxUnavailable as exc:
    STRICT_PROBLEM = str(exc)

pytestmark = pytest.mark.skipif(bool(STRICT_PROBLEM), reason=STRICT_PROBLEM or "strict sandbox")

WRITABLE_HOST_DIR = Path(
    "/usr/lib" if os.access("/usr/lib", os.W_OK) else os.path.dirname(os.__file__)
)
"""A folder the sandbox sees (read-only) that the host may write: root's `/usr/lib`, or, for a
normal user, the standard library (the user's own under pyenv or a venv of theirs)."""

BYPASSES: dict[str, tuple[str, tuple[str, ...]]] = {
    # 1. the hook's public face
    "patch sys.audit": ("sys.audit = lambda *a, **k: None", ()),
    # 2. the hook's own closure, found through the garbage collector
    "gc closure": (HOOK_OFF, ("fork", "exec", "write")),
    # 3. the C function under subprocess, which no audit event covers
    "_posixsubprocess.fork_exec": (
        "import _posixsubprocess\n"
        "def spawn():\n"
        "    r, w = os.pipe()\n"
        "    exe = sys.executable.encode()\n"
        "    return _posixsubprocess.fork_exec([exe, b'-c', b'pass'], [exe], True, (w,), None,"
        " None, -1, -1, -1, -1, -1, -1, r, w, True, True, -1, None, None, None, -1, None,"
        " False)\n"
        "attempt('spawn', spawn)\n",
        (),
    ),
    # 4. relative paths after a chdir: the hook resolves them against the working folder
    "chdir + relative path": (f"os.chdir({str(WRITABLE_HOST_DIR)!r})\nRELATIVE = True", ("write",)),
    # 5. dir_fd: the hook sees only the name
    "dir_fd": (
        f"_dir = os.open({str(WRITABLE_HOST_DIR)!r}, os.O_RDONLY)\n"
        "open = lambda path, mode: os.fdopen(os.open(os.path.basename(path),"
        " os.O_CREAT | os.O_WRONLY, dir_fd=_dir), mode)\n",
        ("write",),
    ),
    # 6. replacing a builtin the hook calls
    "replace builtins": ("import builtins\nbuiltins.isinstance = lambda *a: False", ("write",)),
    # 7. replacing a module attribute the hook calls
    "replace module attribute": ("os.path.realpath = lambda p: '/work/x'", ("write",)),
}


@pytest.mark.parametrize("bypass", sorted(BYPASSES))
def test_hook_bypasses_then_fork_exec_and_write_fail(bypass: str) -> None:
    prelude, hook_off = BYPASSES[bypass]
    marker = WRITABLE_HOST_DIR / f"agentrl-escape-{uuid.uuid4().hex}"
    relative = "RELATIVE = True" in prelude
    name = marker.name if relative else str(marker)
    code = HEADER + prelude + f"\nMARKER = {name!r}\n" + PAYLOAD
    bad = beside(code)
    seen = outcomes(bad)
    assert seen.keys() >= {"fork", "exec", "write"}, bad
    for step in ("fork", "exec", "write"):
        assert seen[step].startswith("DENIED"), (step, seen[step])
        if step in hook_off:  # the hook was switched off: the kernel answered
            assert "sandbox:" not in seen[step], (step, seen[step])
    if "spawn" in seen:  # no audit event: the kernel's EPERM
        assert seen["spawn"].startswith("DENIED PermissionError: [Errno 1]"), seen["spawn"]
    assert "escaped" not in bad.stdout.replace("echo escaped", "")
    assert host_has_no(marker)


def test_a_setsid_daemon_and_a_time_bomb_end_with_the_call(tmp_path: Path) -> None:
    """Processes allowed (so that the PID namespace alone is tested): a double-forked setsid
    daemon and a delayed child are gone when the call returns, and still gone 5 s later."""
    code = HOOK_OFF + (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    os._exit(0)\n"
        "if os.fork() == 0:\n"
        "    time.sleep(3)\n"
        "    print('bomb')\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "print('parent done')\n"
    )
    limits = SandboxLimits(cpu_seconds=2, wall_seconds=6.0, processes=4)
    bad = beside(code, limits)
    returned_at = boot_seconds()  # what starts later is another run's (a reused namespace)
    assert bad.stdout == "parent done\n" and bad.ok
    time.sleep(5)
    assert alive_in(bad, returned_at) == []


def test_a_branch_cannot_reach_another_branchs_folder(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "a", tmp_path / "b"
    secret = uuid.uuid4().hex
    assert run_sandboxed(f"open('secret.txt', 'w').write({secret!r})", LIMITS, workdir=theirs).ok
    assert (theirs / "secret.txt").read_text() == secret
    code = ATTACK + (
        f"attempt('host path', lambda: open({str(theirs / 'secret.txt')!r}).read())\n"
        f"attempt('list host', lambda: os.listdir({str(tmp_path)!r}))\n"
        "found = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root.startswith('/proc'):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    found += [f for f in files if f == 'secret.txt']\n"
        "print('found:', found)\n"
        f"attempt('write theirs', lambda: open({str(theirs / 'secret.txt')!r}, 'w'))\n"
    )
    result = beside(code, workdir=mine)
    seen = outcomes(result)
    assert seen["host path"].startswith("DENIED") and seen["list host"].startswith("DENIED")
    assert seen["write theirs"].startswith("DENIED")
    assert "found: []" in result.stdout and secret not in result.stdout
    assert (theirs / "secret.txt").read_text() == secret


def test_pidfd_and_kill_of_the_parent_and_of_a_concurrent_run() -> None:
    async def scenario() -> tuple[str, str]:
        sleeper = asyncio.ensure_future(
            run_sandboxed_async("import time\ntime.sleep(2)\nprint('slept')", LIMITS)
        )
        await asyncio.sleep(0.5)
        victims = [os.getpid(), os.getppid(), *_children()]
        code = ATTACK + "import signal\n"
        for pid in victims:
            code += f"attempt('kill {pid}', lambda: os.kill({pid}, signal.SIGKILL))\n"
            code += f"attempt('pidfd {pid}', lambda: os.pidfd_open({pid}))\n"
        code += "attempt('kill -1', lambda: os.kill(-1, signal.SIGKILL))\n"
        attack = await run_sandboxed_async(code, LIMITS)
        done = await sleeper
        return attack.stdout, done.stdout

    attack, slept = asyncio.run(scenario())
    lines = [line for line in attack.splitlines() if line.startswith(("kill", "pidfd"))]
    assert lines and all(": DENIED" in line for line in lines if not line.startswith("kill -1"))
    assert slept == "slept\n"  # the concurrent run was not killed
    os.kill(os.getpid(), 0)  # nor this process


def _children() -> list[int]:
    """Processes this test process started (the concurrent run's bubblewrap among them)."""
    mine = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == os.getpid():
                mine.append(int(entry.name))
    return mine


def test_a_symlink_swap_or_forged_archive_between_two_calls_changes_nothing_on_the_host(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "branch"
    target = tmp_path / "victim"
    target.mkdir(mode=0o700)
    before = target.stat()
    assert run_sandboxed("open('keep.txt', 'w').write('kept')", LIMITS, workdir=folder).ok
    swap = ATTACK + (
        f"attempt('symlink', lambda: os.symlink({str(target)!r}, 'link'))\n"
        "attempt('swap /work', lambda: os.rename('/work', '/work-old'))\n"
        f"attempt('swap link', lambda: os.symlink({str(target)!r}, '/work'))\n"
    )
    beside(swap, workdir=folder)
    # an archive of the code's own making: a link out, a path out and a device
    forged = tmp_path / "forged.tar"
    with tarfile.open(forged, "w") as archive:
        link = tarfile.TarInfo("evil")
        link.type, link.linkname = tarfile.SYMTYPE, str(target)
        archive.addfile(link)
        up = tarfile.TarInfo("../escape.txt")
        archive.addfile(up)
    payload = forged.read_bytes()
    fd_finder = (
        "import json\n"
        "fd = json.loads(open('/proc/self/cmdline').read().split('\\0')[-2])['archive_fd']\n"
        f"os.write(fd, {payload!r})\n"
        "os._exit(0)\n"
    )
    beside(fd_finder, workdir=folder)
    assert not (tmp_path / "escape.txt").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]
    again = run_sandboxed("print(open('keep.txt').read())", LIMITS, workdir=folder)
    assert again.stdout == "kept\n"
    after = target.stat()
    assert (after.st_uid, after.st_gid, after.st_mode) == (
        before.st_uid,
        before.st_gid,
        before.st_mode,
    )


def test_three_processes_of_400_mb_do_not_pass_a_512_mb_run_limit() -> None:
    code = ATTACK + (
        "import threading\n"
        "held = []\n"
        "def grab():\n"
        "    held.append(bytearray(400 * 1024**2))\n"
        "    return len(held)\n"
        "def child():\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        try:\n"
        "            bytearray(400 * 1024**2)\n"
        "            os._exit(0)\n"
        "        except MemoryError:\n"
        "            os._exit(3)\n"
        "    return os.waitpid(pid, 0)[1] >> 8\n"
        "for i in range(3):\n"
        "    attempt(f'child {i}', child)\n"
        "for i in range(3):\n"
        "    attempt(f'grab {i}', grab)\n"
    )
    for processes in (1, 3):
        limits = SandboxLimits(cpu_seconds=4, wall_seconds=10.0, processes=processes)
        result = beside(code, limits)
        seen = outcomes(result)
        children_ok = [k for k, v in seen.items() if k.startswith("child") and v == "OK 0"]
        grabs_ok = [k for k, v in seen.items() if k.startswith("grab") and v.startswith("OK")]
        held = 400 * (len(children_ok) + len(grabs_ok))
        assert held <= 512, (processes, seen)


def test_writing_1_gb_stops_at_the_disk_limit() -> None:
    code = HOOK_OFF + (
        "import os\n"
        "block = b'x' * (1 << 20)\n"
        "written = 0\n"
        "try:\n"
        "    for i in range(64):\n"
        "        with open(f'f{i}', 'wb') as f:\n"
        "            for _ in range(16):\n"
        "                f.write(block)\n"
        "                written += 1\n"
        "except OSError as exc:\n"
        "    print('stopped', exc.errno)\n"
        "print('MiB', written)\n"
    )
    limits = SandboxLimits(cpu_seconds=4, wall_seconds=10.0, disk_bytes=32 * 1024**2)
    result = beside(code, limits)
    written = int(result.stdout.split("MiB")[1])
    assert "stopped 28" in result.stdout  # ENOSPC
    assert written <= 32


def test_dev_shm_and_tmp_are_not_writable() -> None:
    name = f"agentrl-{uuid.uuid4().hex}"
    code = ATTACK + (
        f"attempt('shm', lambda: open('/dev/shm/{name}', 'w'))\n"
        f"attempt('dev', lambda: open('/dev/{name}', 'w'))\n"
        f"attempt('tmp', lambda: open('/tmp/{name}', 'w'))\n"
        f"attempt('root', lambda: open('/{name}', 'w'))\n"
    )
    seen = outcomes(beside(code))
    assert all(seen[k].startswith("DENIED") for k in ("shm", "dev", "tmp", "root")), seen
    assert host_has_no(Path("/dev/shm") / name) and host_has_no(Path("/tmp") / name)


def test_a_unix_socket_of_the_host_cannot_be_reached(tmp_path: Path) -> None:
    path = tmp_path / "host.sock"
    abstract = f"\0agentrl-{uuid.uuid4().hex}"
    servers = []
    for address in (str(path), abstract):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(1)
        server.settimeout(0.3)
        servers.append(server)
    code = ATTACK + (
        "import socket\n"
        f"attempt('path', lambda: socket.socket(socket.AF_UNIX).connect({str(path)!r}))\n"
        f"attempt('abstract', lambda: socket.socket(socket.AF_UNIX).connect({abstract!r}))\n"
        "import _socket\n"
        "attempt('inet', lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM))\n"
    )
    try:
        seen = outcomes(beside(code))
        for server in servers:
            with pytest.raises(TimeoutError):
                server.accept()  # nothing ever connected
    finally:
        for server in servers:
            server.close()
    assert all(seen[k].startswith("DENIED") for k in ("path", "abstract", "inet")), seen


def test_the_env_task_and_checker_code_is_not_importable() -> None:
    import agentrl.envs.pycode.families as families

    code = ATTACK + (
        "attempt('import agentrl', lambda: __import__('agentrl'))\n"
        "attempt('import families', lambda: __import__('agentrl.envs.pycode.families'))\n"
        f"attempt('read families', lambda: open({families.__file__!r}).read()[:10])\n"
        "attempt('numpy', lambda: __import__('numpy'))\n"
        "attempt('site-packages', lambda: os.listdir("
        f"{str(Path(families.__file__).parents[4])!r}))\n"
    )
    seen = outcomes(beside(code))
    assert seen["import agentrl"].startswith("DENIED ModuleNotFoundError")
    assert seen["import families"].startswith("DENIED ModuleNotFoundError")
    assert seen["read families"].startswith("DENIED")
    assert seen["numpy"].startswith("DENIED ModuleNotFoundError")
    assert seen["site-packages"].startswith("DENIED")


def test_proc_shows_neither_the_trainer_nor_its_files(tmp_path: Path) -> None:
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    (run_folder / "config.json").write_text('{"secret": "' + uuid.uuid4().hex + '"}')
    code = ATTACK + (
        "attempt('cmdline 1', lambda: open('/proc/1/cmdline').read().split('\\0')[0])\n"
        "attempt('pids', lambda: sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        f"attempt('parent', lambda: open('/proc/{os.getpid()}/cmdline').read())\n"
        f"attempt('config', lambda: open({str(run_folder / 'config.json')!r}).read())\n"
        "attempt('ssh', lambda: os.listdir(os.path.expanduser('~/.ssh')))\n"
        "attempt('root ssh', lambda: os.listdir('/root/.ssh'))\n"
    )
    seen = outcomes(beside(code))
    assert seen["cmdline 1"] == f"OK {os.path.realpath(sys._base_executable)!r}"  # itself
    assert seen["pids"] == "OK ['1']"
    for key in ("parent", "config", "ssh", "root ssh"):
        assert seen[key].startswith("DENIED"), (key, seen[key])


def test_many_threads_do_not_use_up_another_runs_limit() -> None:
    code = ATTACK + (
        "import threading, time\n"
        "def spawn_all():\n"
        "    started = 0\n"
        "    try:\n"
        "        for _ in range(10000):\n"
        "            threading.Thread(target=time.sleep, args=(3,), daemon=True).start()\n"
        "            started += 1\n"
        "    except RuntimeError:\n"
        "        pass\n"
        "    return started\n"
        "attempt('threads', spawn_all)\n"
    )
    result = beside(code)
    started = int(outcomes(result)["threads"].split()[1])
    assert 0 < started < 64


def test_output_of_a_thread_after_the_call_never_arrives() -> None:
    """A daemon thread that prints later dies with the process (nothing outlives the call)."""
    code = (
        "import threading, time, sys\n"
        "threading.Thread(target=lambda: (time.sleep(1), print('late')), daemon=True).start()\n"
        "print('now')\n"
    )
    result = beside(code)
    returned_at = boot_seconds()
    assert result.stdout == "now\n"
    stop = threading.Event()
    stop.wait(1.5)
    assert alive_in(result, returned_at) == []


def test_limits_of_a_run_show_as_before() -> None:
    """The model still sees the usual limit texts under the strict sandbox."""
    cpu = beside("while True:\n    pass")
    assert cpu.limit is SandboxLimit.CPU
    memory = beside("data = bytearray(10 * 1024**3)")
    assert memory.limit is SandboxLimit.MEMORY


def test_the_users_home_and_checkpoints_are_out_of_reach(tmp_path: Path) -> None:
    """As a normal user (`test_sandbox_nonroot.py`) the code would run with the trainer's own
    uid outside its namespace: still no `~/.ssh`, no checkpoint, no killing the trainer."""
    checkpoint = tmp_path / "checkpoint.pt"
    checkpoint.write_bytes(b"weights")
    keys = Path.home() / ".ssh" / "authorized_keys"
    before = keys.read_bytes() if keys.exists() else None
    code = ATTACK + (
        f"attempt('read keys', lambda: open({str(keys)!r}).read())\n"
        f"attempt('append keys', lambda: open({str(keys)!r}, 'a').write('ssh-rsa AAAA x'))\n"
        f"attempt('delete checkpoint', lambda: os.remove({str(checkpoint)!r}))\n"
        f"attempt('kill trainer', lambda: os.kill({os.getpid()}, 9))\n"
    )
    seen = outcomes(beside(code))
    assert all(v.startswith("DENIED") for v in seen.values()) and len(seen) == 4, seen
    assert checkpoint.read_bytes() == b"weights"
    assert (keys.read_bytes() if keys.exists() else None) == before
