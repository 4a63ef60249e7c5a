"""A sandbox for model-written Python: each call in its own namespaces, under hard limits.

    result = run_sandboxed("print(2 ** 100)")
    result.stdout, result.stderr, result.exit_code, result.limit   # '1267...376\\n', '', 0, None

Strict mode (the default, `SandboxMode.STRICT`) runs each call under bubblewrap: its own user,
PID, mount, network, IPC, UTS and cgroup namespaces, a private `/proc`, only the interpreter,
its standard library and the system's shared libraries visible (read-only), a fresh tmpfs of
`disk_bytes` as the working folder (`/work`), no network, a seccomp filter (`seccomp.py`) and
`PR_SET_NO_NEW_PRIVS`. The code runs as PID 1 of its namespace: when it ends, or when the parent
kills it for the wall-clock or output limit, the kernel ends every process of the run. Where the
host cannot give this, the call raises `SandboxUnavailable` (see `isolation.py`);
`SandboxMode.UNSAFE_PROCESSES` must be asked for by name.

Inside, `_child.py` sets the rlimits (`RLIMIT_CPU`, `RLIMIT_AS`, `RLIMIT_FSIZE`, `RLIMIT_NPROC`,
no core files), restores the branch's files (`workfiles.py`) and installs an audit hook that
turns the common refusals into a readable `PermissionError("sandbox: ...")`; the hook is a
courtesy, the kernel is the boundary. See docs/pycode.md for the threat model and the attacks
the tests cover. Linux only.
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

from agentrl.config.names import SandboxMode
from agentrl.envs.pycode import isolation, workfiles
from agentrl.envs.pycode.isolation import SandboxUnavailable
from agentrl.envs.pycode.seccomp import seccomp_program

__all__ = [
    "SandboxLimit",
    "SandboxLimits",
    "SandboxMode",
    "SandboxResult",
    "SandboxUnavailable",
    "run_sandboxed",
    "run_sandboxed_async",
]

CHILD_SOURCE = Path(__file__).with_name("_child.py").read_text()
NOBODY = isolation.NOBODY
THREADS = 32
"""Tasks (threads) a single-process run may have (`RLIMIT_NPROC` inside its user namespace)."""
WORKDIR = "/work"


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
    processes: int = 1
    """Processes the run may have at once. 1: the code cannot start any (`fork`, `exec` of a
    new process refused by seccomp), so `memory_bytes` bounds the whole run. N > 1: each of at
    most N tasks gets `memory_bytes // N` of address space (`RLIMIT_NPROC` counts threads)."""
    disk_bytes: int = 64 * 1024**2
    """Size of the run's tmpfs working folder (strict mode), and the most a branch's working
    folder may carry from one call to the next."""

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
    """The process the parent started (bubblewrap in strict mode; its process group id)."""
    pid_namespace: int | None = None
    """The inode of the run's PID namespace (strict mode): no process has it once the call
    returns."""
    saved: bool = False
    """The working folder's files came back (the program ended by itself)."""

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


async def _pipe_reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """An asyncio reader of the read end `fd` of a pipe, and its transport (to close)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader, transport


async def _drain(reader: asyncio.StreamReader, limit: int) -> bytes | None:
    """Everything on `reader` up to `limit` bytes (None: more than that)."""
    data = bytearray()
    while chunk := await reader.read(65536):
        if len(data) + len(chunk) > limit:
            return None
        data.extend(chunk)
    return bytes(data)


async def _discard(*streams: asyncio.StreamReader) -> None:
    for stream in streams:
        while await stream.read(65536):
            pass


def _pipe_with(data: bytes) -> int:
    """The read end of a pipe holding `data` (at most a pipe buffer), write end closed."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def _child_config(limits: SandboxLimits, mode: SandboxMode, archive_fd: int) -> str:
    single = limits.processes == 1
    return json.dumps(
        {
            "cpu_seconds": limits.cpu_seconds,
            "memory_bytes": limits.memory_bytes
            if single
            else limits.memory_bytes // limits.processes,
            "file_bytes": min(limits.file_bytes, limits.disk_bytes),
            "tasks": THREADS if single else limits.processes,
            "processes": not single,
            "native": mode is SandboxMode.STRICT,  # ctypes is harmless under the kernel's limits
            "drop_to_nobody": mode is SandboxMode.UNSAFE_PROCESSES and os.geteuid() == 0,
            "archive_fd": archive_fd,
            "site": [isolation.SANDBOX_SITE],
        }
    )


def _inside_env(home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
    }


@dataclass
class _Launch:
    """One started run: the command line and the descriptors the child inherits."""

    command: list[str]
    pass_fds: list[int]
    cwd: str
    env: dict[str, str]
    user: int | None
    info_fd: int | None
    """Our read end of bubblewrap's `--info-fd` (namespace ids)."""
    scratch: Path | None
    """Unsafe mode: the temporary working folder the parent made."""


def _strict_launch(limits: SandboxLimits, packages: tuple[str, ...], archive_w: int) -> _Launch:
    isolation.require_strict()
    runtime = isolation.sandbox_runtime(packages)
    bwrap = isolation.bwrap_path()
    assert bwrap is not None  # require_strict checked
    filter_fd = _pipe_with(seccomp_program(limits.processes > 1))
    info_r, info_w = os.pipe()
    command = [bwrap, *isolation.bwrap_arguments(runtime, limits.disk_bytes)]
    for name, value in _inside_env(WORKDIR).items():
        command += ["--setenv", name, value]
    command += ["--seccomp", str(filter_fd), "--info-fd", str(info_w), "--"]
    command += [runtime.executable, "-I", "-S", "-B", "-c", CHILD_SOURCE]
    command.append(_child_config(limits, SandboxMode.STRICT, archive_w))
    return _Launch(
        command=command,
        pass_fds=[filter_fd, info_w, archive_w],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        user=runtime.run_as,
        info_fd=info_r,
        scratch=None,
    )


def _unsafe_launch(limits: SandboxLimits, archive_w: int) -> _Launch:
    scratch = Path(tempfile.mkdtemp(prefix="agentrl-sandbox-"))
    if os.geteuid() == 0:  # the child switches to nobody: hand it the folder, by descriptor
        fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchown(fd, NOBODY, NOBODY)
        finally:
            os.close(fd)
    command = [sys.executable, "-I", "-S", "-B", "-c", CHILD_SOURCE]
    command.append(_child_config(limits, SandboxMode.UNSAFE_PROCESSES, archive_w))
    return _Launch(
        command=command,
        pass_fds=[archive_w],
        cwd=str(scratch),
        env=_inside_env(str(scratch)),
        user=None,
        info_fd=None,
        scratch=scratch,
    )


def _exit_status(code: int | None, mode: SandboxMode) -> int | None:
    """bubblewrap reports a signal as 128 + its number; give it back as `-signal`."""
    if mode is SandboxMode.STRICT and code is not None and 128 < code < 128 + 65:
        return -(code - 128)
    return code


async def run_sandboxed_async(
    code: str,
    limits: SandboxLimits | None = None,
    *,
    workdir: Path | None = None,
    mode: SandboxMode = SandboxMode.STRICT,
    packages: tuple[str, ...] = (),
) -> SandboxResult:
    """Run `code` in a fresh sandbox (see the module text); never raises for anything the code
    does (`SandboxUnavailable` when the host cannot give `mode`). `workdir`, a folder of the
    parent's, carries the working folder's files from one call to the next; `packages`
    allow-lists installed packages by import name (strict mode; e.g. `("numpy",)`)."""
    limits = limits or SandboxLimits()
    mode = SandboxMode(mode)
    archive_r, archive_w = os.pipe()
    try:
        if mode is SandboxMode.STRICT:
            launch = _strict_launch(limits, packages, archive_w)
        else:
            launch = _unsafe_launch(limits, archive_w)
    except BaseException:
        os.close(archive_r)
        os.close(archive_w)
        raise
    source = code.encode("utf-8", "replace")
    payload = len(source).to_bytes(8, "big") + source + workfiles.pack(workdir)
    archive_limit = limits.disk_bytes + (1 << 20)  # the folder's bytes plus tar headers
    start = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            *launch.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=launch.cwd,
            env=launch.env,
            start_new_session=True,
            pass_fds=launch.pass_fds,
            user=launch.user,
            group=launch.user,
            extra_groups=[] if launch.user is not None else None,
        )
    finally:
        for fd in launch.pass_fds:
            os.close(fd)
    archive_reader, archive_transport = await _pipe_reader(archive_r)
    namespace = _Namespace()
    learning: asyncio.Future[None] | None = None
    info_transport: asyncio.BaseTransport | None = None
    if launch.info_fd is not None:
        info_reader, info_transport = await _pipe_reader(launch.info_fd)
        learning = asyncio.ensure_future(namespace.learn(info_reader))
    out, err = bytearray(), bytearray()
    room = [limits.output_bytes]
    killed: SandboxLimit | None = None
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    archive_task: asyncio.Future[bytes | None] | None = None
    try:
        archive_task = asyncio.ensure_future(_drain(archive_reader, archive_limit))
        try:
            process.stdin.write(payload)
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
            await _end(namespace, learning, process)
        for task in readers:
            task.cancel()
        try:
            exit_code: int | None = await asyncio.wait_for(process.wait(), 5.0)
        except TimeoutError:
            exit_code = None
        # read the pipes to their end (every writer is gone), so that they close in this loop
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_discard(process.stdout, process.stderr), 2.0)
        archive = None
        if killed is None:
            with contextlib.suppress(TimeoutError):
                archive = await asyncio.wait_for(asyncio.shield(archive_task), 5.0)
    finally:
        await _end(namespace, learning, process)
        if process.returncode is None:
            process.kill()
            await process.wait()
        if archive_task is not None:
            archive_task.cancel()
        archive_reader.feed_eof()
        archive_transport.close()
        if learning is not None:
            learning.cancel()
        if info_transport is not None:
            info_transport.close()
        if launch.scratch is not None:
            shutil.rmtree(launch.scratch, ignore_errors=True)
    saved = False
    if workdir is not None and archive:
        saved = workfiles.unpack(archive, workdir, archive_limit)
    stderr = err.decode("utf-8", "replace")
    exit_code = _exit_status(exit_code, mode)
    return SandboxResult(
        stdout=out.decode("utf-8", "replace"),
        stderr=stderr,
        exit_code=exit_code,
        limit=_classify(exit_code, stderr, killed),
        seconds=time.monotonic() - start,
        truncated=room[0] < 0,
        pid=process.pid,
        pid_namespace=namespace.inode,
        saved=saved,
    )


@dataclass
class _Namespace:
    """The run's PID namespace as bubblewrap reported it on `--info-fd`."""

    inode: int | None = None
    pidfd: int | None = None
    """A pidfd of the namespace's init (the code's process), once it is known to be ours."""

    async def learn(self, reader: asyncio.StreamReader) -> None:
        """Read bubblewrap's report, then open a pidfd of the run's init and check (by its
        namespace inode) that the pid was not reused meanwhile."""
        raw = b""
        while not raw.rstrip().endswith(b"}"):
            chunk = await reader.read(4096)
            if not chunk:
                return
            raw += chunk
        try:
            info = json.loads(raw.decode())
            pid, inode = int(info["child-pid"]), int(info["pid-namespace"])
        except (ValueError, KeyError, TypeError):
            return
        self.inode = inode
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return  # already gone
        try:
            ours = os.stat(f"/proc/{pid}/ns/pid").st_ino == inode
        except OSError:
            ours = False
        if ours:
            self.pidfd = pidfd
        else:
            os.close(pidfd)

    async def end(self) -> None:
        """Kill the run's init (the kernel then ends every process of the namespace) and wait
        until it is gone."""
        if self.pidfd is None:
            return
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        loop = asyncio.get_running_loop()
        gone = loop.create_future()

        def exited() -> None:
            if not gone.done():
                gone.set_result(None)

        loop.add_reader(self.pidfd, exited)
        try:
            await asyncio.wait_for(gone, 5.0)
        except TimeoutError:
            pass
        finally:
            loop.remove_reader(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None


async def _end(
    namespace: _Namespace,
    learning: asyncio.Future[None] | None,
    process: asyncio.subprocess.Process,
) -> None:
    """End the run: its namespace first (when known; bubblewrap then reaps it and exits), then
    the started process's group."""
    if learning is not None:
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(learning), 2.0)
    if namespace.pidfd is not None:
        await namespace.end()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(asyncio.ensure_future(process.wait())), 2.0)
    _kill(process.pid)


def _kill(pid: int) -> None:
    """Kill the started process's group (bubblewrap's `--die-with-parent` then kills the
    run's namespace; in unsafe mode the group is the run)."""
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


def run_sandboxed(
    code: str,
    limits: SandboxLimits | None = None,
    *,
    workdir: Path | None = None,
    mode: SandboxMode = SandboxMode.STRICT,
    packages: tuple[str, ...] = (),
) -> SandboxResult:
    """`run_sandboxed_async` for synchronous code (starts its own event loop)."""
    return asyncio.run(
        run_sandboxed_async(code, limits, workdir=workdir, mode=mode, packages=packages)
    )
