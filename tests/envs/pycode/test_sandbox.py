"""The sandbox under attack: each case checks what the model sees, that a batch of runs goes
on, and that no process is left behind. Limits are small (1 s CPU, 256 MB) to stay fast."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from agentrl.envs.pycode import isolation
from agentrl.envs.pycode.sandbox import (
    SandboxLimit,
    SandboxLimits,
    SandboxMode,
    SandboxResult,
    SandboxUnavailable,
    run_sandboxed,
)
from tests.envs.pycode.sandbox_helpers import HOOK_OFF, alive_in, beside, boot_seconds

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux only")

MODES = [SandboxMode.STRICT, SandboxMode.UNSAFE_PROCESSES]

LIMITS = SandboxLimits(cpu_seconds=1, wall_seconds=4.0, memory_bytes=256 * 1024**2)


def batch(attack: str, mode: SandboxMode = SandboxMode.STRICT) -> tuple[SandboxResult, None]:
    """The attack beside a normal run (see `beside`)."""
    return beside(attack, LIMITS, mode=mode), None


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


@pytest.mark.parametrize("mode", MODES)
def test_infinite_loop_hits_the_cpu_limit(mode: SandboxMode) -> None:
    bad, _ = batch("while True:\n    pass", mode)
    assert bad.limit is SandboxLimit.CPU
    assert bad.describe() == "[stopped: CPU time limit exceeded]"


def test_sleeping_forever_hits_the_wall_limit() -> None:
    limits = SandboxLimits(cpu_seconds=1, wall_seconds=1.0, memory_bytes=256 * 1024**2)
    result = run_sandboxed("import time\ntime.sleep(60)", limits)
    returned_at = boot_seconds()  # what starts later is another run's (a reused namespace)
    assert result.limit is SandboxLimit.WALL and result.seconds < 5
    assert "wall-clock time limit exceeded" in result.describe()
    assert alive_in(result, returned_at) == []


@pytest.mark.parametrize("mode", MODES)
def test_allocating_10_gb_is_a_memory_error(mode: SandboxMode) -> None:
    bad, _ = batch("data = bytearray(10 * 1024**3)", mode)
    assert bad.limit is SandboxLimit.MEMORY
    assert "MemoryError" in bad.stderr and "[stopped: memory limit exceeded]" in bad.describe()


@pytest.mark.parametrize("mode", MODES)
def test_fork_bomb_is_refused(mode: SandboxMode) -> None:
    bad, _ = batch("import os\nwhile True:\n    os.fork()", mode)
    assert bad.limit is SandboxLimit.PROCESSES
    assert "PermissionError: sandbox: starting processes is not allowed" in bad.stderr


@pytest.mark.parametrize("mode", MODES)
def test_subprocess_and_ctypes_fork_are_refused(mode: SandboxMode) -> None:
    spawn, _ = batch("import subprocess\nsubprocess.run(['sleep', '30'])", mode)
    assert spawn.limit is SandboxLimit.PROCESSES
    native, _ = batch("import ctypes\nprint(ctypes.CDLL(None).fork())", mode)
    if mode is SandboxMode.UNSAFE_PROCESSES:
        assert native.limit is SandboxLimit.NATIVE
    else:  # ctypes is allowed; the kernel refuses the fork
        assert native.stdout == "-1\n" and native.ok


@pytest.mark.parametrize("mode", MODES)
def test_writing_outside_the_working_directory_is_refused(
    tmp_path: Path, mode: SandboxMode
) -> None:
    target = tmp_path / f"escape-{uuid.uuid4().hex}"
    outside = Path("/tmp") / f"agentrl-escape-{uuid.uuid4().hex}"
    code = (
        "open('inside.txt', 'w').write('ok')\n"
        "print(open('inside.txt').read())\n"
        f"open({str(outside)!r}, 'w').write('x')\n"
    )
    bad, _ = batch(code, mode)
    assert bad.stdout == "ok\n" and bad.limit is SandboxLimit.FILESYSTEM
    assert "sandbox: writing outside the working directory is not allowed" in bad.stderr
    assert not outside.exists()
    bad, _ = batch(f"import os\nos.rename('.', {str(target)!r})", mode)
    assert bad.limit is SandboxLimit.FILESYSTEM and not target.exists()


@pytest.mark.parametrize("mode", MODES)
def test_socket_to_loopback_is_refused(mode: SandboxMode) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.2)
        port = server.getsockname()[1]
        code = f"import socket\ns = socket.socket()\ns.connect(('127.0.0.1', {port}))\nprint('in')"
        bad, _ = batch(code, mode)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever connected
    assert bad.limit is SandboxLimit.NETWORK and bad.stdout == ""
    assert "sandbox: network access is not allowed" in bad.stderr


@pytest.mark.parametrize("mode", MODES)
def test_parent_environment_is_not_visible(
    monkeypatch: pytest.MonkeyPatch, mode: SandboxMode
) -> None:
    secret = uuid.uuid4().hex
    monkeypatch.setenv("AGENTRL_TEST_SECRET", secret)
    bad, _ = batch(
        mode=mode,
        attack="import os\nprint(sorted(os.environ))\n"
        "print(open(f'/proc/{os.getppid()}/environ', 'rb').read())",
    )
    assert secret not in bad.stdout + bad.stderr
    assert bad.stdout.startswith("['HOME', 'LANG', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS'")
    assert bad.limit is SandboxLimit.FILESYSTEM
    assert "sandbox: reading other processes is not allowed" in bad.stderr


@pytest.mark.parametrize("mode", MODES)
def test_printing_100_mb_is_cut_at_the_output_limit(mode: SandboxMode) -> None:
    bad, _ = batch("import sys\nsys.stdout.write('x' * 100_000_000)", mode)
    assert bad.limit is SandboxLimit.OUTPUT and bad.truncated
    assert len(bad.stdout) <= LIMITS.output_bytes
    text = bad.describe()
    assert "output limit exceeded" in text and len(text) < 3000


@pytest.mark.parametrize("mode", MODES)
def test_killing_the_parent_fails(mode: SandboxMode) -> None:
    """Unsafe mode: the hook refuses; strict mode: the parent is not in the run's PID
    namespace (its parent pid reads 0)."""
    bad, _ = batch(f"import os\nos.kill({os.getpid()}, 9)\nprint('survived')", mode)
    assert bad.stdout == ""
    assert "sandbox: signalling other processes is not allowed" in bad.stderr
    if mode is SandboxMode.STRICT:
        code = "import os\nprint(os.getppid())\ntry:\n    os.kill(%d, 9)\nexcept OSError as e:\n"
        code += "    print(type(e).__name__)"
        bad, _ = batch(HOOK_OFF + code % os.getpid())
        assert bad.stdout == "0\nProcessLookupError\n"
    os.kill(os.getpid(), 0)  # this process is alive


def test_a_workdir_keeps_files_between_runs(tmp_path: Path) -> None:
    folder = tmp_path / "branch"
    assert run_sandboxed("open('n.txt', 'w').write('41')", LIMITS, workdir=folder).ok
    again = run_sandboxed("x = 1\nprint(int(open('n.txt').read()) + x)", LIMITS, workdir=folder)
    assert again.stdout == "42\n"
    fresh = run_sandboxed("print(x)", LIMITS, workdir=folder)
    assert "NameError" in fresh.stderr  # variables do not persist: a fresh interpreter per run


def test_a_program_stopped_by_a_limit_leaves_the_workdir_as_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "branch"
    first = run_sandboxed("open('n.txt', 'w').write('1')", LIMITS, workdir=folder)
    assert first.ok and first.saved
    stopped = run_sandboxed(
        "open('n.txt', 'w').write('2')\nwhile True:\n    pass", LIMITS, workdir=folder
    )
    assert stopped.limit is SandboxLimit.CPU and not stopped.saved
    assert (folder / "n.txt").read_text() == "1"


def test_the_kernel_layers_are_on_in_strict_mode() -> None:
    code = (
        "status = dict(line.split(':\\t') for line in open('/proc/self/status').read().splitlines()"
        " if ':\\t' in line)\n"
        "print(status['NoNewPrivs'].strip(), status['Seccomp'].strip(), status['CapEff'].strip())\n"
        "import os\nprint(os.getpid(), os.getuid(), sorted(os.listdir('/')))\n"
    )
    result = run_sandboxed(code, LIMITS)
    assert result.ok, result
    lines = result.stdout.splitlines()
    assert lines[0] == "1 2 0000000000000000"  # no new privileges, a seccomp filter, no caps
    assert lines[1] == "1 65534 " + repr(sorted(lines[1].split(" ", 2)[2][2:-2].split("', '")))
    assert "tmp" not in lines[1] and "home" not in lines[1]


def test_allow_listed_packages_import_and_others_do_not() -> None:
    pytest.importorskip("numpy")
    code = "import numpy\nprint(int(numpy.arange(4).sum()))"
    allowed = run_sandboxed(code, LIMITS, packages=("numpy",))
    assert allowed.ok and allowed.stdout == "6\n", allowed
    assert "ModuleNotFoundError" in run_sandboxed(code, LIMITS).stderr
    with pytest.raises(ValueError, match="not installed"):
        run_sandboxed("pass", LIMITS, packages=("no_such_package_xyz",))


def _fresh_probe(monkeypatch: pytest.MonkeyPatch, bwrap: str | None) -> None:
    isolation._probe.cache_clear()
    monkeypatch.setattr(isolation, "bwrap_path", lambda: bwrap)


def test_strict_mode_refuses_loudly_without_bubblewrap(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_probe(monkeypatch, None)
    try:
        with pytest.raises(SandboxUnavailable) as info:
            run_sandboxed("print(1)", LIMITS)
        text = str(info.value)
        assert "bubblewrap" in text and "apt-get install bubblewrap" in text
        assert "--sandbox unsafe-processes" in text
        unsafe = run_sandboxed("print(1)", LIMITS, mode=SandboxMode.UNSAFE_PROCESSES)
        assert unsafe.ok and unsafe.stdout == "1\n"  # only when asked for by name
    finally:
        isolation._probe.cache_clear()


def test_strict_mode_names_the_missing_kernel_feature(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="agentrl-fake-bwrap-"))  # reachable by `nobody`
    folder.chmod(0o755)
    fake = folder / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    _fresh_probe(monkeypatch, str(fake))
    try:
        with pytest.raises(SandboxUnavailable, match="unprivileged user namespaces"):
            run_sandboxed("print(1)", LIMITS)
    finally:
        isolation._probe.cache_clear()
        shutil.rmtree(folder)
