"""Build one ALFWorld game offline: choose a task, populate a room, write the PDDL problem.

Everything comes from the `alfworld` package: the goal of each task type and its sentence
templates (`alfworld.gen.goal_library`), which receptacle can hold which object and which
objects are cleanable / heatable / coolable / sliceable (`alfworld.gen.constants`), and the
floor plans (`scenes.py`). The problem text follows the official games: same predicates,
same `_bar_` / `_minus_` / `_plus_` / `_dot_` name mangling, `loc|x|z|rotation|horizon`
locations, the agent in the middle of the room, openable receptacles closed.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentrl.envs.alfworld.scenes import (
    GRID,
    Receptacle,
    Scene,
    alfworld_gen,
    coords_of,
    format_id,
    load_scene,
)

__all__ = ["GameSpec", "ObjectInstance", "build_game", "pddl_name", "problem_pddl"]

Location = tuple[int, int, int, int]

LAMP_HOSTS = frozenset({"Desk", "SideTable", "Dresser"})
"""Receptacles a desk lamp stands on (floor lamps are never in a receptacle: unusable)."""

TOOL_RECEPTACLE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
"""Receptacle class each state-changing task needs (the domain's only way to clean/heat/cool)."""

ACTION_PROPERTY = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}

_MANGLE = {"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}


def pddl_name(name: str) -> str:
    """Mangle an ALFRED id into a PDDL name the way the official games do."""
    return "".join(_MANGLE.get(ch, ch) for ch in name)


def _loc_name(location: Location) -> str:
    return pddl_name("loc|{}|{}|{}|{}".format(*location))


@dataclass(frozen=True)
class ObjectInstance:
    """One object of a generated game."""

    id: str
    cls: str
    location: Location
    receptacle: str | None = None
    """Id of the receptacle it is in; None for objects standing on the floor (scenery)."""


@dataclass(frozen=True)
class GameSpec:
    """Everything that defines one generated game."""

    task_type: str
    scene: Scene
    object_target: str
    parent_target: str
    """Receptacle class of the goal ('' for look_at_obj_in_light)."""
    toggle_target: str
    """Lamp class of look_at_obj_in_light ('' otherwise)."""
    objects: tuple[ObjectInstance, ...]
    agent_location: Location
    description: str


def _pickupable(constants: object) -> frozenset[str]:
    val: dict[str, set[str]] = constants.VAL_RECEPTACLE_OBJECTS  # type: ignore[attr-defined]
    static = set(constants.RECEPTACLES) - set(constants.MOVABLE_RECEPTACLES)  # type: ignore[attr-defined]
    return frozenset(c for c in set().union(*val.values()) if "Sliced" not in c) - static


def _hosts(scene: Scene, cls: str, exclude: Iterable[str] = ()) -> list[Receptacle]:
    constants, _ = alfworld_gen()
    val: dict[str, set[str]] = constants.VAL_RECEPTACLE_OBJECTS
    banned = set(exclude)
    return [r for r in scene.receptacles if r.rtype not in banned and cls in val.get(r.rtype, ())]


def _task_choices(task_type: str, scene: Scene) -> list[tuple[str, str]]:
    """Feasible (object class, receptacle class or lamp class) pairs for a task in a scene."""
    constants, _ = alfworld_gen()
    if scene.room not in constants.GOALS_VALID[task_type]:
        return []
    rtypes = scene.receptacle_types()
    candidates = sorted(scene.object_classes & _pickupable(constants))
    if task_type == "look_at_obj_in_light":
        if "DeskLamp" not in scene.object_classes or not (rtypes & LAMP_HOSTS):
            return []
        return [(c, "DeskLamp") for c in candidates if _hosts(scene, c)]
    tool = TOOL_RECEPTACLE.get(task_type)
    if tool is not None:
        if tool not in rtypes:
            return []
        allowed = constants.VAL_ACTION_OBJECTS[ACTION_PROPERTY[task_type]]
        candidates = [c for c in candidates if c in allowed]
    val: dict[str, set[str]] = constants.VAL_RECEPTACLE_OBJECTS
    pairs = []
    for cls in candidates:
        for parent in sorted(rtypes):
            if parent == tool or cls not in val.get(parent, ()):
                continue
            if _hosts(scene, cls, exclude=(parent, tool or "")):
                pairs.append((cls, parent))
    return pairs


def _near(rng: random.Random, host: str | None, floor: tuple[float, float]) -> tuple[float, ...]:
    if host is not None:
        x, y, z = coords_of(host)
        return (x + rng.uniform(-0.4, 0.4), y + rng.uniform(0.0, 0.3), z + rng.uniform(-0.4, 0.4))
    return (
        floor[0] + rng.uniform(-0.2, 0.2),
        rng.uniform(0.0, 2.0),
        floor[1] + rng.uniform(-0.2, 0.2),
    )


def _floor_location(rng: random.Random, scene: Scene) -> tuple[Location, tuple[float, float]]:
    x, z = rng.choice(scene.floor)
    return (round(x / GRID), round(z / GRID), rng.randrange(4), rng.choice((0, 30, 60))), (x, z)


def build_game(
    task_type: str, scenes: Sequence[int], rng: random.Random, include_prob: float = 0.5
) -> GameSpec | None:
    """A random game of `task_type` in one of `scenes`; None when no scene can host it."""
    constants, goals = alfworld_gen()
    order = list(scenes)
    rng.shuffle(order)
    for number in order:
        scene = load_scene(number)
        choices = _task_choices(task_type, scene)
        if choices:
            break
    else:
        return None
    target_cls = rng.choice(sorted({c for c, _ in choices}))
    goal_cls = rng.choice(sorted(p for c, p in choices if c == target_cls))
    look = task_type == "look_at_obj_in_light"
    parent, toggle = ("", goal_cls) if look else (goal_cls, "")
    tool = TOOL_RECEPTACLE.get(task_type, "")
    used: set[str] = {r.id for r in scene.receptacles}
    objects: list[ObjectInstance] = []

    def add(cls: str, host: Receptacle | None) -> None:
        for _ in range(20):
            if host is not None:
                xyz, location = _near(rng, host.id, (0.0, 0.0)), host.location
            else:
                location, point = _floor_location(rng, scene)
                xyz = _near(rng, None, point)
            instance_id = format_id(cls, (xyz[0], xyz[1], xyz[2]))
            if instance_id not in used:
                used.add(instance_id)
                parent_id = host.id if host is not None else None
                objects.append(ObjectInstance(instance_id, cls, location, parent_id))
                return

    for cls in sorted(scene.object_classes & _pickupable(constants)):
        is_target = cls == target_cls
        if not is_target and rng.random() >= include_prob:
            continue
        low = 2 if is_target and task_type == "pick_two_obj_and_place" else 1
        count = rng.randint(low, max(low, constants.MAX_NUM_OF_OBJ_INSTANCES))
        hosts = _hosts(scene, cls, exclude=(parent, tool) if is_target else ())
        for _ in range(count):
            if hosts:
                add(cls, rng.choice(hosts))
    lamp_hosts = [r for r in scene.receptacles if r.rtype in LAMP_HOSTS]
    if "DeskLamp" in scene.object_classes and lamp_hosts:
        for _ in range(2 if rng.random() < 0.3 else 1):
            add("DeskLamp", rng.choice(lamp_hosts))
    scenery = sorted(
        scene.object_classes - _pickupable(constants) - {"DeskLamp", "Sink", "Bathtub"}
    )
    for cls in scenery:
        for _ in range(4 if cls == "StoveKnob" else 1):
            add(cls, None)
    for receptacle in scene.receptacles:  # the sink / bathtub object around each basin
        if receptacle.rtype in ("SinkBasin", "BathtubBasin"):
            base = receptacle.id.rsplit("|", 1)[0]
            if base not in used:
                used.add(base)
                objects.append(ObjectInstance(base, receptacle.rtype[:-5], receptacle.location))
    taken = {r.location for r in scene.receptacles}
    for _ in range(100):  # in the middle of the room: at no receptacle
        x, z, rotation, _horizon = _floor_location(rng, scene)[0]
        agent = (x, z, rotation, 30)
        if agent not in taken:
            break
    template = rng.choice(goals.gdict[task_type]["templates"])
    description = template.format(
        obj=target_cls.lower(), recep=parent.lower(), toggle=toggle.lower(), mrecep=""
    )
    return GameSpec(
        task_type, scene, target_cls, parent, toggle, tuple(objects), agent, description
    )


def problem_pddl(spec: GameSpec, problem_name: str) -> str:
    """The PDDL problem of `spec` (objects, initial facts and the task's goal)."""
    constants, goals = alfworld_gen()
    static = set(constants.RECEPTACLES) - set(constants.MOVABLE_RECEPTACLES)
    classes = sorted(set(constants.OBJECTS_SET) - static)
    receptacles = spec.scene.receptacles
    placed = sorted({o.cls for o in spec.objects})
    locations = sorted(
        {r.location for r in receptacles}
        | {o.location for o in spec.objects}
        | {spec.agent_location}
    )
    val: dict[str, set[str]] = constants.VAL_RECEPTACLE_OBJECTS
    actions: dict[str, set[str]] = constants.VAL_ACTION_OBJECTS
    pick = _pickupable(constants)
    decl = ["agent1 - agent"]
    decl += [f"{c} - object" for c in classes]
    decl += [f"{c}Type - otype" for c in classes]
    decl += [f"{r}Type - rtype" for r in sorted(static)]
    decl += [f"{pddl_name(o.id)} - object" for o in sorted(spec.objects, key=lambda o: o.id)]
    decl += [f"{pddl_name(r.id)} - receptacle" for r in receptacles]
    decl += [f"{_loc_name(loc)} - location" for loc in locations]
    facts: list[str] = []
    facts += [f"(receptacleType {pddl_name(r.id)} {r.rtype}Type)" for r in receptacles]
    facts += [f"(objectType {pddl_name(o.id)} {o.cls}Type)" for o in spec.objects]
    for rtype in sorted({r.rtype for r in receptacles}):
        facts += [f"(canContain {rtype}Type {c}Type)" for c in placed if c in val.get(rtype, ())]
    for o in spec.objects:
        name = pddl_name(o.id)
        if o.cls in pick:
            facts.append(f"(pickupable {name})")
        if o.cls in constants.MOVABLE_RECEPTACLES_SET:
            facts.append(f"(isReceptacleObject {name})")
        for prop, pred in (
            ("Cleanable", "cleanable"),
            ("Heatable", "heatable"),
            ("Coolable", "coolable"),
            ("Sliceable", "sliceable"),
            ("Toggleable", "toggleable"),
        ):
            if o.cls in actions[prop] and (prop != "Toggleable" or o.receptacle is not None):
                facts.append(f"({pred} {name})")
    facts += [
        f"(openable {pddl_name(r.id)})"
        for r in receptacles
        if r.rtype in constants.OPENABLE_CLASS_SET
    ]
    facts.append(f"(atLocation agent1 {_loc_name(spec.agent_location)})")
    facts += [
        f"(inReceptacle {pddl_name(o.id)} {pddl_name(o.receptacle)})"
        for o in spec.objects
        if o.receptacle is not None
    ]
    facts += [
        f"(receptacleAtLocation {pddl_name(r.id)} {_loc_name(r.location)})" for r in receptacles
    ]
    facts += [f"(objectAtLocation {pddl_name(o.id)} {_loc_name(o.location)})" for o in spec.objects]
    goal = goals.gdict[spec.task_type]["pddl"].format(
        obj=spec.object_target,
        recep=spec.parent_target,
        toggle=spec.toggle_target,
        mrecep="",
    )
    indent = "\n        "
    return (
        f"\n(define (problem {problem_name})\n(:domain alfred)\n(:objects\n"
        f"        {indent.join(decl)}\n        )\n"
        f"(:init\n        {indent.join(facts)}\n        )\n"
        f"{goal.replace('#', '-')}"
    )
