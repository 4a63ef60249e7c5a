"""Advisory locks on output files and run folders: one writer at a time, named in the error.

`OutputLock(path)` takes an exclusive `flock` on `<path>.lock` (for a folder:
`<folder>/.lock`) and writes the holder's pid into it. A second process asking for the same
lock gets `OutputInUseError` naming the path and the holder's pid, whatever `--resume` or
`--overwrite-output` say. The operating system drops the lock of a process that dies (even by
SIGKILL), so a lock file left behind by a dead process is taken over safely by the next
writer; the lock file is removed when the lock is released. Locks are advisory: they guard
agentrl processes against each other, not against other programs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import IO, Self

__all__ = ["OutputInUseError", "OutputLock", "check_not_in_use", "lock_path"]


class OutputInUseError(RuntimeError):
    """Another process holds the lock of an output file or run folder."""


def lock_path(target: Path, *, folder: bool = False) -> Path:
    """Where the lock of `target` lives: `<file>.lock`, or `<folder>/.lock`."""
    target = Path(target)
    if folder:
        return target / ".lock"
    return target.with_name(target.name + ".lock")


def _holder(handle: IO[bytes]) -> str:
    handle.seek(0)
    text = handle.read().decode("ascii", "replace").strip()
    return f"process {text}" if text.isdigit() else "another process"


class OutputLock:
    """An exclusive advisory lock on `target`, held from `acquire()` to `release()`."""

    def __init__(self, target: Path, *, what: str = "output", folder: bool = False) -> None:
        self.target = Path(target)
        self.what = what
        self.path = lock_path(self.target, folder=folder)
        self._handle: IO[bytes] | None = None

    def acquire(self) -> Self:
        """Take the lock or raise `OutputInUseError` naming the holder (never waits)."""
        if self._handle is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(10):  # retried only when a releasing holder removed the file meanwhile
            handle = self.path.open("a+b", buffering=0)  # unbuffered: nothing left to flush
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(handle)
                handle.close()
                raise OutputInUseError(
                    f"{self.target} is in use by {holder} (lock {self.path}): another agentrl "
                    f"run is writing this {self.what}. Wait for it to finish or stop it, or "
                    "choose another path"
                ) from None
            try:
                same = os.fstat(handle.fileno()).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the file we locked was unlinked by its previous holder
                handle.close()
                continue
            with contextlib.suppress(OSError):  # the pid is for messages; a full disk is fine
                handle.seek(0)
                handle.truncate()
                os.pwrite(handle.fileno(), f"{os.getpid()}\n".encode(), 0)
            self._handle = handle
            return self
        raise OutputInUseError(f"{self.path}: could not take the lock (it keeps changing)")

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        if self._handle is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            with contextlib.suppress(OSError):
                self._handle.close()  # closing drops the flock
            self._handle = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._handle is not None

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def check_not_in_use(target: Path, *, what: str = "output", folder: bool = False) -> None:
    """Raise `OutputInUseError` if another process holds `target`'s lock (takes nothing)."""
    if not lock_path(target, folder=folder).exists():
        return
    probe = OutputLock(target, what=what, folder=folder)
    probe.acquire()
    probe.release()
