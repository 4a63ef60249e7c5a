"""Progress bars for long work: the right kind for where the code runs, none in logs.

`progress_bar(...)` returns a tqdm bar: the notebook widget in a Jupyter kernel that has
`ipywidgets`, plain text bars in a kernel without it (no `IProgress not found` warning), text
bars in a terminal, and a disabled bar when stderr is neither (a log file or a pipe: carriage
returns there would interleave with the console table). `AGENTRL_PROGRESS=1` forces bars on,
`AGENTRL_PROGRESS=0` off.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

__all__ = ["in_notebook", "progress_bar"]


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel."""
    ipython = sys.modules.get("IPython")
    if ipython is None or "ipykernel" not in sys.modules:
        return False
    shell = getattr(ipython, "get_ipython", lambda: None)()
    return shell is not None and hasattr(shell, "kernel")


def _wanted() -> bool:
    forced = os.environ.get("AGENTRL_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    if in_notebook():
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def progress_bar(*, total: int, desc: str, unit: str, initial: int = 0, leave: bool = True) -> Any:
    """A tqdm bar for `total` items (see the module docstring for which kind)."""
    if in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm  # type: ignore[import-untyped]
    else:
        from tqdm.std import tqdm  # type: ignore[import-untyped]
    return tqdm(
        total=total, initial=initial, desc=desc, unit=unit, leave=leave, disable=not _wanted()
    )
