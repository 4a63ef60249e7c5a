"""Old import paths of modules that moved into their rooms (`import agentrl.trainer` ...).

`MOVED` maps each old module name to its new one. `install()` (called by `agentrl/__init__`)
puts a finder on `sys.meta_path`: importing an old name imports the new module and registers
the SAME module object under the old name, so `from agentrl.trainer import Trainer`,
`from agentrl import trainer` and `monkeypatch.setattr("agentrl.trainer.X", ...)` all reach
`agentrl.training.trainer` itself. Where an old module is now a package of the same name
(`agentrl.rollout`, `agentrl.config`, `agentrl.evaluation`, `agentrl.cli`,
`agentrl.backends.pytrio`), the package's `__init__` re-exports the old names instead.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Mapping, Sequence
from types import MappingProxyType, ModuleType

__all__ = ["MOVED", "MOVED_NAMES", "LegacyFinder", "install", "moved_name"]

MOVED: Mapping[str, str] = MappingProxyType(
    {
        "agentrl.advantages": "agentrl.algo.advantages",
        "agentrl.backends.errors": "agentrl.core.errors",
        "agentrl.backends.mismatch": "agentrl.algo.mismatch",
        "agentrl.backends.pytrio_convert": "agentrl.backends.pytrio.convert",
        "agentrl.backends.pytrio_sampler": "agentrl.backends.pytrio.sampler",
        "agentrl.backends.pytrio_sdk": "agentrl.backends.pytrio.sdk",
        "agentrl.checkpoints": "agentrl.training.checkpoints",
        "agentrl.cli_args": "agentrl.cli.args",
        "agentrl.datums": "agentrl.algo.datums",
        "agentrl.demo": "agentrl.recipes.demo",
        "agentrl.env": "agentrl.core.env",
        "agentrl.interrupts": "agentrl.training.interrupts",
        "agentrl.learning": "agentrl.recipes.learning",
        "agentrl.learning_alfworld": "agentrl.recipes.alfworld_scratch",
        "agentrl.learning_tokenizer": "agentrl.recipes.tokenizer",
        "agentrl.losses": "agentrl.algo.losses",
        "agentrl.metrics": "agentrl.algo.metrics",
        "agentrl.pipeline": "agentrl.training.pipeline",
        "agentrl.preflight": "agentrl.training.preflight",
        "agentrl.recipe": "agentrl.training.recipe",
        "agentrl.records": "agentrl.store.records",
        "agentrl.registry": "agentrl.config.plugins",
        "agentrl.reporting.jsonl": "agentrl.store.jsonl",
        "agentrl.reporting.lock": "agentrl.store.lock",
        "agentrl.reporting.records": "agentrl.store.eval_records",
        "agentrl.resume": "agentrl.training.resume",
        "agentrl.rewards": "agentrl.algo.rewards",
        "agentrl.streaming": "agentrl.training.streaming",
        "agentrl.tokenizer": "agentrl.chat.tokenizers",
        "agentrl.tokens": "agentrl.core.tokens",
        "agentrl.tool_calls": "agentrl.chat.tool_calls",
        "agentrl.trainer": "agentrl.training.trainer",
        "agentrl.types": "agentrl.core.types",
    }
)
"""Old module name -> new module name."""

MOVED_NAMES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "agentrl.evaluation": {"planner_player": "agentrl.envs.alfworld.baseline"},
        "agentrl.evaluation.run": {"planner_player": "agentrl.envs.alfworld.baseline"},
        "agentrl.training.recipe": {
            "PYCODE_COUNTS": "agentrl.envs.pycode.spec",
            "TOY_EVAL_GAMES": "agentrl.envs.toy.spec",
            "TOY_SEEDS": "agentrl.envs.toy.spec",
            "TOY_TRAIN_GAMES": "agentrl.envs.toy.spec",
        },
    }
)
"""Module -> {old name -> the module it moved to}: env-specific names that left a room (which
imports no env) for their env plug-in. The room's `__getattr__` finds them by name here, so the
old `from agentrl.evaluation import planner_player` gives the very same object."""


def moved_name(module: str, name: str) -> object:
    """The object `name` of `module` that moved to another module (`AttributeError` if none)."""
    target = MOVED_NAMES.get(module, {}).get(name)
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return getattr(importlib.import_module(target), name)


class LegacyFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old module names of `moved` and loads each as its new module."""

    def __init__(self, moved: Mapping[str, str]) -> None:
        self.moved = moved
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old name (loaded by this finder), else None."""
        if fullname not in self.moved:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """The new module itself (imported now if it was not yet)."""
        module = importlib.import_module(self.moved[spec.name])
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module is loaded. The import system has just set its
        `__spec__` to the old name's; put the real one back."""
        old = module.__spec__.name if module.__spec__ is not None else ""
        if old in self._specs:
            module.__spec__ = self._specs.pop(old)


def install() -> None:
    """Put the finder on `sys.meta_path` (once)."""
    if not any(isinstance(f, LegacyFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, LegacyFinder(MOVED))
