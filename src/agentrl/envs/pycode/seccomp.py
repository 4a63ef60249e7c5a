"""The sandbox's seccomp filter, compiled once per process to the BPF program bubblewrap loads.

Everything is allowed but the calls below, which fail with `EPERM` (`clone3` with `ENOSYS`, so
that the C library falls back to `clone`, whose flags a filter can read). Calls of another
architecture's ABI (32-bit `int 0x80`, x32) kill the process (libseccomp's default for a
foreign architecture). Built with libseccomp through `pyseccomp`; bubblewrap installs it with
`PR_SET_NO_NEW_PRIVS` just before it runs the interpreter.
"""

from __future__ import annotations

import errno
import functools
import tempfile

__all__ = ["DENIED_SYSCALLS", "SeccompUnavailable", "seccomp_program"]

DENIED_SYSCALLS: tuple[str, ...] = (
    # other processes: tracing, reading or writing their memory, pidfds
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_open",
    "pidfd_send_signal",
    "pidfd_getfd",
    # namespaces and mounts
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    # the kernel's wider attack surface
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "syslog",
    "lookup_dcookie",
    "personality",
    "uselib",
    "iopl",
    "ioperm",
    "fanotify_init",
    "setdomainname",
    "sethostname",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
)
"""Refused whatever the policy."""

_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)
_CLONE_THREAD = 0x00010000
_AF_UNIX = 1


class SeccompUnavailable(RuntimeError):
    """libseccomp (or its Python bindings, `pyseccomp`) is missing on this host."""


@functools.cache
def seccomp_program(allow_processes: bool, allow_inet: bool = False) -> bytes:
    """The BPF program: the denials above, sockets of the Unix family only (unless
    `allow_inet`), and, unless `allow_processes`, no new process (`fork`, `vfork`, a `clone`
    without `CLONE_THREAD`); threads stay allowed. Cached per process."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as exc:  # pyseccomp raises without libseccomp
        raise SeccompUnavailable(
            f"the sandbox's seccomp filter needs libseccomp and pyseccomp ({exc}); install "
            "them (Debian: `apt-get install libseccomp2`, then `pip install pyseccomp`)"
        ) from exc
    deny = sc.ERRNO(errno.EPERM)
    program = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            program.add_rule(deny, name)
        except (ValueError, OSError):
            continue  # not a system call of this architecture
    program.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # flags behind a pointer: fall back
    for flag in _NAMESPACE_FLAGS:  # a clone into a new namespace
        program.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    if not allow_processes:
        for name in ("fork", "vfork"):
            program.add_rule(deny, name)
        program.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    if not allow_inet:
        program.add_rule(deny, "socket", sc.Arg(0, sc.NE, _AF_UNIX))
        program.add_rule(deny, "socketpair", sc.Arg(0, sc.NE, _AF_UNIX))
    with tempfile.TemporaryFile() as sink:
        program.export_bpf(sink)
        sink.seek(0)
        return sink.read()
