"""Whether a process still runs, for the tests that check nothing is left behind (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """`pid` exists and is not a zombie: a zombie still answers `kill(pid, 0)`, and a
    container's init may never reap it, so its state in `/proc/<pid>/stat` decides."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        state = stat.read_text().rsplit(")", 1)[1].split()[0]
    except OSError:  # reaped between the two looks
        return False
    return state != "Z"
