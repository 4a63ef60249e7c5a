"""Lazy import of optional dependencies with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ImportError):
    """An optional dependency is not installed."""


def require(module: str, extra: str, purpose: str = "") -> ModuleType:
    """Import `module`, or raise MissingExtraError telling which agentrl extra provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        what = f" (needed for {purpose})" if purpose else ""
        raise MissingExtraError(
            f"Python package '{module.split('.')[0]}' is not installed{what}. "
            f"Install it with: pip install 'agentrl[{extra}]'"
        ) from exc
