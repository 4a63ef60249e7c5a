"""A branch's working folder between sandboxed calls, kept on the host by the parent alone.

The sandbox never sees a host folder: each call gets a fresh tmpfs, filled from `pack(folder)`
before the code runs and sent back as a tar archive when it ends. `unpack` treats that archive
as untrusted (the code could have written anything to it): at most `limit` bytes, regular files
and folders only, through tarfile's `data` filter (no absolute paths, no `..`, no links, no
devices, no set-id bits), into a fresh folder that then replaces the old one. Nothing on the
host is ever opened through a path the sandboxed code could have changed.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

__all__ = ["MAX_FILES", "pack", "unpack"]

MAX_FILES = 10_000
"""Entries a working folder may hold."""


def pack(folder: Path | None) -> bytes:
    """The folder's regular files and subfolders as a tar archive (b"" when empty or None)."""
    if folder is None or not folder.is_dir():
        return b""
    buffer = io.BytesIO()
    count = 0
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for root, dirs, files in os.walk(folder, followlinks=False):
            for name in sorted(dirs + files):
                path = os.path.join(root, name)
                if os.path.islink(path):
                    continue
                count += 1
                archive.add(path, arcname=os.path.relpath(path, folder), recursive=False)
    return buffer.getvalue() if count else b""


def unpack(data: bytes, folder: Path, limit: int) -> bool:
    """Replace `folder`'s contents by the archive's; False (the folder unchanged) when the
    archive is over `limit` bytes, holds more than `MAX_FILES` entries or anything but regular
    files and folders, or is not a tar archive."""
    if len(data) > limit:
        return False
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            members = archive.getmembers()
            if len(members) > MAX_FILES or any(not (m.isfile() or m.isdir()) for m in members):
                return False
            folder.parent.mkdir(parents=True, exist_ok=True)
            fresh = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
            archive.extractall(fresh, members=members, filter="data")
    except (tarfile.TarError, OSError, ValueError, EOFError):
        with contextlib.suppress(NameError):
            shutil.rmtree(fresh, ignore_errors=True)
        return False
    old = folder.with_name(f".{folder.name}-old-{os.getpid()}")
    if folder.exists():
        os.rename(folder, old)
    os.rename(fresh, folder)
    shutil.rmtree(old, ignore_errors=True)
    return True
