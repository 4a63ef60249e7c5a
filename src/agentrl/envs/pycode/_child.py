"""The sandbox child: applied limits, then the model's code. Run as `python -I _child.py CFG`.

Standard library only; it runs in a fresh interpreter with a minimal environment, in the run's
private working directory, reading the code from stdin. Order matters: resource limits, a
private network namespace and the switch to an unprivileged user need privileges (or happen
before the code can undo them), the audit hook goes last, so nothing the code does can remove
it from Python.
"""

import contextlib
import json
import os
import resource
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
NOBODY = 65534
PRELOAD = [
    "abc",
    "array",
    "base64",
    "bisect",
    "calendar",
    "cmath",
    "collections",
    "contextlib",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "hashlib",
    "heapq",
    "io",
    "itertools",
    "json",
    "math",
    "numbers",
    "operator",
    "pprint",
    "random",
    "re",
    "signal",
    "socket",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "textwrap",
    "threading",
    "time",
    "traceback",
    "typing",
    "unicodedata",
    "zlib",
]
"""Modules imported before the switch to `nobody` (whose files may be unreadable to it)."""


def _limits(cfg: dict) -> None:  # type: ignore[type-arg]
    cpu = int(cfg["cpu_seconds"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (cfg["memory_bytes"], cfg["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["file_bytes"], cfg["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["processes"], cfg["processes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


def _isolate() -> str:
    """A private network namespace (no interface but a down loopback) and, as root, the
    unprivileged `nobody` user. Returns which layers are active."""
    layers = []
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
        if libc.unshare(flags) == 0:
            layers.append("netns")
    except Exception:
        pass
    if os.geteuid() == 0:
        for name in PRELOAD:
            with contextlib.suppress(ImportError):
                __import__(name)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        layers.append("nobody")
    return ",".join(layers)


def _hook(workdir: str):  # type: ignore[no-untyped-def]
    root = os.path.realpath(workdir)
    me = os.getpid()
    spawn = {
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.spawn",
        "os.exec",
        "os.system",
        "subprocess.Popen",
        "pty.spawn",
    }
    net = {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo"}
    native = {"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function"}
    paths = {
        "os.remove",
        "os.rename",
        "os.mkdir",
        "os.rmdir",
        "os.chmod",
        "os.chown",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
    }
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

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

    def hook(event: str, args: tuple) -> None:  # type: ignore[type-arg]
        if event in spawn:
            deny("starting processes", event)
        elif event in net:
            deny("network access", event)
        elif event in native:
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


def main() -> None:
    cfg = json.loads(sys.argv[1])
    code = sys.stdin.read()
    sys.stdin.close()
    _limits(cfg)
    _isolate()
    sys.argv = ["main.py"]
    sys.path[:] = [os.getcwd(), *sys.path[1:]]  # not this file's folder
    sys.addaudithook(_hook(os.getcwd()))
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(code, "main.py", "exec"), namespace)
    except SystemExit:
        raise
    except BaseException as exc:  # the traceback without this file's frames
        import traceback

        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
        text = "".join(traceback.format_list(frames))
        only = "".join(traceback.format_exception_only(type(exc), exc))
        with contextlib.suppress(Exception):
            sys.stdout.flush()  # what was printed before the error
        sys.stderr.write(f"Traceback (most recent call last):\n{text}{only}")
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    main()
