"""Presets: defaults sized to the model, so a first run on a CPU finishes.

The field defaults of `TrainConfig` / `EvalConfig` are the published 4B recipe's (8 games x 8
branches, 50 steps, 2,048 tokens per reply): right on a GPU service, hours per update for the
tiny model on a CPU. `--preset cpu-small` (chosen by `--preset auto`, the default, for
`--base-model tiny` or `--backend local --device cpu`) replaces the defaults of the fields
below that were not given; a flag or field given explicitly always wins. The resolved preset is
kept in the config (and so in `run.json`), and the commands print what it chose.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from agentrl.config.names import BackendName, Preset

__all__ = ["CPU_SMALL_COMMON", "CPU_SMALL_TRAIN", "apply_preset", "preset_line", "resolve_preset"]

CPU_SMALL_COMMON: Mapping[str, object] = MappingProxyType(
    {
        "backend": BackendName.LOCAL.value,
        "max_episode_steps": 8,
        "max_assistant_tokens": 64,
        "max_trajectory_tokens": 3000,
    }
)
"""cpu-small defaults of the fields training and evaluation share."""

CPU_SMALL_TRAIN: Mapping[str, object] = MappingProxyType(
    {"games_per_batch": 2, "group_size": 4, "lora_rank": 8, "save_every": 5}
)
"""cpu-small defaults of the training fields."""


def resolve_preset(values: Mapping[str, Any]) -> Preset:
    """The preset the raw config `values` ask for (`auto` resolved)."""
    preset = Preset(values.get("preset", Preset.AUTO))
    if preset is not Preset.AUTO:
        return preset
    tiny = values.get("base_model") == "tiny"
    local_cpu = str(values.get("backend")) == BackendName.LOCAL.value and (
        values.get("device") == "cpu"
    )
    return Preset.CPU_SMALL if tiny or local_cpu else Preset.RECIPE


def apply_preset(
    values: Mapping[str, Any], defaults: Mapping[str, object], fields: Mapping[str, object]
) -> dict[str, Any]:
    """`values` with the preset resolved and, for cpu-small, `defaults` filled in where a field
    of the model (`fields`) was not given."""
    out = dict(values)
    preset = resolve_preset(values)
    out["preset"] = preset
    if preset is Preset.CPU_SMALL:
        for name, value in defaults.items():
            if name in fields and name not in out:
                out[name] = value
    return out


def preset_line(config: Any) -> str:
    """What the preset chose, for the start of a command."""
    preset = Preset(config.preset)
    parts = []
    if hasattr(config, "group_size"):  # training: games per update x branches
        parts.append(f"{config.games_per_batch} games x {config.group_size}")
    parts += [
        f"{config.max_episode_steps} steps",
        f"{config.max_assistant_tokens} tokens/reply",
        f"{config.max_trajectory_tokens} tokens/trajectory",
        f"backend {BackendName(config.backend).value}",
    ]
    note = (
        " (--preset recipe for the published recipe's sizes)" if preset is Preset.CPU_SMALL else ""
    )
    return f"preset {preset.value}: {', '.join(parts)}{note}"
