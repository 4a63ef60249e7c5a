"""Replay (`agentrl.rollout.replay`): recorded episodes played again reply for reply under
another rollout config, on the toy env with the real Qwen tokenizer and chat template."""

from __future__ import annotations

from typing import Any

import pytest

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.core.types import StopReason, TrajectoryGroup
from agentrl.envs.toy import make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.rollout import (
    FullHistory,
    RecentTurns,
    RecordingSampler,
    ReplaySampler,
    RolloutConfig,
    rollout_batch,
)
from agentrl.testing import KeyedPolicySampler

PROTOCOL = toy_tool_protocol()
TASKS = toy_tasks(3, seed=0)
ROOMS = ["go to counter 1", "go to shelf 1", "go to drawer 1", "go to bin 1", "look"]


def wander(_prompt: str, rng: Any) -> str:
    """A keyed random walk (never wins within the steps): long episodes, the cuts' test."""
    return f"step.\n{PROTOCOL.call_text(rng.choice(ROOMS))}"


def config(context: Any, seed: int | None = 7) -> RolloutConfig:
    return RolloutConfig(
        group_size=2,
        max_env_steps=9,
        context=context,
        sampling=SamplingParams(temperature=1.0, seed=seed),
    )


async def play(sampler: Any, renderer: ChatRenderer, cfg: RolloutConfig) -> list[TrajectoryGroup]:
    return await rollout_batch(
        TASKS,
        env_factory=make_toy_group,
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=cfg,
    )


def actions(groups: list[TrajectoryGroup]) -> list[list[str]]:
    return [[turn.assistant_text for turn in t.turns] for g in groups for t in g.trajectories]


async def test_a_replay_under_a_window_plays_the_recorded_episodes_with_windowed_prompts(
    qwen_tokenizer: Any,
) -> None:
    renderer = ChatRenderer(qwen_tokenizer, PROTOCOL.tools)
    recording = RecordingSampler(KeyedPolicySampler(qwen_tokenizer, wander))
    recorded = await play(recording, renderer, config(FullHistory()))
    # one request a turn, but one for both branches' first turn (the group's first request)
    assert len(recording.replies) == sum(len(a) for a in actions(recorded)) - len(TASKS)
    # the same config again: the very same tokens, prompts included
    same = await play(ReplaySampler(recording.replies), renderer, config(FullHistory()))
    assert [
        [(list(u.prompt_tokens), u.completion_tokens) for u in t.turns]
        for g in same
        for t in g.trajectories
    ] == [
        [(list(u.prompt_tokens), u.completion_tokens) for u in t.turns]
        for g in recorded
        for t in g.trajectories
    ]
    windowed = await play(ReplaySampler(recording.replies), renderer, config(RecentTurns(2)))
    assert actions(windowed) == actions(recorded)
    assert [t.reward for g in windowed for t in g.trajectories] == [
        t.reward for g in recorded for t in g.trajectories
    ]
    for full, cut in zip(
        (t for g in recorded for t in g.trajectories),
        (t for g in windowed for t in g.trajectories),
        strict=True,
    ):
        n = len(full.turns)
        assert n >= 5
        # a cut once the prompt would hold 3 turns: every prompt from the 4th on is fresh
        assert [turn.new_segment for turn in cut.turns] == [False] * 3 + [True] * (n - 3)
        assert [turn.dropped_turns for turn in cut.turns] == [0, 0, 0, *range(1, n - 2)]
        assert len(cut.turns[-1].prompt_tokens) < len(full.turns[-1].prompt_tokens)


async def test_a_replay_refuses_requests_it_has_no_recording_for(qwen_tokenizer: Any) -> None:
    renderer = ChatRenderer(qwen_tokenizer, PROTOCOL.tools)
    recording = RecordingSampler(KeyedPolicySampler(qwen_tokenizer, wander))
    await play(recording, renderer, config(FullHistory()))
    # the engine ends an episode whose sampler fails, with the failure as its error
    other = await play(ReplaySampler(recording.replies), renderer, config(FullHistory(), seed=8))
    for trajectory in (t for g in other for t in g.trajectories):
        assert trajectory.stop_reason is StopReason.SAMPLER_ERROR and not trajectory.turns
        assert "no completion was recorded for the request keyed" in str(trajectory.error)
    with pytest.raises(ValueError, match="RecordingSampler needs keyed requests"):
        await recording.sample([1, 2], 1, SamplingParams(seed=None))
    key, first = next(iter(recording.replies.items()))  # a group's first request: 2 branches
    assert len(first) == 2
    with pytest.raises(ValueError, match="asks for 3 completions; 2 were recorded"):
        await ReplaySampler(recording.replies).sample([1], 3, SamplingParams(seed=key))


@pytest.mark.parametrize("context", [FullHistory(), RecentTurns(1)], ids=["whole", "window-1"])
async def test_the_reply_sampler_follows_its_script_turn_by_turn_under_any_window(
    qwen_tokenizer: Any, context: Any
) -> None:
    """`ReplySampler` (the scripted players' sampler) replies with the k-th scripted text at
    every branch's k-th turn, read from the requests' keyed seeds: under a window of one turn
    the prompts of turns 3 to 9 extend no earlier prompt, and the script still goes on."""
    from agentrl.rollout import ReplySampler, rollout_group

    renderer = ChatRenderer(qwen_tokenizer, PROTOCOL.tools)
    script = [PROTOCOL.call_text(room) for room in [*ROOMS, *reversed(ROOMS)]][:8]
    fallback = PROTOCOL.call_text("inventory")
    task, cfg = TASKS[0], config(context)
    sampler = ReplySampler(renderer, script, fallback, rollout=cfg, group_id=task.task_id)
    group = await rollout_group(
        task,
        env_factory=make_toy_group,
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=cfg,
    )
    expected = [*script, fallback]
    for trajectory in group.trajectories:
        replies = [qwen_tokenizer.decode(t.completion_tokens) for t in trajectory.turns]
        assert len(replies) >= 4, trajectory.stop_reason  # past the window's first cut
        assert [r.removesuffix("<|im_end|>") for r in replies] == expected[: len(replies)]


def test_the_reply_sampler_needs_keyed_requests(qwen_tokenizer: Any) -> None:
    """A rollout config without a base seed gives no keyed requests: refused at once, and
    `keyed_rollout` gives one; a request keyed for another group is refused when it comes."""
    import asyncio

    from agentrl.rollout import ReplySampler, keyed_rollout

    renderer = ChatRenderer(qwen_tokenizer, PROTOCOL.tools)
    seedless = config(FullHistory(), seed=None)
    with pytest.raises(ValueError, match="keyed seed"):
        ReplySampler(renderer, ["look"], "look", rollout=seedless, group_id="g")
    keyed = keyed_rollout(seedless)
    assert keyed.sampling.seed == 0 and keyed_rollout(config(FullHistory())).sampling.seed == 7
    sampler = ReplySampler(renderer, ["look"], "look", rollout=keyed, group_id="g")
    stranger = SamplingParams(max_tokens=16, seed=12345)
    with pytest.raises(ValueError, match="no turn of the group"):
        asyncio.run(sampler.sample([1, 2, 3], 1, stranger))
