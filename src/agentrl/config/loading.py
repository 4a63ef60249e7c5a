"""Load a Python object a flag names: `MODULE:ATTRIBUTE` (an importable module; the current
folder is importable) or `PATH.py:ATTRIBUTE` (a file), with errors that name the flag."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_object"]


def _module(name: str, flag: str) -> ModuleType:
    if name.endswith(".py"):
        path = Path(name).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{flag}: no such file {path}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"{flag}: cannot load {path} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(path.stem, module)
        spec.loader.exec_module(module)
        return module
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise ValueError(
            f"{flag}: cannot import module {name!r} ({exc}); give MODULE:NAME with the module "
            "importable from the current folder, or PATH.py:NAME"
        ) from exc


def load_object(spec: str, flag: str) -> object:
    """The object `spec` (`MODULE:ATTRIBUTE` or `PATH.py:ATTRIBUTE`) names; `flag` is the
    option it came from, for the error message."""
    module_name, sep, attribute = spec.rpartition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{flag}: want MODULE:NAME or PATH.py:NAME, got {spec!r}")
    module = _module(module_name, flag)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{flag}: module {module_name!r} has no {attribute!r}") from None
