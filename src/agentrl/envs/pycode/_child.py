"""The sandbox child: limits, the working folder's files, then the model's code.

Run as `python -I -S -B -c <this file's text> CFG`, inside bubblewrap's namespaces (strict
mode) or as a plain process (unsafe mode). Standard library only. Stdin carries the code (an
8-byte big-endian length, then UTF-8) followed by a tar archive of the working folder's files
from earlier calls. When the code ends (normally, by an exception or by `sys.exit`), the
working folder goes back to the parent as a tar archive on the file descriptor the config
names; whatever the code did to this process, the parent treats that archive as untrusted.

The audit hook installed last is a friendly early error (a `PermissionError("sandbox: ...")`
the model can read), not the boundary: in strict mode the kernel refuses the same things.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import sys
import tarfile
from collections.abc import Callable
from typing import Any

NOBODY = 65534
PRELOAD = [
    "abc", "array", "base64", "ctypes", "bisect", "calendar", "cmath", "collections", "contextlib",
    "copy", "dataclasses", "datetime", "decimal", "enum", "fractions", "functools", "hashlib",
    "heapq", "io", "itertools", "json", "math", "numbers", "operator", "pprint", "random", "re",
    "signal", "socket", "statistics", "string", "struct", "subprocess", "textwrap", "threading",
    "time", "traceback", "typing", "unicodedata", "zlib",
]  # fmt: skip
"""Modules imported before an unsafe-mode switch to `nobody` (who may not read them)."""


def _limits(cfg: dict[str, Any]) -> None:
    cpu = int(cfg["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_bytes"], cfg["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_bytes"], cfg["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["tasks"], cfg["tasks"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def _drop_to_nobody() -> None:
    """Unsafe mode as root: the standard library a math program uses, then `nobody`."""
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def _hook(workdir: str, processes: bool, native: bool) -> Callable[[str, tuple[Any, ...]], None]:
    root = os.path.realpath(workdir)
    spawn = {
        "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system",
        "subprocess.Popen", "pty.spawn",
    }  # fmt: skip
    net = {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo"}
    calls = {"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function"}
    paths = {
        "os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.chmod", "os.chown", "os.symlink",
        "os.link", "os.truncate", "os.utime", "shutil.rmtree",
    }  # fmt: skip
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    me = os.getpid()

    def inside(path: object) -> bool:
        if isinstance(path, int):
            return True
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return True
        full = os.path.realpath(os.path.join(root, path))
        return full == root or full.startswith(root + os.sep)

    def deny(kind: str, what: str) -> None:
        raise PermissionError(f"sandbox: {kind} is not allowed ({what})")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in spawn and not processes:
            deny("starting processes", event)
        elif event in net:
            deny("network access", event)
        elif event in calls and not native:
            deny("calling native code (ctypes)", event)
        elif event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags
            )
            text = os.fsdecode(path) if isinstance(path, (str, bytes)) else ""
            if text.startswith("/proc/") and not text.startswith(("/proc/self/", f"/proc/{me}/")):
                deny("reading other processes", text)
            if writing and not inside(path):
                deny("writing outside the working directory", text)
        elif event in paths:
            for path in args[:2]:
                if isinstance(path, (str, bytes)) and not inside(path):
                    deny("changing files outside the working directory", os.fsdecode(path))
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill") and args[0] not in (me, 0):
            deny("signalling other processes", f"{event}{args}")

    return hook


def _send_back(fd: int) -> None:
    """The working folder as a tar archive on `fd` (regular files and folders only)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for folder, dirs, files in os.walk(".", followlinks=False):
            for name in sorted(dirs + files):
                path = os.path.join(folder, name)
                if os.path.islink(path) or not (os.path.isfile(path) or os.path.isdir(path)):
                    continue
                archive.add(path, recursive=False)
    data = buffer.getvalue()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.close(fd)


def _report(exc: BaseException) -> None:
    """The traceback without this file's frames."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != "<string>"]
    text = "".join(traceback.format_list(frames))
    only = "".join(traceback.format_exception_only(type(exc), exc))
    with contextlib.suppress(Exception):
        sys.stdout.flush()  # what was printed before the error
    sys.stderr.write(f"Traceback (most recent call last):\n{text}{only}")
    sys.stderr.flush()


def main() -> None:
    cfg = json.loads(sys.argv[1])
    data = sys.stdin.buffer.read()
    sys.stdin.close()
    size = int.from_bytes(data[:8], "big")
    code = data[8 : 8 + size].decode("utf-8", "replace")
    _limits(cfg)
    if cfg["drop_to_nobody"]:
        _drop_to_nobody()
    if len(data) > 8 + size:
        with tarfile.open(fileobj=io.BytesIO(data[8 + size :])) as archive:
            archive.extractall(".", filter="data")
    del data
    sys.argv = ["main.py"]
    sys.path[:] = [os.getcwd(), *sys.path[1:], *cfg["site"]]
    fd = cfg["archive_fd"]
    sys.addaudithook(_hook(os.getcwd(), cfg["processes"], cfg["native"]))
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    status = 0
    try:
        exec(compile(code, "main.py", "exec"), namespace)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            sys.stderr.write(f"{exc.code}\n")
    except BaseException as exc:
        _report(exc)
        status = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    if fd >= 0:
        with contextlib.suppress(BaseException):
            _send_back(fd)
    os._exit(status)


main()
