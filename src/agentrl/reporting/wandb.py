"""Weights & Biases metric sink (optional extra: `pip install 'agentrl[wandb]'`).

Modes: `online` (needs `wandb login` or `WANDB_API_KEY`), `offline` (writes the run under
`log_dir/wandb/offline-run-*`; upload later with `wandb sync DIR`), `disabled` (logs nothing).
The same flat metrics as SwanLab: `<kind>/<name>` scalars at `step`.
"""

from __future__ import annotations

import netrc
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from agentrl._optional import require
from agentrl.config import WandbMode
from agentrl.core.types import JsonObject
from agentrl.reporting.base import TrackerRunSink

__all__ = ["WandbError", "WandbSink", "has_credentials"]

DEFAULT_HOST = "https://api.wandb.ai"


class WandbError(RuntimeError):
    """W&B could not start (e.g. online mode without credentials)."""


_LOGIN_HINT = (
    "Log in with `wandb login`, or set WANDB_API_KEY, or use --wandb-mode offline "
    "(upload later with `wandb sync`) or disabled."
)


def _netrc_path() -> Path | None:
    """The netrc file W&B reads (`$NETRC`, then `~/.netrc`, then `~/_netrc`)."""
    if os.environ.get("NETRC"):
        return Path(os.environ["NETRC"]).expanduser()
    for name in ("~/.netrc", "~/_netrc"):
        path = Path(name).expanduser()
        if path.is_file():
            return path
    return None


def has_credentials() -> bool:
    """Whether W&B can find an API key (environment, or `.netrc` for `$WANDB_BASE_URL`)."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    path = _netrc_path()
    if path is None or not path.is_file():
        return False
    host = urlparse(os.environ.get("WANDB_BASE_URL") or DEFAULT_HOST).hostname or ""
    try:
        return netrc.netrc(str(path)).authenticators(host) is not None
    except (netrc.NetrcParseError, OSError):
        return False


class WandbSink(TrackerRunSink):
    """Logs flat numeric metrics as `<kind>/<name>` scalars at `step`."""

    def __init__(
        self,
        *,
        mode: WandbMode,
        project: str,
        run_name: str,
        log_dir: Path,
        config: JsonObject | None = None,
    ) -> None:
        wandb = require("wandb", "wandb", "W&B tracking")
        if mode is WandbMode.ONLINE and not has_credentials():
            # never let W&B prompt on stdin in the middle of a training job
            raise WandbError(f"W&B online mode needs an API key. {_LOGIN_HINT}")
        self.mode = mode
        self.log_dir = Path(log_dir)
        if mode is not WandbMode.DISABLED:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._run: Any = wandb.init(
                project=project,
                name=run_name,
                mode=mode.value,
                dir=str(self.log_dir),
                config=dict(config or {}),
                reinit="create_new",
                # no stdout capture: the console table and tqdm stay untouched
                settings=wandb.Settings(console="off", silent=True),
            )
        except Exception as exc:  # wandb raises its own Error / UsageError types
            hint = f" {_LOGIN_HINT}" if mode is WandbMode.ONLINE else ""
            raise WandbError(f"W&B ({mode.value} mode) failed to start: {exc}.{hint}") from exc
        self._closed = False
