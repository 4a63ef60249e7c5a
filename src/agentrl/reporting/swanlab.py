"""SwanLab metric sink (optional extra: `pip install 'agentrl[swanlab]'`).

Modes: `online` (needs `swanlab login` or `SWANLAB_API_KEY`), `offline` (writes the run
under `log_dir`; upload later with `swanlab sync DIR`), `local` (writes the run under
`log_dir` for `swanlab watch`, which needs `pip install 'swanlab[dashboard]'`), `disabled`
(logs nothing).
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path
from typing import Any

from agentrl._optional import require
from agentrl.config import SwanLabMode
from agentrl.core.types import JsonObject
from agentrl.reporting.base import TrackerRunSink

__all__ = ["SwanLabError", "SwanLabSink", "has_credentials"]


class SwanLabError(RuntimeError):
    """SwanLab could not start (e.g. online mode without credentials)."""


_LOGIN_HINT = (
    "Log in with `swanlab login`, or set SWANLAB_API_KEY, or use --swanlab-mode offline "
    "(upload later with `swanlab sync`) or disabled."
)


def has_credentials() -> bool:
    """Whether SwanLab can find an API key (environment, project or user `.netrc`)."""
    if os.environ.get("SWANLAB_API_KEY"):
        return True
    user_dir = os.environ.get("SWANLAB_ROOT") or os.environ.get("SWANLAB_SAVE_DIR")
    folders = [Path.cwd() / ".swanlab", Path(user_dir) if user_dir else Path.home() / ".swanlab"]
    return any((folder / ".netrc").is_file() for folder in folders)


class SwanLabSink(TrackerRunSink):
    """Logs flat numeric metrics as `<kind>/<name>` scalars at `step`."""

    def __init__(
        self,
        *,
        mode: SwanLabMode,
        project: str,
        experiment_name: str,
        log_dir: Path,
        config: JsonObject | None = None,
    ) -> None:
        swanlab = require("swanlab", "swanlab", "SwanLab tracking")
        if mode is SwanLabMode.LOCAL and importlib.util.find_spec("swanboard") is None:
            warnings.warn(
                f"SwanLab local mode writes the run under {log_dir}; viewing it with "
                "`swanlab watch` needs: pip install 'swanlab[dashboard]'",
                stacklevel=2,
            )
        if mode is SwanLabMode.ONLINE and not has_credentials():
            # never let SwanLab prompt on stdin in the middle of a training job
            raise SwanLabError(f"SwanLab online mode needs an API key. {_LOGIN_HINT}")
        self.mode = mode
        self.log_dir = Path(log_dir)
        if mode is not SwanLabMode.DISABLED:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._run: Any = swanlab.init(
                project=project,
                name=experiment_name,
                mode=mode.value,
                log_dir=str(self.log_dir),
                config=dict(config or {}),
                reinit=True,
            )
        except RuntimeError as exc:
            hint = f" {_LOGIN_HINT}" if mode is SwanLabMode.ONLINE else ""
            raise SwanLabError(
                f"SwanLab ({mode.value} mode) failed to start: {exc}.{hint}"
            ) from exc
        self._closed = False
