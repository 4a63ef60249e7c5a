"""A branch of a `FastGame`: one playthrough, as cheap to create and copy as a few ints."""

from __future__ import annotations

from agentrl.envs.alfworld.fast.facts import FactState
from agentrl.envs.alfworld.fast.game import FastGame, Valid
from agentrl.envs.alfworld.fast.records import BranchStep

__all__ = ["NOTHING_HAPPENS", "FastBranch"]

NOTHING_HAPPENS = "Nothing happens."


class FastBranch:
    """One independent playthrough of a loaded game (not thread-safe; the game is)."""

    def __init__(self, game: FastGame) -> None:
        self._game: FastGame | None = game
        self._sid = game.initial_sid
        self._facts: FactState = game.initial_facts.copy()
        self._valid: Valid = game.initial_valid
        self.moves = 0

    @property
    def game(self) -> FastGame:
        """The game this branch plays."""
        if self._game is None:
            raise RuntimeError("this ALFWorld branch is closed")
        return self._game

    def reset(self) -> BranchStep:
        """Return to the game's initial state."""
        game = self.game
        self._sid = game.initial_sid
        self._facts = game.initial_facts.copy()
        self._valid = game.initial_valid
        self.moves = 0
        return BranchStep(
            observation=game.intro,
            score=0.0,
            done=False,
            won=self._valid.won,
            admissible_commands=self._valid.admissible,
            gamefile=game.gamefile,
            state_key=game.state_key(self._facts),
        )

    def step(self, command: str) -> BranchStep:
        """Execute `command` (stripped); an inadmissible command changes nothing."""
        game = self.game
        command = command.strip()
        valid = self._valid
        try:
            index = valid.commands.index(command)
        except ValueError:
            index = -1
        if index >= 0:
            name = valid.op_names[index]
            op_id, n_effects = valid.op_ids[index], valid.effect_counts[index]
            self._sid = game.apply(self._sid, op_id, n_effects, self._facts)
            observation = game.feedback(name, self._facts)
            self.moves += 1
            valid = self._valid = game.valid(self._sid, self._facts)
        else:
            observation = NOTHING_HAPPENS
        won = valid.won
        return BranchStep(
            observation=observation,
            score=1.0 if won else 0.0,
            done=won,
            won=won,
            admissible_commands=valid.admissible,
            gamefile=None,  # ALFWorld's AlfredInfos reports the game file on reset only
            state_key=game.state_key(self._facts),
            executed=index >= 0,
        )

    def copy(self) -> FastBranch:
        """An independent branch in the same state."""
        other = FastBranch(self.game)
        other._sid = self._sid
        other._facts = self._facts.copy()
        other._valid = self._valid
        other.moves = self.moves
        return other

    def plan(self) -> list[str]:
        """The PDDL planner's commands from the current state (empty when none is found)."""
        return self.game.plan(self._sid)

    def state_key(self) -> str:
        """Key of the current state (see `facts_state_key`)."""
        return self.game.state_key(self._facts)

    def close(self) -> None:
        """Forget the game (the engine owns it); harmless to call twice."""
        self._game = None
