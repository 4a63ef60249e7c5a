"""A full-knowledge expert for ALFWorld games: a winning command list from the initial facts.

It reads the PDDL problem of a game (`game.tw-pddl`) and the task parameters
(`traj_data.json: pddl_params`), names every entity the way the game does (lower-cased ids
numbered as alfworld's `Demangler` numbers them, shuffle off), and writes the commands of
the six task types: go to the object's receptacle, open it when closed, take the object,
clean / heat / cool it at a sink basin / microwave / fridge, go to a receptacle of the goal
class, open it, move the object there (twice for pick_two), or take the object to a desk
lamp and use the lamp. It plans in milliseconds, where Fast Downward's optimal search takes
seconds to minutes on large rooms; TextWorld itself then checks the plan by playing it.
Pure Python: no TextWorld import.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ExpertTask", "World", "expert_plan", "parse_world", "plan_for_game"]

_FACT_RE = re.compile(r"\(\s*([A-Za-z][\w@-]*)((?:\s+[^\s()]+)*)\s*\)")


@dataclass(frozen=True)
class ExpertTask:
    """What a game asks, from `traj_data.json: task_type, pddl_params`."""

    task_type: str
    object_target: str
    parent_target: str = ""
    toggle_target: str = ""

    @classmethod
    def from_traj(cls, traj: Mapping[str, object]) -> ExpertTask:
        """Read `task_type` and `pddl_params` of a trajectory file's content."""
        params = traj.get("pddl_params")
        task_type = traj.get("task_type")
        if not isinstance(params, Mapping) or not isinstance(task_type, str):
            raise ValueError("traj_data needs 'task_type' and 'pddl_params'")
        return cls(
            task_type=task_type,
            object_target=str(params.get("object_target") or ""),
            parent_target=str(params.get("parent_target") or ""),
            toggle_target=str(params.get("toggle_target") or ""),
        )


def _demangled_names(ids: Iterable[str]) -> dict[str, str]:
    """Names as alfworld's `Demangler(shuffle=False)` gives them (`cabinet 3`, `sinkbasin 1`)."""
    ordered = sorted(set(ids))
    counts: Counter[str] = Counter()
    base: dict[str, str] = {}
    for ident in ordered:
        parts = ident.split("_bar_", 1)
        if len(parts) > 1:
            name = parts[0] + ("basin" if "basin" in ident else "")
            base[ident] = name
            counts[name] += 1
    remaining = {name: list(range(1, n + 1)) for name, n in counts.items()}
    names: dict[str, str] = {}
    for ident in ordered:
        if ident in base:
            names[ident] = f"{base[ident]} {remaining[base[ident]].pop()}"
    return names


@dataclass(frozen=True)
class World:
    """The initial facts of a game that the expert needs (all names lower case)."""

    facts: frozenset[tuple[str, tuple[str, ...]]]
    names: Mapping[str, str]

    def pairs(self, predicate: str) -> list[tuple[str, str]]:
        """Arguments of every fact `predicate(a, b)`, sorted."""
        return sorted((a[0], a[1]) for p, a in self.facts if p == predicate and len(a) == 2)

    def unary(self, predicate: str) -> set[str]:
        """Arguments of every fact `predicate(a)`."""
        return {a[0] for p, a in self.facts if p == predicate and len(a) == 1}


def parse_world(pddl_problem: str) -> World:
    """Parse the `(:init ...)` facts of a PDDL problem and name its entities."""
    start = pddl_problem.lower().find("(:init")
    end = pddl_problem.lower().find("(:goal")
    if start < 0 or end < 0:
        raise ValueError("the PDDL problem has no (:init ...) or (:goal ...) section")
    facts = frozenset(
        (m.group(1).lower(), tuple(m.group(2).lower().split()))
        for m in _FACT_RE.finditer(pddl_problem[start + len("(:init") : end])
    )
    ids = {arg for _, args in facts for arg in args}
    return World(facts=facts, names=_demangled_names(ids))


def expert_plan(world: World, task: ExpertTask) -> list[str] | None:
    """Winning commands for `task` in `world`, or None when this expert cannot solve it."""
    rtype = {r: t.removesuffix("type") for r, t in world.pairs("receptacletype")}
    otype = {o: t.removesuffix("type") for o, t in world.pairs("objecttype")}
    host = dict(world.pairs("inreceptacle"))
    where = dict(world.pairs("receptacleatlocation"))
    openable = world.unary("openable")
    opened = set(world.unary("opened"))
    agent = dict(world.pairs("atlocation")).get("agent1")
    names = world.names
    contents: dict[str, list[str]] = defaultdict(list)
    for obj, recep in sorted(host.items()):
        contents[recep].append(obj)
    plan: list[str] = []

    def goto(recep: str) -> None:
        nonlocal agent
        if where.get(recep) != agent:
            plan.append(f"go to {names[recep]}")
            agent = where.get(recep)

    def open_(recep: str) -> None:
        if recep in openable and recep not in opened:
            plan.append(f"open {names[recep]}")
            opened.add(recep)

    def take(obj: str) -> None:
        goto(host[obj])
        open_(host[obj])
        plan.append(f"take {names[obj]} from {names[host[obj]]}")

    def first_of(kind: str) -> str | None:
        found = sorted((names[r], r) for r, t in rtype.items() if t == kind and r in names)
        return found[0][1] if found else None

    target = task.object_target.lower()
    parent_kind = task.parent_target.lower()
    candidates = sorted(
        (names[o], o) for o, t in otype.items() if t == target and o in host and o in names
    )
    if task.task_type == "look_at_obj_in_light":
        lamps = sorted(
            (names[o], o)
            for o, t in otype.items()
            if t == task.toggle_target.lower() and o in host and o in world.unary("toggleable")
        )
        if not candidates or not lamps:
            return None
        lamp = lamps[0][1]
        take(candidates[0][1])
        goto(host[lamp])
        plan.append(f"use {names[lamp]}")
        return plan
    parents = sorted((names[r], r) for r, t in rtype.items() if t == parent_kind and r in names)
    if not parents:
        return None
    needed = 2 if task.task_type == "pick_two_obj_and_place" else 1
    tool_kind = {
        "pick_clean_then_place_in_recep": ("sinkbasin", "clean"),
        "pick_heat_then_place_in_recep": ("microwave", "heat"),
        "pick_cool_then_place_in_recep": ("fridge", "cool"),
    }.get(task.task_type)

    # objects already in the goal receptacle count only when no state change is asked
    def held(recep: str) -> list[str]:
        if tool_kind is not None:
            return []
        return [o for o in contents[recep] if otype.get(o) == target]

    parent = max(parents, key=lambda nr: (len(held(nr[1])), -parents.index(nr)))[1]
    already = held(parent)
    movable = [o for _, o in candidates if o not in already]
    if len(already) >= needed:
        return plan
    if len(movable) < needed - len(already):
        return None
    for obj in movable[: needed - len(already)]:
        take(obj)
        if tool_kind is not None:
            tool = first_of(tool_kind[0])
            if tool is None:
                return None
            goto(tool)
            plan.append(f"{tool_kind[1]} {names[obj]} with {names[tool]}")
        goto(parent)
        open_(parent)
        plan.append(f"move {names[obj]} to {names[parent]}")
    return plan


def plan_for_game(game_file: str | Path) -> list[str] | None:
    """The expert's commands for a `game.tw-pddl` next to its `traj_data.json`."""
    path = Path(game_file)
    game = json.loads(path.read_text(encoding="utf-8"))
    traj = json.loads((path.parent / "traj_data.json").read_text(encoding="utf-8"))
    return expert_plan(parse_world(str(game["pddl_problem"])), ExpertTask.from_traj(traj))
