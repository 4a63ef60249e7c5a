"""Games for the fast ALFWorld engine tests: a tiny hand-built game and the official games.

The tiny game uses the PDDL domain and grammar that the `alfworld` package ships and a small
kitchen written here: openable receptacles, two receptacles sharing a location, a sink basin,
a toggleable lamp (conditional effects), a knife (slicing), a receptacle object (a mug) and an
apple to heat and put on the counter. It loads in a fraction of a second, so the default suite
runs without the official data.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

_RECEPTACLES = {
    # id: (type, location, openable)
    "CounterTop_bar_1": ("CounterTopType", "loc_counter", False),
    "Fridge_bar_1": ("FridgeType", "loc_fridge", True),
    "Microwave_bar_1": ("MicrowaveType", "loc_micro", True),
    "Sink_bar_1_bar_SinkBasin": ("SinkBasinType", "loc_sink", False),
    "Cabinet_bar_1": ("CabinetType", "loc_cab", True),
    "Cabinet_bar_2": ("CabinetType", "loc_cab", True),
    "SideTable_bar_1": ("SideTableType", "loc_side", False),
}
_OBJECTS = {
    # id: (type, receptacle, properties)
    "Apple_bar_1": (
        "AppleType",
        "Fridge_bar_1",
        ("heatable", "coolable", "cleanable", "sliceable"),
    ),
    "Apple_bar_2": ("AppleType", "CounterTop_bar_1", ("heatable", "coolable", "cleanable")),
    "Mug_bar_1": ("MugType", "CounterTop_bar_1", ("heatable", "coolable", "cleanable")),
    "Knife_bar_1": ("KnifeType", "Cabinet_bar_2", ("cleanable",)),
    "DeskLamp_bar_1": ("DeskLampType", "SideTable_bar_1", ("toggleable",)),
    "Book_bar_1": ("BookType", "SideTable_bar_1", ()),
}
_CAN_CONTAIN = {
    "CounterTopType": ["AppleType", "MugType", "KnifeType", "BookType"],
    "FridgeType": ["AppleType", "MugType"],
    "MicrowaveType": ["AppleType", "MugType"],
    "SinkBasinType": ["AppleType", "MugType", "KnifeType"],
    "CabinetType": ["MugType", "KnifeType", "BookType"],
    "SideTableType": ["AppleType", "MugType", "KnifeType", "BookType"],
}


def tiny_problem() -> str:
    """The PDDL problem of the tiny kitchen (goal: a hot apple on the counter top)."""
    otypes = sorted({t for t, _, _ in _OBJECTS.values()} | {"ButterKnifeType"})
    rtypes = sorted({t for t, _, _ in _RECEPTACLES.values()})
    locations = sorted({loc for _, loc, _ in _RECEPTACLES.values()} | {"loc_start"})
    objects = ["agent1 - agent"]
    objects += [f"{name} - location" for name in locations]
    objects += [f"{name} - receptacle" for name in _RECEPTACLES]
    objects += [f"{name} - object" for name in _OBJECTS]
    objects += [f"{name} - otype" for name in otypes] + [f"{name} - rtype" for name in rtypes]
    init = ["(atLocation agent1 loc_start)"]
    for name, (rtype, loc, openable) in _RECEPTACLES.items():
        init += [f"(receptacleType {name} {rtype})", f"(receptacleAtLocation {name} {loc})"]
        if openable:
            init.append(f"(openable {name})")
    for name, (otype, recep, props) in _OBJECTS.items():
        loc = _RECEPTACLES[recep][1]
        init += [f"(objectType {name} {otype})", f"(inReceptacle {name} {recep})"]
        init += [f"(objectAtLocation {name} {loc})", f"(pickupable {name})"]
        init += [f"({prop} {name})" for prop in props]
    init.append("(isReceptacleObject Mug_bar_1)")
    for rtype, otypes_in in _CAN_CONTAIN.items():
        init += [f"(canContain {rtype} {otype})" for otype in otypes_in]
    goal = (
        "(exists (?r - receptacle) (exists (?o - object) (and (objectType ?o AppleType) "
        "(receptacleType ?r CounterTopType) (isHot ?o) (inReceptacle ?o ?r))))"
    )
    body = "\n        ".join(objects)
    facts = "\n        ".join(init)
    return (
        "(define (problem tiny_kitchen)\n(:domain alfred)\n(:objects\n        "
        f"{body}\n)\n(:init\n        {facts}\n)\n(:goal (and {goal}))\n)\n"
    )


def write_tiny_game(folder: Path) -> Path:
    """Write the tiny kitchen as `folder/game.tw-pddl` (official keys) and return the path."""
    data = Path(__import__("alfworld").__file__).parent / "data"
    domain = (data / "alfred.pddl").read_text()
    grammar = (data / "alfred.twl2").read_text()
    grammar = grammar.replace("UNKNOWN GOAL", "put a hot apple in countertop")
    game = {
        "pddl_domain": domain,
        "grammar": grammar,
        "pddl_problem": tiny_problem(),
        "solvable": True,
        "walkthrough": None,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "game.tw-pddl"
    path.write_text(json.dumps(game))
    return path


def official_games(root: Path, count: int, seed: int, max_bytes: int | None = None) -> list[str]:
    """`count` official games under `root` (`../shared/alfworld`) chosen with `seed`,
    optionally only small ones (`max_bytes`)."""
    games = sorted(str(p) for p in (root / "json_2.1.1").glob("*/*/*/game.tw-pddl"))
    if max_bytes is not None:
        games = [g for g in games if Path(g).stat().st_size <= max_bytes]
    return random.Random(seed).sample(games, min(count, len(games)))
