"""Floor plans for offline game generation, read from what the `alfworld` package ships.

`alfworld/gen/layouts/FloorPlan<N>-objects.json` lists the object and receptacle classes of
a room, `-openable.json` the receptacle instances with the pose from which the agent uses
them (x, z in metres, rotation, camera horizon), and `-layout.npy` the reachable floor
points. The instance list is incomplete (garbage cans, sink basins, stove burners, toasters,
towel holders ... are often missing): `load_scene` adds the missing instances of every
receptacle class the room lists, at reachable floor points.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from agentrl._optional import require

__all__ = [
    "ROOM_TYPES",
    "Receptacle",
    "Scene",
    "alfworld_gen",
    "floor_plans",
    "load_scene",
    "room_type",
]

ROOM_TYPES: Mapping[str, range] = {
    "Kitchen": range(1, 31),
    "LivingRoom": range(201, 231),
    "Bedroom": range(301, 331),
    "Bathroom": range(401, 431),
}
"""Floor plan numbers per room type (as in `alfworld.gen.constants.SCENE_TYPE`)."""

EXTRA_INSTANCES: Mapping[str, int] = {
    "StoveBurner": 4,
    "Drawer": 3,
    "Cabinet": 4,
    "Shelf": 3,
}
"""How many instances to add for a listed receptacle class that has none (default 1)."""

GRID = 0.25
"""Metres per navigation grid step (`constants.AGENT_STEP_SIZE`)."""


@dataclass(frozen=True)
class Receptacle:
    """A static receptacle instance of a room."""

    id: str
    """ALFRED-style id, e.g. `Cabinet|+00.68|+00.50|-02.20` or `Sink|...|SinkBasin`."""
    rtype: str
    """Receptacle class, e.g. `Cabinet`, `SinkBasin`."""
    location: tuple[int, int, int, int]
    """Grid pose (x, z, rotation / 90, horizon) from which the agent uses it."""


@dataclass(frozen=True)
class Scene:
    """One floor plan: its receptacles, object classes and floor points."""

    number: int
    room: str
    receptacles: tuple[Receptacle, ...]
    object_classes: frozenset[str]
    """Non-receptacle classes the room lists (pickupable objects, lamps, scenery)."""
    floor: tuple[tuple[float, float], ...]
    """Reachable floor points (x, z) in metres."""

    def receptacle_types(self) -> frozenset[str]:
        """Classes of the room's receptacle instances."""
        return frozenset(r.rtype for r in self.receptacles)


def alfworld_gen() -> tuple[ModuleType, ModuleType]:
    """`alfworld.gen.constants` and `alfworld.gen.goal_library` (the alfworld extra)."""
    constants = require("alfworld.gen.constants", "alfworld", "ALFWorld game generation")
    goals = require("alfworld.gen.goal_library", "alfworld", "ALFWorld game generation")
    return constants, goals


def _layout_dir() -> Path:
    constants, _ = alfworld_gen()
    return Path(str(constants.__file__)).parent / "layouts"


@cache
def floor_plans() -> tuple[int, ...]:
    """Numbers of the floor plans shipped with alfworld."""
    names = _layout_dir().glob("FloorPlan*-objects.json")
    return tuple(sorted(int(p.name[len("FloorPlan") :].split("-")[0]) for p in names))


def room_type(number: int) -> str:
    """Room type of floor plan `number`."""
    for room, numbers in ROOM_TYPES.items():
        if number in numbers:
            return room
    raise ValueError(f"floor plan {number} is of no known room type")


def _grid(pose: list[float]) -> tuple[int, int, int, int]:
    x, z, rotation, horizon = pose
    return (round(x / GRID), round(z / GRID), round(rotation / 90) % 4, round(horizon))


def format_id(cls: str, xyz: tuple[float, float, float], suffix: str = "") -> str:
    """An ALFRED-style instance id `Class|+x.xx|+y.yy|+z.zz` (optionally `|Suffix`)."""
    coords = "|".join(f"{v:+06.2f}" for v in xyz)
    return f"{cls}|{coords}" + (f"|{suffix}" if suffix else "")


def _coords(instance_id: str) -> tuple[float, float, float]:
    parts = instance_id.split("|")
    return (float(parts[1]), float(parts[2]), float(parts[3]))


@cache
def load_scene(number: int) -> Scene:
    """Floor plan `number` with its missing receptacle instances added (deterministic)."""
    constants, _ = alfworld_gen()
    import numpy as np

    layout = _layout_dir()
    classes = set(json.loads((layout / f"FloorPlan{number}-objects.json").read_text()))
    poses: dict[str, list[float]] = json.loads(
        (layout / f"FloorPlan{number}-openable.json").read_text()
    )
    floor = tuple(
        (float(x), float(z)) for x, z in np.load(layout / f"FloorPlan{number}-layout.npy")
    )
    static = set(constants.RECEPTACLES) - set(constants.MOVABLE_RECEPTACLES)
    receptacles: list[Receptacle] = []
    for instance_id, pose in sorted(poses.items()):
        parts = instance_id.split("|")
        rtype = parts[4] if len(parts) > 4 else parts[0]
        if rtype in static:
            receptacles.append(Receptacle(instance_id, rtype, _grid(pose)))
    rng = random.Random(number)
    present = {r.rtype for r in receptacles}
    listed = classes & static
    if "Sink" in classes:
        listed.add("SinkBasin")
    if "Bathtub" in classes:
        listed.add("BathtubBasin")
    used_ids = {r.id for r in receptacles}
    for rtype in sorted(listed - present):
        for _ in range(EXTRA_INSTANCES.get(rtype, 1)):
            x, z = rng.choice(floor)
            location = (
                round(x / GRID),
                round(z / GRID),
                rng.randrange(4),
                rng.choice((30, 45, 60)),
            )
            xyz = (x + rng.uniform(-0.6, 0.6), rng.uniform(0.0, 1.2), z + rng.uniform(-0.6, 0.6))
            if rtype in ("SinkBasin", "BathtubBasin"):
                instance_id = format_id(rtype[: -len("Basin")], xyz, rtype)
            else:
                instance_id = format_id(rtype, xyz)
            if instance_id not in used_ids:
                used_ids.add(instance_id)
                receptacles.append(Receptacle(instance_id, rtype, location))
    objects = frozenset((classes & set(constants.OBJECTS_SET)) - static)
    return Scene(number, room_type(number), tuple(receptacles), objects, floor)


def coords_of(instance_id: str) -> tuple[float, float, float]:
    """The (x, y, z) written in an ALFRED-style id."""
    return _coords(instance_id)
