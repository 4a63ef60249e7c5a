"""Where the sandbox's isolation comes from: bubblewrap's namespaces, checked once per host.

`SandboxMode.STRICT` (the default) runs each call under bubblewrap (`bwrap`, Debian's
`bubblewrap` package): new user, PID, mount, network, IPC, UTS and cgroup namespaces, a private
`/proc`, the interpreter and its standard library read-only and nothing else of the host, a
size-capped tmpfs as the working folder, `--die-with-parent`, `PR_SET_NO_NEW_PRIVS` and the
seccomp filter of `seccomp.py`. Where bubblewrap, user namespaces or libseccomp are missing,
`require_strict()` raises `SandboxUnavailable` naming what is missing; nothing falls back
silently. `SandboxMode.UNSAFE_PROCESSES` is the explicit opt-out (plain processes under rlimits
and an audit hook; model-written code can get out of it).

As root, the sandboxed code runs as the unprivileged `nobody` (65534) outside its namespace,
never as root: bubblewrap is started as `nobody`. When the interpreter's files are not readable
by `nobody` (a Python under `/root`), a read-only copy of the interpreter, `libpython` and the
standard library (no `site-packages`) is made once in `/var/cache/agentrl/sandbox` (root-owned)
and bound at the original paths.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from agentrl.config.names import SandboxMode
from agentrl.core.errors import HostFeatureMissing

__all__ = [
    "NOBODY",
    "SandboxMode",
    "SandboxRuntime",
    "SandboxUnavailable",
    "require_strict",
    "sandbox_runtime",
]

NOBODY = 65534
CACHE = Path("/var/cache/agentrl/sandbox")
SANDBOX_SITE = "/sandbox/site"
"""Where allow-listed packages are bound inside the sandbox (on its `sys.path`)."""
_SYSTEM_LIBS = ("/lib", "/lib64", "/lib32", "/libx32", "/usr/lib", "/usr/lib64", "/usr/lib32")


class SandboxUnavailable(HostFeatureMissing):
    """The host cannot give the strict sandbox; the message names what is missing and how to
    accept a weaker sandbox explicitly."""


@dataclass(frozen=True)
class SandboxRuntime:
    """What of the host a sandbox sees, all read-only: bind mounts `(host source, path in the
    sandbox)`, symbolic links `(target, path)`, and folders covered by an empty tmpfs."""

    executable: str
    binds: tuple[tuple[str, str], ...]
    symlinks: tuple[tuple[str, str], ...]
    hidden: tuple[str, ...]
    run_as: int | None
    """The uid bubblewrap is started as (`nobody` when this process is root), else None."""


def _reachable(path: str, uid: int) -> bool:
    """True when `uid` (no supplementary groups) can reach and read `path`."""
    if uid == os.geteuid():
        return os.access(path, os.R_OK)
    parts = Path(path).parts
    for depth in range(1, len(parts) + 1):
        current = os.path.join(*parts[:depth])
        try:
            info = os.stat(current)
        except OSError:
            return False
        last = depth == len(parts)
        need = (stat.S_IROTH if last else 0) | (stat.S_IXOTH if stat.S_ISDIR(info.st_mode) else 0)
        owner = info.st_uid == uid
        bits = (info.st_mode >> 6) & 0o7 if owner else info.st_mode & 0o7
        if bits & need != need:
            return False
    return True


def _ignore_site(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n in ("site-packages", "dist-packages", "test", "idlelib")]


def _copy_for(source: str) -> str:
    """A root-owned, world-readable copy of `source` in the cache (made once, atomically)."""
    info = os.stat(source)
    target = CACHE / f"{source.strip('/').replace('/', '_')}-{int(info.st_mtime)}"
    if target.exists():
        return str(target)
    CACHE.mkdir(parents=True, exist_ok=True, mode=0o755)
    for folder in (CACHE, CACHE.parent):
        owned = folder.lstat()
        if owned.st_uid != 0 or owned.st_mode & 0o022 or stat.S_ISLNK(owned.st_mode):
            raise SandboxUnavailable(f"{folder} must be a root-owned folder not writable by others")
    staging = Path(tempfile.mkdtemp(dir=CACHE, prefix=".staging-"))
    staging.chmod(0o755)
    try:
        if stat.S_ISDIR(info.st_mode):
            shutil.copytree(source, staging / "copy", ignore=_ignore_site, symlinks=True)
        else:
            shutil.copy2(source, staging / "copy")
        with contextlib.suppress(OSError):  # another process made it first
            os.rename(staging / "copy", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(target)


def _site_dirs() -> list[str]:
    found = {
        *glob.glob("/usr/lib/python3*/dist-packages"),
        *glob.glob("/usr/lib/python3*/site-packages"),
        *glob.glob("/usr/local/lib/python3*/*-packages"),
        *glob.glob(os.path.join(os.path.dirname(os.__file__), "*-packages")),
    }
    return sorted(p for p in found if os.path.isdir(p))


@functools.cache
def sandbox_runtime(packages: tuple[str, ...] = ()) -> SandboxRuntime:
    """The read-only view of the host for this interpreter and the allow-listed `packages`
    (import names, e.g. `("numpy",)`, bound under `/sandbox/site`)."""
    run_as = NOBODY if os.geteuid() == 0 else None
    viewer = os.geteuid() if run_as is None else run_as
    executable = os.path.realpath(getattr(sys, "_base_executable", "") or sys.executable)
    stdlib = os.path.dirname(os.__file__)
    own = [executable, stdlib]
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    soname = sysconfig.get_config_var("INSTSONAME") or ""
    shared = os.path.join(libdir, soname)
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and os.path.isfile(shared):
        own.append(os.path.realpath(shared))
    binds: list[tuple[str, str]] = []
    symlinks: list[tuple[str, str]] = []
    for folder in _SYSTEM_LIBS:
        if os.path.islink(folder):
            symlinks.append((os.readlink(folder), folder))
        elif os.path.isdir(folder):
            binds.append((folder, folder))
    if os.path.isfile("/etc/ld.so.cache"):
        binds.append(("/etc/ld.so.cache", "/etc/ld.so.cache"))
    for path in own:
        if any(path.startswith(d + "/") for d, _ in binds):
            continue  # already under a system folder
        binds.append((path if _reachable(path, viewer) else _copy_for(path), path))
    for name in packages:
        for source in _package_paths(name):
            dest = f"{SANDBOX_SITE}/{os.path.basename(source)}"
            binds.append((source if _reachable(source, viewer) else _copy_for(source), dest))
    hidden = [
        folder
        for folder in _site_dirs()
        for source, dest in binds
        if folder.startswith(dest + "/") and os.path.isdir(source + folder[len(dest) :])
    ]
    return SandboxRuntime(
        executable=executable,
        binds=tuple(binds),
        symlinks=tuple(symlinks),
        hidden=tuple(hidden),
        run_as=run_as,
    )


def _package_paths(name: str) -> list[str]:
    """The folder (or module file) of an allow-listed package, and its vendored `.libs`."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        raise ValueError(f"sandbox package {name!r} is not installed in this interpreter")
    if spec.submodule_search_locations:
        path = os.path.realpath(next(iter(spec.submodule_search_locations)))
    else:
        path = os.path.realpath(spec.origin or "")
    paths = [path]
    libs = os.path.join(os.path.dirname(path), f"{name}.libs")
    if os.path.isdir(libs):
        paths.append(os.path.realpath(libs))
    return paths


def bwrap_path() -> str | None:
    """The `bwrap` executable, if installed."""
    return shutil.which("bwrap") or next(
        (p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None
    )


def bwrap_arguments(runtime: SandboxRuntime, tmpfs_bytes: int) -> list[str]:
    """The isolation part of the bubblewrap command line (everything but the fds and the
    command)."""
    args = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--uid",
        str(NOBODY),
        "--gid",
        str(NOBODY),
        "--hostname",
        "sandbox",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]
    for source, dest in runtime.binds:
        args += ["--ro-bind", source, dest]
    for target, dest in runtime.symlinks:
        args += ["--symlink", target, dest]
    for folder in runtime.hidden:
        args += ["--perms", "0555", "--tmpfs", folder, "--remount-ro", folder]
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    args += ["--perms", "0700", "--size", str(tmpfs_bytes), "--tmpfs", "/work"]
    args += ["--remount-ro", "/", "--chdir", "/work"]
    return args


@functools.cache
def _probe() -> str | None:
    """Why the strict sandbox cannot run here (None when it can): one trivial sandbox."""
    exe = bwrap_path()
    if exe is None:
        return (
            "bubblewrap (`bwrap`) is not installed: install Debian's `bubblewrap` package "
            "(`apt-get install bubblewrap`; `make test` and `.ci/run` do this as root)"
        )
    from agentrl.envs.pycode.seccomp import SeccompUnavailable, seccomp_program

    try:
        seccomp_program(False)
    except SeccompUnavailable as exc:
        return str(exc)
    try:
        runtime = sandbox_runtime()
    except (OSError, SandboxUnavailable) as exc:
        return f"the interpreter cannot be made visible to the sandbox user: {exc}"
    command = [exe, *bwrap_arguments(runtime, 1 << 20), "--", runtime.executable, "-I", "-S"]
    command += ["-c", "pass"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=30, user=runtime.run_as,
            group=runtime.run_as, extra_groups=[] if runtime.run_as is not None else None,
            env={"PATH": "/usr/bin:/bin"}, cwd="/",
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        return (
            f"bubblewrap cannot create the sandbox's namespaces ({done.stderr.strip()}): the "
            "kernel must allow unprivileged user namespaces (sysctl user.max_user_namespaces "
            "> 0; on Debian kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 "
            "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap)"
        )
    return None


def require_strict() -> None:
    """Raise `SandboxUnavailable` when the strict sandbox cannot run on this host."""
    if sys.platform != "linux":
        raise SandboxUnavailable(f"the sandbox is Linux only (this is {sys.platform})")
    problem = _probe()
    if problem is not None:
        raise SandboxUnavailable(
            f"the pycode sandbox cannot isolate model-written code here: {problem}. To accept "
            "a weaker sandbox that code can escape, pass --sandbox unsafe-processes "
            "(`SandboxMode.UNSAFE_PROCESSES`; see docs/pycode.md)"
        )
