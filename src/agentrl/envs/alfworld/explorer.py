"""An exploring ALFWorld expert that sees only what the agent sees.

The full-knowledge expert (`expert.py`) reads the game's hidden facts and walks straight to
the object; a model imitating it learns to guess. `explorer_action` decides from the goal
sentence and the observations of the episode so far (the texts the agent is shown) and
nothing else. It searches the receptacles the first observation lists, in that order but
surfaces first (a look costs one step; furniture with doors, `CLOSED_KINDS`, costs two: go
to, open) and those of the goal's class last (what is to be put there is not there yet). A
`go to` that answers "Nothing happens." means the receptacle shares the place the agent is
at: it examines it there. It takes the object once it has seen one, cleans / heats / cools
it at the first sink basin / microwave / fridge of the room, goes to the first receptacle of
the goal's class, opens it when closed and moves the object there (twice for "put two"), or,
for "look at X under the lamp", carries the object to a lamp it has seen and uses the lamp.
It remembers where it saw things, so the second object of a pair, or a lamp passed during the
search, costs no new search. `order="listed"` searches in the room's own order instead
(`SearchOrder`: a few steps more, easier for a small model to imitate). On generated games
it wins about 97% within 50 steps (13 steps on average; docs/alfworld.md).

The explorer is deterministic and keeps no state: each call replays its own earlier
decisions against the observations, so the observations must be those its own commands got.
With an `ExplorerNoise` some of its commands are deliberate mistakes (a draw keyed by the
noise's seed, the first observation and the turn, so the replay knows them too): a
demonstration then shows how to carry on after a wrong or impossible command, the states a
model that imitates it reaches after its own mistakes (DART-style noise injection);
`ExplorerNoise.noisy` names those turns, to leave them out of the imitation targets.
`explorer_policy` wraps it as a `policy(prompt_text) -> reply` for
`agentrl.testing.PolicySampler`: it reads the observations out of the rendered conversation
(the `Observation:` blocks of `CommandTool` messages), so demonstrations go through the real
rollout engine and tool protocol. Pure text: no TextWorld import.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "CLOSED_KINDS",
    "ExplorerNoise",
    "Goal",
    "SearchOrder",
    "explorer_action",
    "explorer_policy",
    "observations_in",
    "parse_goal",
]

_GOALS: tuple[tuple[str, str], ...] = (
    (r"look at (\w+) under the (\w+)", "look_at_obj_in_light"),
    (r"examine the (\w+) with the (\w+)", "look_at_obj_in_light"),
    (r"put a clean (\w+) in (\w+)", "pick_clean_then_place_in_recep"),
    (r"clean some (\w+) and put it in (\w+)", "pick_clean_then_place_in_recep"),
    (r"put a hot (\w+) in (\w+)", "pick_heat_then_place_in_recep"),
    (r"heat some (\w+) and put it in (\w+)", "pick_heat_then_place_in_recep"),
    (r"put a cool (\w+) in (\w+)", "pick_cool_then_place_in_recep"),
    (r"cool some (\w+) and put it in (\w+)", "pick_cool_then_place_in_recep"),
    (r"put two (\w+) in (\w+)", "pick_two_obj_and_place"),
    (r"find two (\w+) and put them in (\w+)", "pick_two_obj_and_place"),
    (r"put an? (\w+) in (\w+)", "pick_and_place_simple"),
    (r"put some (\w+) on (\w+)", "pick_and_place_simple"),
)
_TOOLS = {
    "pick_clean_then_place_in_recep": ("sinkbasin", "clean"),
    "pick_heat_then_place_in_recep": ("microwave", "heat"),
    "pick_cool_then_place_in_recep": ("fridge", "cool"),
}
CLOSED_KINDS = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})
"""Receptacle classes with doors (common knowledge): searching one takes a step more."""
_TASK_RE = re.compile(r"Your task is to: ([^\n]*?)\.?\s*$", re.MULTILINE)
_NAME = r"[a-z]+ \d+"
_ITEM_RE = re.compile(rf"\ban? ({_NAME})")
_ARRIVE_RE = re.compile(rf"^You arrive at ({_NAME})\. (.*)$", re.S)
_OPEN_RE = re.compile(rf"^You open the ({_NAME})\. (.*)$", re.S)
_CLOSE_RE = re.compile(rf"^You close the ({_NAME})\.")
_TAKE_RE = re.compile(rf"^You pick up the ({_NAME}) from the ({_NAME})\.")
_MOVE_RE = re.compile(rf"^You move the ({_NAME}) to the ({_NAME})\.")
_TREAT_RE = re.compile(rf"^You (?:clean|heat|cool) the ({_NAME}) using the ({_NAME})\.")
_CLOSED_RE = re.compile(rf"The ({_NAME}) is closed\.")
_CONTENTS_RE = re.compile(rf"(?:The ({_NAME}) is open\. In it|On the ({_NAME})), you see ([^\n]*)")


@dataclass(frozen=True)
class Goal:
    """What a game asks, read from its goal sentence (`Your task is to: ...`)."""

    task_type: str
    obj: str
    """The object class to find (`mug`)."""
    place: str = ""
    """The receptacle class to put it in (`coffeemachine`); empty for look tasks."""
    lamp: str = ""
    """The lamp class to use (`desklamp`); look tasks only."""

    @property
    def needed(self) -> int:
        """How many objects must end up in a `place` receptacle."""
        return 2 if self.task_type == "pick_two_obj_and_place" else 1

    @property
    def tool(self) -> tuple[str, str] | None:
        """(receptacle class, verb) of the state change the task asks, if any."""
        return _TOOLS.get(self.task_type)


def parse_goal(text: str) -> Goal | None:
    """The goal of a task sentence (or of an observation holding `Your task is to: ...`)."""
    match = _TASK_RE.search(text)
    sentence = (match.group(1) if match else text).strip().lower().rstrip(".")
    for pattern, task_type in _GOALS:
        found = re.fullmatch(pattern, sentence)
        if found:
            first, second = found.group(1), found.group(2)
            if task_type == "look_at_obj_in_light":
                return Goal(task_type, first, lamp=second)
            return Goal(task_type, first, place=second)
    return None


def _kind(name: str) -> str:
    return name.rsplit(" ", 1)[0]


@dataclass
class _View:
    """What the agent knows after the observations so far."""

    receptacles: list[str]
    at: str | None = None
    contents: dict[str, list[str]] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)
    holding: str | None = None
    treated: set[str] = field(default_factory=set)
    placed: set[str] = field(default_factory=set)

    def see(self, text: str, action: str) -> None:
        """Fold in the observation that `action` (the last command) got."""
        if text.startswith("Nothing happens."):
            verb, _, recep = action.partition(" ")
            if action.startswith("go to "):  # it shares its place with where the agent is
                self.at = action.removeprefix("go to ")
            elif verb in ("examine", "open") and recep == self.at:  # nothing to search there
                self.contents.setdefault(recep, [])
                self.closed.discard(recep)
            return
        for match in _CONTENTS_RE.finditer(text):
            recep = match.group(1) or match.group(2)
            self.contents[recep] = _ITEM_RE.findall(match.group(3))
            self.closed.discard(recep)
        for match in _CLOSED_RE.finditer(text):
            self.closed.add(match.group(1))
        if found := _ARRIVE_RE.match(text):
            self.at = found.group(1)
        elif found := _CLOSE_RE.match(text):
            self.closed.add(found.group(1))
        elif found := _TAKE_RE.match(text):
            obj, recep = found.groups()
            self.holding = obj
            self.contents[recep] = [o for o in self.contents.get(recep, []) if o != obj]
        elif found := _MOVE_RE.match(text):
            obj, recep = found.groups()
            self.holding = None
            self.contents.setdefault(recep, []).append(obj)
            self.placed.add(obj)
        elif found := _TREAT_RE.match(text):
            self.treated.add(found.group(1))

    def first(self, kind: str) -> str | None:
        """The first listed receptacle of class `kind`."""
        return next((r for r in self.receptacles if _kind(r) == kind), None)

    def where(self, kind: str, skip: set[str]) -> tuple[str, str] | None:
        """(object, receptacle) of a seen object of class `kind` not in `skip`."""
        for recep in self.receptacles:
            for obj in self.contents.get(recep, []):
                if _kind(obj) == kind and obj not in skip:
                    return obj, recep
        return None


def _visit(view: _View, recep: str, then: str) -> str:
    """Go to `recep`, look at it when the arrival showed nothing of it (it shares its place
    with the last one), open it when closed, then do `then`."""
    if view.at != recep:
        return f"go to {recep}"
    if recep in view.closed:
        return f"open {recep}"
    if recep not in view.contents:
        return f"examine {recep}"
    return then


SearchOrder = Literal["surfaces_first", "listed"]
"""How the explorer searches: `surfaces_first` (the default: surfaces before furniture with
doors, the goal's class last; fewest steps) or `listed` (the room's own order, as the first
observation lists it: the next receptacle is always the one after the last searched, which a
small model copies more easily than it learns the default's sort)."""


def _explore(view: _View, goal: Goal, order: SearchOrder) -> str:
    """Search the next receptacle not searched yet, in `order`."""
    if order == "listed":
        ranked = list(view.receptacles)
    else:
        ranked = sorted(
            view.receptacles, key=lambda r: (_kind(r) == goal.place, _kind(r) in CLOSED_KINDS)
        )
    for recep in ranked:
        if recep not in view.contents:
            return _visit(view, recep, "look")
    return "look"


@dataclass(frozen=True)
class ExplorerNoise:
    """Deliberate mistakes in the explorer's play: at each turn, with probability `rate` (a
    draw keyed by `seed`, the episode's first observation and the turn), a wrong command
    instead of the explorer's: go to or examine a random listed receptacle, go to where the
    agent already is, or take an object of the goal's class from where it is (mostly "Nothing
    happens."). The explorer then carries on from the state that command left."""

    rate: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate < 1.0:
            raise ValueError(f"ExplorerNoise.rate must be in [0, 1), got {self.rate}")

    def _draw(self, first_observation: str, turn: int) -> random.Random:
        return random.Random(f"explorer-noise|{self.seed}|{turn}|{first_observation}")

    def noisy(self, first_observation: str, turn: int) -> bool:
        """Whether turn `turn` (0-based) of the episode that began with `first_observation`
        plays a mistake."""
        return self.rate > 0 and self._draw(first_observation, turn).random() < self.rate

    def command(
        self,
        first_observation: str,
        turn: int,
        receptacles: Sequence[str],
        at: str | None,
        obj: str,
    ) -> str:
        """The mistake of that turn (`receptacles`: the room's; `at`: where the agent is;
        `obj`: the goal's object class)."""
        rng = self._draw(first_observation, turn)
        rng.random()  # the draw `noisy` made
        recep = rng.choice(list(receptacles)) if receptacles else "room 1"
        here = at or recep
        return rng.choice(
            (
                f"go to {recep}",
                f"examine {recep}",
                f"go to {here}",
                f"take {obj} {rng.randint(1, 3)} from {here}",
            )
        )


def explorer_action(
    goal: Goal,
    observations: Sequence[str],
    order: SearchOrder = "surfaces_first",
    noise: ExplorerNoise | None = None,
) -> str:
    """The explorer's next command, from the goal and the episode's observations in order:
    the first one (it lists the room's receptacles), then what each of the explorer's own
    commands got (with `noise`: its mistakes included)."""
    first = observations[0]
    view = _View(receptacles=_ITEM_RE.findall(first.split("Your task is to:")[0]))

    def command(turn: int) -> str:
        if noise is not None and noise.noisy(first, turn):
            return noise.command(first, turn, view.receptacles, view.at, goal.obj)
        return _decide(view, goal, order)

    for turn, text in enumerate(observations[1:]):
        view.see(text.strip(), command(turn))
    return command(len(observations) - 1)


def _decide(view: _View, goal: Goal, order: SearchOrder) -> str:
    holding = view.holding
    if goal.task_type == "look_at_obj_in_light":
        if holding is None:
            seen = view.where(goal.obj, set())
            if seen is None:
                return _explore(view, goal, order)
            return _visit(view, seen[1], f"take {seen[0]} from {seen[1]}")
        lamp = view.where(goal.lamp, set())
        if lamp is None:
            return _explore(view, goal, order)
        return _visit(view, lamp[1], f"use {lamp[0]}")
    if holding is None:
        seen = view.where(goal.obj, view.placed)
        if seen is None:
            return _explore(view, goal, order)
        return _visit(view, seen[1], f"take {seen[0]} from {seen[1]}")
    tool = goal.tool
    if tool is not None and holding not in view.treated:
        station = view.first(tool[0])
        if station is None:
            return "look"
        return _visit(view, station, f"{tool[1]} {holding} with {station}")
    place = view.first(goal.place)
    if place is None:
        return "look"
    return _visit(view, place, f"move {holding} to {place}")


_OBSERVATION = "Observation:\n"
_ENDS = ("\nAvailable actions", "</tool_response>", "<|im_end|>", "<|im_start|>")


def observations_in(prompt_text: str, ends: Sequence[str] = _ENDS) -> list[str]:
    """The `Observation:` blocks of a rendered conversation, in order (each cut at the first
    of `ends`: the action list heading, the end of a tool response or of a message)."""
    blocks = []
    for chunk in prompt_text.split(_OBSERVATION)[1:]:
        cut = min((i for i in (chunk.find(e) for e in ends) if i >= 0), default=len(chunk))
        blocks.append(chunk[:cut].strip())
    return blocks


def explorer_policy(
    write: Callable[[str], str] | None = None,
    order: SearchOrder = "surfaces_first",
    noise: ExplorerNoise | None = None,
) -> Callable[[str], str]:
    """`policy(prompt_text) -> reply` for `PolicySampler`: the explorer's command (searching
    in `order`, with `noise`'s mistakes) for the rendered conversation, written by `write`
    (e.g. `protocol.call_text`; default: as is)."""

    def policy(prompt_text: str) -> str:
        observations = observations_in(prompt_text)
        if not observations:
            raise ValueError("no observation found in the prompt")
        goal = parse_goal(observations[0])
        command = "look" if goal is None else explorer_action(goal, observations, order, noise)
        return write(command) if write is not None else command

    return policy
