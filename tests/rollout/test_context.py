"""Context policies (`agentrl.rollout.context`): a window of recent turns through segments, on
the toy env with the real Qwen tokenizer and chat template. Every trained token must stay a
sampled token, scored under the prompt it was sampled from."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agentrl.algo.metrics import episode_stats
from agentrl.chat import ChatRenderer
from agentrl.config import TrainConfig
from agentrl.datums import trajectory_to_datums
from agentrl.envs.toy import make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.rollout import FullHistory, RecentTurns, RolloutConfig, SummarizedTurns, rollout_group
from agentrl.store.records import TrajectoryRecord
from agentrl.testing import PolicySampler, synthetic_logprobs
from agentrl.training.build import context_policy, rollout_config_for
from agentrl.types import StopReason, Trajectory, TurnStatus

PROTOCOL = toy_tool_protocol()
TASK = toy_tasks(1, seed=0)[0]  # key 1 on shelf 1, target bin 1, start at drawer 1
ACTIONS = [
    "go to counter 1",
    "go to shelf 1",
    "go to drawer 1",
    "go to counter 1",
    "go to shelf 1",
    "take key 1 from shelf 1",
    "go to bin 1",
    "move key 1 to bin 1",
]


def reply(turn: int) -> str:
    """A reply with a text of its own (`move number T.`) before the call."""
    return f"move number {turn}.\n{PROTOCOL.call_text(ACTIONS[turn])}"


@pytest.fixture(scope="module")
def renderer(qwen_tokenizer: Any) -> ChatRenderer:
    return ChatRenderer(qwen_tokenizer, PROTOCOL.tools)


async def play(tok: Any, renderer: ChatRenderer, config: RolloutConfig) -> Trajectory:
    played = iter(range(len(ACTIONS)))
    sampler = PolicySampler(tok, lambda _prompt: reply(next(played)))
    group = await rollout_group(
        TASK,
        env_factory=make_toy_group,
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=config,
    )
    (trajectory,) = group.trajectories
    assert trajectory.stop_reason is StopReason.WON, trajectory.error
    assert len(trajectory.turns) == len(ACTIONS)
    return trajectory


def config(policy: Any) -> RolloutConfig:
    return RolloutConfig(group_size=1, max_env_steps=len(ACTIONS), context=policy)


def check_datums(trajectory: Trajectory) -> int:
    """Each segment's datum trains exactly its turns' sampled tokens, with their logprobs,
    after exactly the prompt each was sampled from; returns the number of datums."""
    datums = trajectory_to_datums(trajectory, [1.0] * len(trajectory.turns))
    starts = [i for i, t in enumerate(trajectory.turns) if i == 0 or t.new_segment]
    assert len(datums) == len(starts)
    for datum, first, end in zip(datums, starts, [*starts[1:], len(trajectory.turns)], strict=True):
        turns = trajectory.turns[first:end]
        trained = datum.target_tokens[datum.mask == 1.0]
        sampled = [token for turn in turns for token in turn.completion_tokens]
        assert trained.tolist() == sampled
        expected = [
            lp
            for t in turns
            for lp in synthetic_logprobs(t.completion_tokens, len(t.prompt_tokens))
        ]
        assert np.allclose(datum.logprobs[datum.mask == 1.0], expected)
        for turn in turns:  # the tokens before a completion are its prompt, token for token
            n = len(turn.prompt_tokens)
            assert datum.model_input[:n].tolist() == list(turn.prompt_tokens)
    return len(datums)


async def test_full_history_is_one_segment(qwen_tokenizer: Any, renderer: ChatRenderer) -> None:
    trajectory = await play(qwen_tokenizer, renderer, config(FullHistory()))
    assert [t.dropped_turns for t in trajectory.turns] == [0] * len(ACTIONS)
    assert check_datums(trajectory) == 1


async def test_a_window_keeps_the_first_messages_and_the_last_turns(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    full = await play(qwen_tokenizer, renderer, config(FullHistory()))
    window = await play(qwen_tokenizer, renderer, config(RecentTurns(2)))
    # turn t's prompt holds turns max(0, t - 2) .. t - 1: a cut (a new segment) every turn from 3
    assert [t.dropped_turns for t in window.turns] == [max(0, t - 2) for t in range(8)]
    assert [t.new_segment for t in window.turns] == [t >= 3 for t in range(8)]
    assert check_datums(window) == 6
    first_observation = qwen_tokenizer.decode(list(full.turns[0].prompt_tokens))
    for t, turn in enumerate(window.turns):
        text = qwen_tokenizer.decode(list(turn.prompt_tokens))
        assert text.startswith(first_observation)  # system prompt, task, first observation
        for earlier in range(t):
            assert (f"move number {earlier}." in text) is (earlier >= t - 2), (t, earlier)
    # same replies, same episode: the window only shortens the prompts
    assert [t.status for t in window.turns] == [t.status for t in full.turns]
    assert window.turns[-1].env_step == full.turns[-1].env_step
    longest = max(len(t.prompt_tokens) for t in window.turns)
    assert longest < len(full.turns[-1].prompt_tokens) * 0.7


async def test_slack_lets_the_prompt_grow_before_a_cut(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    trajectory = await play(qwen_tokenizer, renderer, config(RecentTurns(2, slack=2)))
    # grows to 4 turns in context, then is cut back to 2 (before turn 5); the next cut would
    # come 3 turns later, after the last turn
    assert [t.dropped_turns for t in trajectory.turns] == [0, 0, 0, 0, 0, 3, 3, 3]
    assert [t.new_segment for t in trajectory.turns] == [t == 5 for t in range(8)]
    assert check_datums(trajectory) == 2


async def test_records_keep_where_the_context_was_cut(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    trajectory = await play(qwen_tokenizer, renderer, config(RecentTurns(3)))
    record = TrajectoryRecord.from_json(TrajectoryRecord.from_trajectory(trajectory).to_json())
    assert [t.dropped_turns for t in record.turns] == [max(0, t - 3) for t in range(8)]
    assert [t.new_segment for t in record.turns] == [t >= 4 for t in range(8)]
    back = record.to_trajectory()
    assert [t.dropped_turns for t in back.turns] == [t.dropped_turns for t in trajectory.turns]


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="turns >= 1"):
        RecentTurns(0)
    with pytest.raises(ValueError, match="slack >= 0"):
        RecentTurns(2, slack=-1)
    with pytest.raises(TypeError, match="ContextPolicy"):
        RolloutConfig(context=5)  # type: ignore[arg-type]


def test_the_cli_flags_build_the_policy() -> None:
    base = {"env": "toy", "base_model": "tiny", "backend": "local"}
    assert isinstance(context_policy(TrainConfig(**base)), FullHistory)
    windowed = TrainConfig(**base, context_window=5, context_slack=2)
    assert context_policy(windowed) == RecentTurns(5, 2)
    rollout = rollout_config_for(windowed, 4, windowed.sampling_params())
    assert rollout.context == RecentTurns(5, 2)
    with pytest.raises(ValueError, match=r"context_slack \(2\) needs --context-window"):
        TrainConfig(**base, context_slack=2)


SUMMARY_ASK = "summarize the episode so far"


def summarizing_policy() -> Any:
    """Actions in order; a prompt that asks for a summary gets `SUMMARY k: ...` instead."""
    actions = iter(range(len(ACTIONS)))
    summaries = iter(range(100))

    def policy(prompt: str) -> str:
        last_user = prompt.rsplit("<|im_start|>user", 1)[-1]
        if SUMMARY_ASK in last_user:
            return f"SUMMARY {next(summaries)}: the moves so far."
        return reply(next(actions))

    return policy


async def play_summarized(tok: Any, renderer: ChatRenderer, policy: Any) -> Trajectory:
    group = await rollout_group(
        TASK,
        env_factory=make_toy_group,
        sampler=PolicySampler(tok, summarizing_policy()),
        renderer=renderer,
        protocol=PROTOCOL,
        config=RolloutConfig(
            group_size=1, max_env_steps=len(ACTIONS), context=policy, sampler_retries=0
        ),
    )
    (trajectory,) = group.trajectories
    return trajectory


async def test_a_summarizing_window_trains_its_summaries_and_prompts_hold_them(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    full = await play(qwen_tokenizer, renderer, config(FullHistory()))
    trajectory = await play_summarized(qwen_tokenizer, renderer, SummarizedTurns(2))
    assert trajectory.stop_reason is StopReason.WON, trajectory.error
    kinds = ["S" if t.summary else "A" for t in trajectory.turns]
    # a cut before the prompts of turns 3..7, each preceded by a summary
    assert "".join(kinds) == "AAA" + "SA" * 5
    actions = [t for t in trajectory.turns if not t.summary]
    assert [t.status for t in actions] == [t.status for t in full.turns]
    assert trajectory.env_steps == len(ACTIONS)
    summaries = [t for t in trajectory.turns if t.summary]
    for k, turn in enumerate(summaries):
        assert turn.status is TurnStatus.SUMMARY and turn.env_step is None
        assert turn.new_segment and turn.assistant_text.startswith(f"SUMMARY {k}:")
        text = qwen_tokenizer.decode(list(turn.prompt_tokens))
        assert SUMMARY_ASK in text.rsplit("<|im_start|>user", 1)[-1]
        if k:  # the summary accumulates: it sees the previous one
            assert f"SUMMARY {k - 1}:" in text
    for t, turn in enumerate(actions):
        text = qwen_tokenizer.decode(list(turn.prompt_tokens))
        assert (f"SUMMARY {t - 3}:" in text) is (t >= 3), t  # the latest summary
        for earlier in range(t):
            assert (f"move number {earlier}." in text) is (earlier >= t - 2), (t, earlier)
        assert SUMMARY_ASK not in text
    assert check_datums(trajectory) == 1 + 2 * 5  # every trained token is a sampled token
    stats = episode_stats([trajectory])
    assert stats.mean_turns == len(ACTIONS) and stats.tool_format_rate == 1.0
    record = TrajectoryRecord.from_json(TrajectoryRecord.from_trajectory(trajectory).to_json())
    assert ["S" if t.status is TurnStatus.SUMMARY else "A" for t in record.turns] == kinds
    assert [t.summary for t in record.to_trajectory().turns] == [k == "S" for k in kinds]


async def test_a_failed_summary_ends_the_branch_as_a_sampler_error(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    class NoSummaries(PolicySampler):
        async def sample(self, prompt_tokens: Any, num_samples: int, params: Any) -> Any:
            text = qwen_tokenizer.decode(list(prompt_tokens))
            if SUMMARY_ASK in text.rsplit("<|im_start|>user", 1)[-1]:
                raise ConnectionError("summary service down")
            return await super().sample(prompt_tokens, num_samples, params)

    played = iter(range(len(ACTIONS)))
    group = await rollout_group(
        TASK,
        env_factory=make_toy_group,
        sampler=NoSummaries(qwen_tokenizer, lambda _prompt: reply(next(played))),
        renderer=renderer,
        protocol=PROTOCOL,
        config=RolloutConfig(
            group_size=1,
            max_env_steps=len(ACTIONS),
            context=SummarizedTurns(2),
            sampler_retries=0,
        ),
    )
    (trajectory,) = group.trajectories
    assert trajectory.stop_reason is StopReason.SAMPLER_ERROR
    assert "summary service down" in (trajectory.error or "")
    assert len(trajectory.turns) == 3  # the turn before the cut is kept; no summary turn


def test_the_summary_flags_build_the_policy() -> None:
    base = {"env": "toy", "base_model": "tiny", "backend": "local"}
    chosen = TrainConfig(**base, context_window=4, context_summary=True, context_summary_tokens=64)
    assert context_policy(chosen) == SummarizedTurns(4, 0, 64)
    with pytest.raises(ValueError, match="context_summary needs --context-window"):
        TrainConfig(**base, context_summary=True)
    with pytest.raises(ValueError, match="max_tokens >= 1"):
        SummarizedTurns(2, max_tokens=0)
