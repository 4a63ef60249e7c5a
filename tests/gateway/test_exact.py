"""The gateway's trajectories are the rollout engine's, token for token, with the real `openai`
client and the real Qwen tokenizer and chat template; an edited history starts a new segment
whose trained tokens are still sampled tokens."""

from __future__ import annotations

from typing import Any

import pytest

from agentrl.algo.datums import trajectory_to_datums
from agentrl.chat import ChatRenderer
from agentrl.gateway import GatewayThread
from agentrl.rollout import rollout_group
from agentrl.testing import PolicySampler, ScriptedSampler
from agentrl.testing.recording import same_datums
from agentrl.tools import function_env_factory
from tests.gateway.helpers import (
    CONFIG,
    PROTOCOL,
    TARGET,
    TASK,
    Counter,
    add_reply,
    gateway_for,
    play_sync,
    trained_tokens_are_sampled,
)

openai = pytest.importorskip("openai")


def _rollout_trajectory(tokenizer: Any) -> Any:
    renderer = ChatRenderer(tokenizer, PROTOCOL.tools)
    sampler = ScriptedSampler(tokenizer, [[add_reply(renderer)] * TARGET])
    group = rollout_group(
        TASK,
        env_factory=function_env_factory(Counter),
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=CONFIG,
    )
    return group


def _gateway_trajectory(tokenizer: Any, *, stream: bool = False, drop_at: int | None = None) -> Any:
    renderer = ChatRenderer(tokenizer, PROTOCOL.tools)
    reply = add_reply(renderer)
    sampler: Any = ScriptedSampler(tokenizer, [[reply] * TARGET])
    if drop_at is not None:  # a scripted sampler refuses a prompt that is not an extension
        sampler = PolicySampler(tokenizer, lambda prompt: reply)
    gateway = gateway_for(tokenizer, sampler=sampler)
    with GatewayThread(gateway) as server:
        session = gateway.open_session("episode-1", task=TASK)
        client = openai.OpenAI(base_url=server.session_url(session.session_id), api_key="unused")
        played = play_sync(client, drop_at=drop_at, stream=stream)
        trajectory = server.call(_end(gateway, session.session_id, played.total >= TARGET))
    return played, trajectory, sampler


async def _end(gateway: Any, session_id: str, won: bool) -> Any:
    return gateway.end_session(session_id, won=won)


async def test_six_turn_episode_matches_the_rollout_engine(qwen_tokenizer: Any) -> None:
    group = await _rollout_trajectory(qwen_tokenizer)
    (expected,) = group.trajectories
    assert expected.won and len(expected.turns) == TARGET
    played, got, sampler = _gateway_trajectory(qwen_tokenizer)
    assert not sampler.violations
    assert played.total == TARGET and played.calls == TARGET
    assert got.won and len(got.turns) == TARGET
    assert not any(t.new_segment for t in got.turns)
    advantages = [1.0] * TARGET
    ours = trajectory_to_datums(got, advantages)
    theirs = trajectory_to_datums(expected, advantages)
    assert len(ours) == 1
    assert same_datums(ours, theirs)
    for mine, reference in zip(got.turns, expected.turns, strict=True):
        assert tuple(mine.prompt_tokens) == tuple(reference.prompt_tokens)
        assert mine.completion_tokens == reference.completion_tokens
        assert mine.logprobs == reference.logprobs
        assert mine.parsed.calls == reference.parsed.calls


async def test_streaming_gives_the_same_tokens(qwen_tokenizer: Any) -> None:
    _, plain, _ = _gateway_trajectory(qwen_tokenizer)
    played, streamed, sampler = _gateway_trajectory(qwen_tokenizer, stream=True)
    assert not sampler.violations and played.total == TARGET
    advantages = [1.0] * len(plain.turns)
    assert same_datums(
        trajectory_to_datums(plain, advantages), trajectory_to_datums(streamed, advantages)
    )


async def test_a_dropped_message_starts_a_second_segment(qwen_tokenizer: Any) -> None:
    played, got, _ = _gateway_trajectory(qwen_tokenizer, drop_at=3)
    assert played.total == TARGET
    starts = [i for i, t in enumerate(got.turns) if t.new_segment]
    assert starts == [2]
    assert "messages[3]" in (got.turns[2].segment_reason or "")
    datums = trajectory_to_datums(got, [1.0] * len(got.turns))
    assert len(datums) == 2
    first, second = got.turns[:2], got.turns[2:]
    for segment, datum in ((first, datums[0]), (second, datums[1])):
        full = [*datum.model_input, datum.target_tokens[-1]]
        assert trained_tokens_are_sampled(segment, full)
        sampled = [tok for t in segment for tok in t.completion_tokens]
        masked = [int(tok) for tok, m in zip(datum.target_tokens, datum.mask, strict=True) if m]
        assert masked == sampled
        logprobs = [lp for t in segment for lp in t.logprobs]
        kept = [float(lp) for lp, m in zip(datum.logprobs, datum.mask, strict=True) if m]
        assert kept == pytest.approx(logprobs, abs=1e-6)
    # the second segment's prompt is the history the agent sent: the dropped result is gone
    text = qwen_tokenizer.decode(list(got.turns[2].prompt_tokens))
    assert "total 1\n" not in text and "total 2\n" in text
