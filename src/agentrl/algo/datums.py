"""Trajectory -> Datum: the ONLY place where training masks and shifts are built.

One datum per trajectory, from its full token sequence `T` (the last prompt followed by the
last completion; every earlier prompt is a prefix of it, and in a rollout's trajectory a
`TokenPrefix` of the same buffer: prompts are stored once, each turn is an offset into it):

    model_input   = T[:-1]
    target_tokens = T[1:]
    logprobs[j]   = sampler logprob of T[j+1]  if T[j+1] was sampled by the assistant, else 0
    advantages[j] = advantage of that turn     if T[j+1] was sampled by the assistant, else 0
    mask[j]       = 1.0                        if T[j+1] was sampled by the assistant, else 0

System, user and tool tokens, and closing tokens the renderer added after a completion, were
not sampled: they get logprob 0, advantage 0 and mask 0. Backends that only accept
`target_tokens`, `logprobs` and `advantages` (PyTRIO / Tinker PPO) mask by zero advantage;
`mask` lets the local backend normalise by the number of assistant tokens.

Segments: where a chat template cannot be extended, the rollout re-renders the conversation and
marks the turn `new_segment`. A trajectory then yields one datum per segment (a run of turns
that extend one another), each built as above from its own last prompt and completion; every
masked token is still a sampled token with its sampler logprob.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agentrl.algo.advantages import Advantages, ScoredGroup, advantages_of
from agentrl.chat.conversation import ConversationPiece, RenderedConversation
from agentrl.core.tokens import TokenPrefix
from agentrl.core.types import Trajectory, TrajectoryGroup, Turn

__all__ = [
    "Datum",
    "PrefixError",
    "build_datums",
    "completion_datum",
    "has_signal",
    "kept_datums",
    "scored_datums",
    "scored_trajectory_datums",
    "segments",
    "sequence_index",
    "supervised_datum",
    "supervised_datums",
    "trajectory_datums",
    "trajectory_to_datum",
    "trajectory_to_datums",
]

IntArray = npt.NDArray[np.int64]
Float32Array = npt.NDArray[np.float32]


class PrefixError(ValueError):
    """A turn's prompt is not a prefix of the trajectory's token sequence."""


@dataclass(frozen=True, eq=False)
class Datum:
    """One training example, backend-neutral (numpy arrays, all of equal length)."""

    model_input: IntArray
    target_tokens: IntArray
    logprobs: Float32Array
    advantages: Float32Array
    mask: Float32Array
    sequence: str | None = None
    """The trajectory this datum is a segment of (`build_datums`: `"<group>/<index>"`): the
    segments of one trajectory are one sequence for `sequence` normalisation and gspo's ratio.
    None: the datum is a sequence of its own."""

    def __post_init__(self) -> None:
        n = len(self.model_input)
        for name in ("target_tokens", "logprobs", "advantages", "mask"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"Datum.{name} has length {len(getattr(self, name))}, model_input has {n}"
                )

    def __len__(self) -> int:
        return len(self.model_input)

    @property
    def num_assistant_tokens(self) -> int:
        """Number of target positions trained (a nonzero mask): the assistant's sampled tokens,
        plus, under imitation's `context_weight`, the environment text targeted at that weight
        (counted once each, whatever the weight)."""
        return int(np.count_nonzero(self.mask))


def segments(turns: Sequence[Turn]) -> list[tuple[int, int]]:
    """`(first, end)` turn index ranges of the segments (a new one at each `new_segment`)."""
    starts = [0, *(i for i, turn in enumerate(turns) if i and turn.new_segment)]
    return list(zip(starts, [*starts[1:], len(turns)], strict=True))


def trajectory_to_datum(
    trajectory: Trajectory,
    turn_advantages: Sequence[float],
    trained: Sequence[bool] | None = None,
) -> Datum:
    """Build the datum of a one-segment trajectory given one advantage per turn (and, with
    `trained`, which turns' replies are targets: a False turn stays in the sequence as context,
    mask 0, e.g. a deliberate mistake in a demonstration).

    Raises PrefixError if a turn's prompt is not a prefix of the full sequence (the rollout
    broke the exact-extension property) and ValueError on a length mismatch or when the
    trajectory has several segments (use `trajectory_to_datums`).
    """
    datums = trajectory_to_datums(trajectory, turn_advantages, trained=trained)
    if len(datums) != 1:
        raise ValueError(
            f"the trajectory has {len(datums)} segments (its template cannot be extended); "
            "build one datum per segment with trajectory_to_datums"
        )
    return datums[0]


def trajectory_to_datums(
    trajectory: Trajectory,
    turn_advantages: Sequence[float],
    sequence: str | None = None,
    trained: Sequence[bool] | None = None,
    context_weight: float = 0.0,
) -> list[Datum]:
    """One datum per segment of the trajectory (one datum when its template extends), all
    with the sequence key `sequence`; `trained` (one flag per turn, default all True) leaves
    a False turn's reply out of the targets (mask 0) while it stays in the sequence.

    `context_weight` > 0 (imitation only: a cross-entropy weight, not an RL mask) also makes
    targets of the tokens no reply wrote, at that weight: the first prompt of the trajectory
    (system and first observation) and, in every segment, what was appended between one
    reply and the next prompt (the tool message: observation, lists, template). The prompt
    that opens a later segment is left out (it repeats earlier replies, mistakes among them),
    and so is every reply, trained or not: predicting the environment's text is an auxiliary
    loss beside the replies'."""
    if context_weight < 0:
        raise ValueError(f"context_weight must be >= 0, got {context_weight}")
    turns = trajectory.turns
    if len(turn_advantages) != len(turns):
        raise ValueError(
            f"{len(turn_advantages)} advantages for a trajectory of {len(turns)} turns"
        )
    flags = [True] * len(turns) if trained is None else list(trained)
    if len(flags) != len(turns):
        raise ValueError(f"{len(flags)} trained flags for a trajectory of {len(turns)} turns")
    if not turns:
        raise ValueError("cannot build a datum from a trajectory with no turns")
    return [
        _segment_datum(turns[a:b], turn_advantages[a:b], flags[a:b], a, sequence, context_weight)
        for a, b in segments(turns)
    ]


def _tokens(tokens: Sequence[int]) -> IntArray:
    if isinstance(tokens, TokenPrefix):
        return tokens.as_array()  # one bulk conversion, no per-token Python ints
    return np.asarray(tokens, dtype=np.int64)


def _segment_datum(
    turns: Sequence[Turn],
    turn_advantages: Sequence[float],
    trained: Sequence[bool],
    first: int,
    sequence: str | None,
    context_weight: float = 0.0,
) -> Datum:
    last = turns[-1]
    last_prompt = last.prompt_tokens
    full = np.concatenate([_tokens(last_prompt), np.asarray(last.completion_tokens, np.int64)])
    if full.size < 2:
        raise ValueError("a datum needs at least two tokens")
    n = full.size - 1
    logprobs = np.zeros(n, dtype=np.float32)
    advantages = np.zeros(n, dtype=np.float32)
    mask = np.zeros(n, dtype=np.float32)
    previous_end: int | None = None  # the end of the segment's previous reply
    for index, (turn, advantage, target) in enumerate(
        zip(turns, turn_advantages, trained, strict=True), first
    ):
        prompt = turn.prompt_tokens
        start = len(prompt)
        end = start + len(turn.completion_tokens)
        # prompts stored once: a prefix of the last prompt's own buffer is a prefix by
        # construction (the buffer only grows); anything else is compared token by token
        shared = (
            isinstance(prompt, TokenPrefix)
            and isinstance(last_prompt, TokenPrefix)
            and prompt.is_prefix_of(last_prompt)
        )
        if end > full.size or not (shared or np.array_equal(full[:start], _tokens(prompt))):
            raise PrefixError(
                f"turn {index}: its prompt ({start} tokens) is not a prefix of the "
                f"segment's {full.size} tokens"
            )
        if not np.array_equal(full[start:end], np.asarray(turn.completion_tokens)):
            raise PrefixError(f"turn {index}: its completion is not where the prompt ends")
        if start == 0:
            raise ValueError(f"turn {index}: empty prompt; the first token cannot be a target")
        # Target position j predicts full[j + 1]; completion tokens sit at [start, end).
        if context_weight:  # the tokens before this reply that no reply wrote (docstring)
            if previous_end is not None:
                mask[previous_end - 1 : start - 1] = context_weight
            elif index == 0:
                mask[: start - 1] = context_weight
        logprobs[start - 1 : end - 1] = turn.logprobs
        advantages[start - 1 : end - 1] = advantage
        mask[start - 1 : end - 1] = 1.0 if target else 0.0
        previous_end = end
    return Datum(
        model_input=full[:-1].copy(),
        target_tokens=full[1:].copy(),
        logprobs=logprobs,
        advantages=advantages,
        mask=mask,
        sequence=sequence,
    )


def completion_datum(
    prompt_tokens: Sequence[int],
    completion_tokens: Sequence[int],
    logprobs: Sequence[float],
    advantage: float = 0.0,
) -> Datum:
    """The datum of one reply to one prompt (a single-turn trajectory): the reply's tokens
    trained (mask 1, its sampling logprobs, `advantage`), the prompt's not."""
    start, reply = len(prompt_tokens), len(completion_tokens)
    if start == 0 or reply == 0:
        raise ValueError("a completion datum needs a prompt token and a reply token")
    if len(logprobs) != reply:
        raise ValueError(f"{len(logprobs)} logprobs for a reply of {reply} tokens")
    full = np.concatenate([_tokens(prompt_tokens), np.asarray(completion_tokens, np.int64)])
    n = full.size - 1
    mask = np.zeros(n, dtype=np.float32)
    mask[start - 1 :] = 1.0
    behaviour = np.zeros(n, dtype=np.float32)
    behaviour[start - 1 :] = logprobs
    return Datum(
        model_input=full[:-1].copy(),
        target_tokens=full[1:].copy(),
        logprobs=behaviour,
        advantages=mask * np.float32(advantage),
        mask=mask,
    )


def supervised_datum(pieces: Sequence[ConversationPiece], sequence: str | None = None) -> Datum:
    """The supervised datum of one segment of a rendered conversation
    (`agentrl.chat.conversation`): mask 1 (and advantage 1) on every target the assistant wrote,
    0 on the context; no sampler logprobs (zero). Trained with the cross-entropy loss."""
    full = np.asarray([t for p in pieces for t in p.tokens], dtype=np.int64)
    trained = np.asarray([p.trained for p in pieces for _ in p.tokens], dtype=bool)
    if full.size < 2 or not trained[1:].any():
        raise ValueError("a supervised datum needs a context token and an assistant token after it")
    if trained[0]:
        raise ValueError("a supervised datum cannot start with an assistant token (no context)")
    mask = trained[1:].astype(np.float32)
    return Datum(
        model_input=full[:-1].copy(),
        target_tokens=full[1:].copy(),
        logprobs=np.zeros(mask.size, dtype=np.float32),
        advantages=mask.copy(),
        mask=mask,
        sequence=sequence,
    )


def supervised_datums(conversation: RenderedConversation, key: str | None = None) -> list[Datum]:
    """One supervised datum per segment of `conversation` (segments of one conversation share
    the sequence key `key`)."""
    return [supervised_datum(segment, key) for segment in conversation.segments]


def sequence_index(datums: Sequence[Datum]) -> list[int]:
    """Which sequence each datum belongs to (0, 1, ...): consecutive datums with the same
    `sequence` key are the segments of one trajectory; a datum without a key is its own."""
    index: list[int] = []
    for i, datum in enumerate(datums):
        same = i > 0 and datum.sequence is not None and datum.sequence == datums[i - 1].sequence
        index.append(index[-1] if same else (index[-1] + 1 if index else 0))
    return index


def has_signal(advantages: Sequence[float]) -> bool:
    """True when at least one turn has a non-zero advantage (the trajectory is worth training)."""
    return any(a != 0.0 for a in advantages)


def build_datums(
    groups: Sequence[TrajectoryGroup],
    advantages: Advantages,
    *,
    skip_zero_advantage: bool = True,
) -> list[Datum]:
    """One datum per trajectory segment, in group order; zero-advantage trajectories skipped by
    default."""
    pairs = trajectory_datums(groups, advantages, skip_zero_advantage=skip_zero_advantage)
    return [datum for _, datum in pairs]


def trajectory_datums(
    groups: Sequence[TrajectoryGroup],
    advantages: Advantages,
    *,
    skip_zero_advantage: bool = True,
) -> list[tuple[Trajectory, Datum]]:
    """`build_datums` with the trajectory each datum was built from (a teacher that reads the
    trajectory, e.g. self-distillation's privileged context, scores each datum with it)."""
    if len(groups) != len(advantages.groups):
        raise ValueError(f"{len(groups)} groups but {len(advantages.groups)} advantage groups")
    pairs: list[tuple[Trajectory, Datum]] = []
    for group, group_adv in zip(groups, advantages.groups, strict=True):
        if len(group.trajectories) != len(group_adv.per_turn):
            raise ValueError(
                f"group {group.group_id}: {len(group.trajectories)} trajectories but "
                f"{len(group_adv.per_turn)} advantage rows"
            )
        rows = zip(group.trajectories, group_adv.per_turn, strict=True)
        for index, (trajectory, turn_adv) in enumerate(rows):
            if not trajectory.turns or (skip_zero_advantage and not has_signal(turn_adv)):
                continue
            key = f"{group.group_id}/{index}"
            pairs += [(trajectory, d) for d in trajectory_to_datums(trajectory, turn_adv, key)]
    return pairs


def kept_datums(
    groups: Sequence[TrajectoryGroup], keep: Callable[[Trajectory], bool]
) -> list[Datum]:
    """The supervised datums (every assistant token, weight 1) of the trajectories `keep`
    accepts, in group order: rejection sampling's training set (e.g. the won ones)."""
    datums: list[Datum] = []
    for group in groups:
        for index, trajectory in enumerate(group.trajectories):
            if trajectory.turns and keep(trajectory):
                ones = [1.0] * len(trajectory.turns)
                datums.extend(trajectory_to_datums(trajectory, ones, f"{group.group_id}/{index}"))
    return datums


def scored_datums(
    scored: Sequence[ScoredGroup], *, keep_zero_advantage: bool = False
) -> list[Datum]:
    """The training datums of scored groups: the one function whole-batch training and
    streaming (`agentrl.training.streaming`) both use, so a batch streamed group by group gives
    the datums of the batch trained at once. Zero-advantage trajectories (all of a degenerate
    group's) are skipped unless `keep_zero_advantage`: with a KL penalty they still carry its
    gradient (`LossConfig.needs_every_token`)."""
    return [d for _, d in scored_trajectory_datums(scored, keep_zero_advantage=keep_zero_advantage)]


def scored_trajectory_datums(
    scored: Sequence[ScoredGroup], *, keep_zero_advantage: bool = False
) -> list[tuple[Trajectory, Datum]]:
    """`scored_datums` with the trajectory of each datum (`trajectory_datums`)."""
    return trajectory_datums(
        [s.group for s in scored],
        advantages_of(scored),
        skip_zero_advantage=not keep_zero_advantage,
    )
