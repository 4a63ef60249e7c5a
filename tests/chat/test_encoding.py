"""Cheap delta encoding: the line cache gives exactly the tokenizer's tokens on real ALFWorld
messages, the boundary check catches a delta that merges with the closing text, and prompts
stored as offsets build the same datums as tuple prompts."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrl.chat import ChatRenderer, ChatTemplateError
from agentrl.chat.encoding import LineEncoder, VerifyMode
from agentrl.datums import trajectory_to_datums
from agentrl.envs.alfworld.group import AlfworldEnvGroup
from agentrl.envs.alfworld.pool import EnvWorkerPool
from agentrl.envs.alfworld.tools import alfworld_tool_protocol
from agentrl.envs.toy import make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler
from agentrl.tokens import TokenBuffer, TokenPrefix
from agentrl.tools import ToolResult
from agentrl.types import Message, ParsedAction, TurnStatus

PROTOCOL = alfworld_tool_protocol()

# Qwen-like, but a tool message starts with "\n": it merges with the closing "\n" ("\n\n").
MERGING_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'tool' -%}{{- '\\n<|im_start|>user\\n' + m.content + '<|im_end|>\\n' -}}"
    "{%- else -%}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


async def _real_messages(games: Any, turns: int = 12) -> list[Message]:
    """Tool messages of random admissible (and some invalid) actions on generated games."""
    rng = random.Random(0)
    messages: list[Message] = []
    pool = EnvWorkerPool(1)  # one worker process for all games
    for game in games.games[:3]:
        group = AlfworldEnvGroup(game.to_task(), 1, None, pool)
        try:
            (step,) = await group.reset()
            for turn in range(1, turns + 1):
                action = rng.choice([*step.admissible_actions, "dance"])
                (after,) = await group.step([action])
                status = TurnStatus.EXECUTED if after.admissible else TurnStatus.NOT_ADMISSIBLE
                result = ToolResult(status, after, ParsedAction(action=action), turn, 50)
                messages.append(PROTOCOL.tool_message(result))
                step = after
                if after.finished:
                    break
        finally:
            await group.close()
    await pool.close()
    return messages


async def test_cheap_deltas_equal_full_deltas_on_real_messages(
    qwen_tokenizer: Any, alfworld_games: Any
) -> None:
    messages = await _real_messages(alfworld_games)
    assert len(messages) > 20
    reference = ChatRenderer(qwen_tokenizer, PROTOCOL.tools, verify="full", line_cache=False)
    cheap = ChatRenderer(qwen_tokenizer, PROTOCOL.tools)
    checked = ChatRenderer(qwen_tokenizer, PROTOCOL.tools, verify="full")  # cache, full check
    lines = LineEncoder(lambda text: qwen_tokenizer.encode(text, add_special_tokens=False))
    assert cheap._lines.enabled and lines.enabled
    for _ in range(2):  # the second round is served from the line cache
        for message in messages:
            expected = reference.tool_message_tokens(message)
            assert cheap.tool_message_tokens(message) == expected
            assert checked.tool_message_tokens(message) == expected
            plain = qwen_tokenizer.encode(message.content, add_special_tokens=False)
            assert lines.encode(message.content) == plain
    # the Qwen delta starts with <|im_start|>: checked once, no boundary encode per turn
    assert cheap._boundary.boundary_encodes == 0


_ALPHABET = st.sampled_from(list("ab Z09.,:'-_()[]{}<>/\\!?\t\r\n\u00e9\u4f60"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(_ALPHABET, max_size=12), max_size=12))
def test_line_encoder_equals_plain_encode(qwen_tokenizer: Any, lines: list[str]) -> None:
    encode = lambda text: qwen_tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    encoder = LineEncoder(encode)
    text = "\n".join(lines)
    assert encoder.encode(text) == encode(text)
    assert encoder.encode(text) == encode(text)  # cached


def test_boundary_check_catches_a_merging_delta(qwen_tokenizer: Any) -> None:
    message = Message(role="tool", content="You see a desk 1.", name="alfworld_step")
    for verify in (True, "full"):
        renderer = ChatRenderer(
            qwen_tokenizer, chat_template=MERGING_TEMPLATE, dialect="qwen_xml", verify=verify
        )
        assert renderer.verify in (VerifyMode.BOUNDARY, VerifyMode.FULL)
        with pytest.raises(ChatTemplateError, match="merge"):
            renderer.tool_message_tokens(message)
    unchecked = ChatRenderer(
        qwen_tokenizer, chat_template=MERGING_TEMPLATE, dialect="qwen_xml", verify=False
    )
    unchecked.tool_message_tokens(message)  # no check: wrong tokens, silently


def test_token_prefix_reads_like_a_tuple() -> None:
    buffer = TokenBuffer([5, 6, 7])
    first = buffer.prefix()
    buffer.extend([8, 9])
    second = buffer.prefix()
    reflected = (5, 6, 7).__eq__(first) is NotImplemented and first.__eq__((5, 6, 7))
    assert first == (5, 6, 7) and reflected and len(first) == 3
    assert first[-1] == 7 and first[1:] == (6, 7) and list(second) == [5, 6, 7, 8, 9]
    one = (1,)
    assert first.__add__(one) == (5, 6, 7, 1) and first.__radd__(one) == (1, 5, 6, 7)
    assert first.is_prefix_of(second) and not second.is_prefix_of(first)
    assert second.as_array().tolist() == [5, 6, 7, 8, 9] and hash(first) == hash((5, 6, 7))
    with pytest.raises(IndexError):
        first[3]


async def test_offset_datums_equal_tuple_datums(qwen_tokenizer: Any) -> None:
    protocol = toy_tool_protocol()
    renderer = ChatRenderer(qwen_tokenizer, protocol.tools)
    plan = [
        "go to shelf 1",
        "take key 1 from shelf 1",
        "look",
        "go to bin 1",
        "move key 1 to bin 1",
    ]
    script = [protocol.call_text(a) for a in plan]
    sampler = ScriptedSampler(qwen_tokenizer, [script, ["no call", *script]])
    group = await rollout_group(
        toy_tasks(1, seed=0)[0],
        env_factory=make_toy_group,
        sampler=sampler,
        renderer=renderer,
        protocol=protocol,
        config=RolloutConfig(group_size=2, retry_backoff=0.0),
    )
    for trajectory in group.trajectories:
        assert all(isinstance(t.prompt_tokens, TokenPrefix) for t in trajectory.turns)
        buffers = {id(t.prompt_tokens.buffer) for t in trajectory.turns}  # type: ignore[union-attr]
        assert len(buffers) == 1  # stored once
        as_tuples = replace(
            trajectory,
            turns=tuple(replace(t, prompt_tokens=tuple(t.prompt_tokens)) for t in trajectory.turns),
        )
        advantages = [0.5 - 0.1 * i for i in range(len(trajectory.turns))]
        new = trajectory_to_datums(trajectory, advantages)
        old = trajectory_to_datums(as_tuples, advantages)
        assert len(new) == len(old) == 1
        for a, b in zip(new, old, strict=True):
            for name in ("model_input", "target_tokens", "logprobs", "advantages", "mask"):
                assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert as_tuples.turns == trajectory.turns  # equal records either way
