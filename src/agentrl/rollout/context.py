"""Context policies: which of an episode's earlier turns the next prompt holds.

By default every prompt carries the whole history (`FullHistory`, the published recipe): each
prompt extends the last one, so a trajectory is one training sequence. `RecentTurns(n)` keeps
the first messages (system prompt, task and first observation) and only the last `n` turns, as
verl-agent does for ALFWorld: when more than `n + slack` turns would be in the prompt, the
conversation is rendered afresh from the first messages and the last `n` turns. That prompt
starts a new segment (`Turn.new_segment`, one datum per segment in `agentrl.algo.datums`), so
every trained token is still a sampled token, scored under the very prompt it was sampled
from; `Turn.dropped_turns` records how many earlier turns the prompt left out.

`slack` trades prefill for cuts: with `slack=0` every turn past the `n`-th is a new segment
(each prompt is rendered afresh); with `slack=s` the prompt grows by extension for `s` more
turns and is then cut back to `n`, so a cut happens once every `s + 1` turns.

`SummarizedTurns(n, slack)` cuts like `RecentTurns`, but first asks the model for a summary:
the prompt as it stands (the turns about to be dropped included), plus a user message with
`instruction`, is sampled once more. That reply is a *summary turn* (`Turn.summary`, status
`summary`): no environment step, no step of `max_env_steps` used, its own segment, trained
with the trajectory's advantage like any sampled turn. The prompts after the cut hold the
first messages, the summary (a user message, `summary_prefix` + its text) and the last `n`
turns; the next summary sees the previous one, so it accumulates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["ContextPolicy", "FullHistory", "RecentTurns", "SummarizedTurns", "SummaryPolicy"]


@runtime_checkable
class ContextPolicy(Protocol):
    """Decides, after each turn, whether the next prompt drops earlier turns."""

    def keep(self, in_context: int) -> int | None:
        """With `in_context` turns in the next prompt (the turn just played included): how
        many of the latest the prompt keeps once cut, or None to extend the prompt as it is."""
        ...


@dataclass(frozen=True)
class FullHistory:
    """Every prompt holds the whole episode (the default and the published recipe)."""

    def keep(self, in_context: int) -> int | None:
        """Never cut."""
        return None


@dataclass(frozen=True)
class RecentTurns:
    """The first messages and the last `turns` turns (cut when more than `turns + slack`)."""

    turns: int
    """Turns kept after a cut (>= 1)."""
    slack: int = 0
    """Turns the prompt may grow by before it is cut back to `turns` (>= 0)."""

    def __post_init__(self) -> None:
        if self.turns < 1 or self.slack < 0:
            raise ValueError(
                f"{type(self).__name__} needs turns >= 1 and slack >= 0, got "
                f"turns={self.turns}, slack={self.slack} (use FullHistory() to keep every turn)"
            )

    def keep(self, in_context: int) -> int | None:
        """`turns` once the prompt would hold more than `turns + slack` turns."""
        return self.turns if in_context > self.turns + self.slack else None


DEFAULT_SUMMARY_INSTRUCTION = (
    "Before you continue: summarize the episode so far for your own later use (the task, what "
    "you did, what you observed and what is left to do). Reply with the summary only, no tool "
    "call."
)
DEFAULT_SUMMARY_PREFIX = "Summary of the earlier steps, written by you:\n"


@runtime_checkable
class SummaryPolicy(ContextPolicy, Protocol):
    """A context policy that has the model summarize what a cut drops (`SummarizedTurns`)."""

    @property
    def instruction(self) -> str:
        """The user message that asks for the summary."""
        ...

    @property
    def summary_prefix(self) -> str:
        """Put before the summary's text in the user message later prompts hold."""
        ...

    @property
    def max_tokens(self) -> int:
        """The most tokens a summary may take."""
        ...


@dataclass(frozen=True)
class SummarizedTurns(RecentTurns):
    """`RecentTurns` (the same cuts), with a sampled summary of the episode before every cut
    (module docstring)."""

    max_tokens: int = 256
    instruction: str = DEFAULT_SUMMARY_INSTRUCTION
    summary_prefix: str = DEFAULT_SUMMARY_PREFIX

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_tokens < 1:
            raise ValueError(f"SummarizedTurns needs max_tokens >= 1, got {self.max_tokens}")
