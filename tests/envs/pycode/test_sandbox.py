"""The sandbox under attack: each case checks what the model sees, that a batch of runs goes
on, and that no process is left behind. Limits are small (1 s CPU, 256 MB) to stay fast."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import uuid
from pathlib import Path

import pytest

from agentrl.envs.pycode.sandbox import (
    SandboxLimit,
    SandboxLimits,
    SandboxResult,
    run_sandboxed,
    run_sandboxed_async,
)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux only")

LIMITS = SandboxLimits(cpu_seconds=1, wall_seconds=4.0, memory_bytes=256 * 1024**2)


def group_alive(pgid: int) -> list[int]:
    """Processes still in the run's process group."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


def batch(attack: str) -> tuple[SandboxResult, SandboxResult]:
    """The attack and a normal run side by side: the normal one must be unaffected."""

    async def both() -> tuple[SandboxResult, SandboxResult]:
        bad, good = await asyncio.gather(
            run_sandboxed_async(attack, LIMITS), run_sandboxed_async("print(6 * 7)", LIMITS)
        )
        return bad, good

    bad, good = asyncio.run(both())
    assert good.ok and good.stdout == "42\n"
    assert group_alive(bad.pid) == [] and group_alive(good.pid) == []
    return bad, good


def test_normal_code_prints_and_exits_zero() -> None:
    result = run_sandboxed("import math\nprint(math.comb(10, 3))", LIMITS)
    assert result.ok and result.stdout == "120\n" and result.stderr == ""
    assert result.describe() == "120\n"


def test_errors_show_the_traceback_of_the_code_only() -> None:
    result = run_sandboxed("def f(x):\n    return 1 / x\nf(0)", LIMITS)
    assert result.exit_code == 1 and result.limit is None
    assert 'File "main.py", line 2, in f' in result.stderr
    assert "ZeroDivisionError: division by zero" in result.stderr
    assert "_child.py" not in result.stderr
    assert result.describe().endswith("[exit status 1]")


def test_infinite_loop_hits_the_cpu_limit() -> None:
    bad, _ = batch("while True:\n    pass")
    assert bad.limit is SandboxLimit.CPU
    assert bad.describe() == "[stopped: CPU time limit exceeded]"


def test_sleeping_forever_hits_the_wall_limit() -> None:
    limits = SandboxLimits(cpu_seconds=1, wall_seconds=1.0, memory_bytes=256 * 1024**2)
    result = run_sandboxed("import time\ntime.sleep(60)", limits)
    assert result.limit is SandboxLimit.WALL and result.seconds < 5
    assert "wall-clock time limit exceeded" in result.describe()
    assert group_alive(result.pid) == []


def test_allocating_10_gb_is_a_memory_error() -> None:
    bad, _ = batch("data = bytearray(10 * 1024**3)")
    assert bad.limit is SandboxLimit.MEMORY
    assert "MemoryError" in bad.stderr and "[stopped: memory limit exceeded]" in bad.describe()


def test_fork_bomb_is_refused() -> None:
    bad, _ = batch("import os\nwhile True:\n    os.fork()")
    assert bad.limit is SandboxLimit.PROCESSES
    assert "PermissionError: sandbox: starting processes is not allowed" in bad.stderr


def test_subprocess_and_ctypes_fork_are_refused() -> None:
    spawn, _ = batch("import subprocess\nsubprocess.run(['sleep', '30'])")
    assert spawn.limit is SandboxLimit.PROCESSES
    native, _ = batch("import ctypes\nctypes.CDLL(None).fork()")
    assert native.limit is SandboxLimit.NATIVE


def test_writing_outside_the_working_directory_is_refused(tmp_path: Path) -> None:
    target = tmp_path / f"escape-{uuid.uuid4().hex}"
    outside = Path("/tmp") / f"agentrl-escape-{uuid.uuid4().hex}"
    code = (
        "open('inside.txt', 'w').write('ok')\n"
        "print(open('inside.txt').read())\n"
        f"open({str(outside)!r}, 'w').write('x')\n"
    )
    bad, _ = batch(code)
    assert bad.stdout == "ok\n" and bad.limit is SandboxLimit.FILESYSTEM
    assert "sandbox: writing outside the working directory is not allowed" in bad.stderr
    assert not outside.exists()
    bad, _ = batch(f"import os\nos.rename('.', {str(target)!r})")
    assert bad.limit is SandboxLimit.FILESYSTEM and not target.exists()


def test_socket_to_loopback_is_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        code = f"import socket\ns = socket.socket()\ns.connect(('127.0.0.1', {port}))\nprint('in')"
        bad, _ = batch(code)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever connected
    assert bad.limit is SandboxLimit.NETWORK and bad.stdout == ""
    assert "sandbox: network access is not allowed" in bad.stderr


def test_parent_environment_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = uuid.uuid4().hex
    monkeypatch.setenv("AGENTRL_TEST_SECRET", secret)
    bad, _ = batch(
        "import os\nprint(sorted(os.environ))\n"
        "print(open(f'/proc/{os.getppid()}/environ', 'rb').read())"
    )
    assert secret not in bad.stdout + bad.stderr
    assert bad.stdout.startswith("['HOME', 'LANG', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS'")
    assert bad.limit is SandboxLimit.FILESYSTEM
    assert "sandbox: reading other processes is not allowed" in bad.stderr


def test_printing_100_mb_is_cut_at_the_output_limit() -> None:
    bad, _ = batch("import sys\nsys.stdout.write('x' * 100_000_000)")
    assert bad.limit is SandboxLimit.OUTPUT and bad.truncated
    assert len(bad.stdout) <= LIMITS.output_bytes
    text = bad.describe()
    assert "output limit exceeded" in text and len(text) < 3000


def test_killing_the_parent_is_refused() -> None:
    bad, _ = batch("import os\nos.kill(os.getppid(), 9)\nprint('survived')")
    assert bad.limit is SandboxLimit.SIGNAL and bad.stdout == ""
    assert "sandbox: signalling other processes is not allowed" in bad.stderr
    os.kill(os.getpid(), 0)  # this process is alive


def test_a_workdir_keeps_files_between_runs(tmp_path: Path) -> None:
    folder = tmp_path / "branch"
    assert run_sandboxed("open('n.txt', 'w').write('41')", LIMITS, workdir=folder).ok
    again = run_sandboxed("x = 1\nprint(int(open('n.txt').read()) + x)", LIMITS, workdir=folder)
    assert again.stdout == "42\n"
    fresh = run_sandboxed("print(x)", LIMITS, workdir=folder)
    assert "NameError" in fresh.stderr  # variables do not persist: a fresh interpreter per run
