"""A toy task that must be *remembered* to be won: the vault code is told once, used later.

The first observation tells the code (`A note says: the vault code is blue. The vault is 3
rooms ahead. Ways on: east or north.`) and no later message repeats it. The agent walks through
`rooms` rooms (each offers two directions, in a per-game draw; both lead on; every observation
names them), then stands before the vault's `buttons` colour buttons (listed in a per-game
order) and presses one: the code's button opens the vault (won), any other ends the
episode. A uniformly random *valid* policy therefore wins
`1 / buttons` of the episodes (25% with the default 4 buttons), and only the first message tells
the right button from the others: winning needs recalling a fact `rooms + 1` replies back.

`VaultEnv` is a `FunctionEnv` with two tools, `walk(direction)` and `press(button)`, that also
lists its commands (`admissible_actions()`: `walk north`, `press red`, ...), so one env serves
tool-call models (`vault_protocol()`, function tools) and small plain-command models
(`agentrl.tools.command.PlainCommandProtocol`, the commands verbatim). Every game is fully
determined by its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import TaskInfo
from agentrl.tools import FunctionEnv, FunctionEnvGroup, FunctionTools, tool

__all__ = [
    "VAULT_COLOURS",
    "VaultEnv",
    "VaultTask",
    "vault_group_factory",
    "vault_protocol",
    "vault_random_success",
    "vault_task",
    "vault_tasks",
]

VAULT_COLOURS = ("red", "blue", "green", "yellow", "white", "black")
DIRECTIONS = ("north", "south", "east", "west")
PREFIX = "vault-"
Colour = Literal["red", "blue", "green", "yellow", "white", "black"]
Direction = Literal["north", "south", "east", "west"]


@dataclass(frozen=True)
class VaultTask:
    """The static facts of one vault game."""

    code: str
    """The button that opens the vault (`blue`)."""
    buttons: tuple[str, ...]
    """The vault's buttons (code included), in the order the actions list them."""
    paths: tuple[tuple[str, str], ...]
    """Per room, the two directions on offer (both lead on)."""

    @property
    def rooms(self) -> int:
        """Rooms to walk through before the vault."""
        return len(self.paths)


def vault_task(seed: int, buttons: int = 4, rooms: int = 3) -> VaultTask:
    """The vault game for `seed`: `buttons` colour buttons, `rooms` rooms before the vault."""
    if not 2 <= buttons <= len(VAULT_COLOURS) or rooms < 0:
        raise ValueError(
            f"need 2..{len(VAULT_COLOURS)} buttons and >= 0 rooms, got {buttons} and {rooms}"
        )
    rng = random.Random(seed)
    colours = tuple(rng.sample(VAULT_COLOURS[:buttons], buttons))
    paths = []
    for _ in range(rooms):
        first, second = rng.sample(DIRECTIONS, 2)
        paths.append((first, second))
    return VaultTask(code=rng.choice(colours), buttons=colours, paths=tuple(paths))


def vault_random_success(buttons: int = 4) -> float:
    """Exact success rate of a policy choosing uniformly among the valid actions."""
    return 1.0 / buttons


def vault_tasks(
    count: int, seed: int = 0, split: str = "train", buttons: int = 4, rooms: int = 3
) -> list[TaskInfo]:
    """`count` vault games (seeds `seed`, `seed + 1`, ...) as `TaskInfo` records. The
    description does not name the code (only the first observation does)."""
    if count > 0:
        vault_task(seed, buttons, rooms)  # rejects bad sizes before any record is made
    return [
        TaskInfo(
            task_id=f"{PREFIX}{seed + i}",
            task_type="toy_vault",
            description="open the vault.",
            split=split,
        )
        for i in range(count)
    ]


def _seed_of(task: TaskInfo) -> int:
    tail = task.task_id[len(PREFIX) :]
    if not task.task_id.startswith(PREFIX) or not tail.isdigit():
        raise ValueError(
            f"vault task id must look like 'vault-<seed>', got {task.task_id!r}; "
            "build tasks with agentrl.envs.toy.vault_tasks()"
        )
    return int(tail)


class VaultEnv(FunctionEnv):
    """One branch of a vault game: walk through the rooms, then press the code's button."""

    def __init__(self, task: TaskInfo, *, buttons: int = 4, rooms: int = 3) -> None:
        self.game = vault_task(_seed_of(task), buttons, rooms)
        self.room = 0
        """Rooms walked through (`game.rooms`: at the vault)."""

    @property
    def at_vault(self) -> bool:
        """Whether the branch stands before the vault's buttons."""
        return self.room >= self.game.rooms

    def observation(self) -> str:
        """The code, told once, how far the vault is and where the way goes on."""
        return (
            f"A note says: the vault code is {self.game.code}. "
            f"The vault is {self.game.rooms} rooms ahead. {self._where()}"
        )

    def _where(self) -> str:
        """The ways on, or the vault's buttons (what a tool-call model needs to act)."""
        if self.at_vault:
            return f"Buttons: {', '.join(self.game.buttons)}."
        return f"Ways on: {' or '.join(self.game.paths[self.room])}."

    def state_key(self) -> str:
        """Rooms walked and how the episode stands (the directions taken do not matter)."""
        return f"{self.room}|{self.done}|{self.won}"

    def admissible_actions(self) -> tuple[str, ...]:
        """`walk D` for the room's two directions, or `press C` for each button."""
        if self.done:
            return ()
        if self.at_vault:
            return tuple(f"press {c}" for c in self.game.buttons)
        return tuple(f"walk {d}" for d in self.game.paths[self.room])

    @tool
    def walk(self, direction: Direction) -> str:
        """Walk on to the next room.

        Args:
            direction: One of the directions the room offers.
        """
        if self.at_vault:
            raise ValueError("you stand before the vault; press a button")
        if direction not in self.game.paths[self.room]:
            offered = " or ".join(self.game.paths[self.room])
            raise ValueError(f"no way {direction} here; go {offered}")
        self.room += 1
        if self.at_vault:
            return f"You walk {direction} and reach the vault. {self._where()}"
        return f"You walk {direction} into room {self.room} of {self.game.rooms}. {self._where()}"

    @tool
    def press(self, button: Colour) -> str:
        """Press one of the vault's buttons (the code's opens it; any other sets off the alarm).

        Args:
            button: The button's colour.
        """
        if not self.at_vault:
            raise ValueError("the vault is not here yet; walk on")
        if button not in self.game.buttons:
            raise ValueError(f"the vault has no {button} button")
        self.done = True
        self.won = button == self.game.code
        self.score = 1.0 if self.won else 0.0
        return "The vault opens." if self.won else "Wrong button: the alarm sounds."


def vault_protocol() -> FunctionTools:
    """The tool-call protocol of `VaultEnv` (function tools `walk` and `press`)."""
    return VaultEnv.protocol(
        "Open the vault: walk to it with the walk tool, then press the code's button with the "
        "press tool. Make exactly one tool call per turn."
    )


def vault_group_factory(buttons: int = 4, rooms: int = 3) -> EnvGroupFactory:
    """An `EnvGroupFactory` for vault games of this size."""

    def make(task: TaskInfo) -> VaultEnv:
        return VaultEnv(task, buttons=buttons, rooms=rooms)

    def factory(task: TaskInfo, group_size: int) -> FunctionEnvGroup:
        return FunctionEnvGroup(task, group_size, make)

    return factory
