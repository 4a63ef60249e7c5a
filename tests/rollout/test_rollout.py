"""The rollout engine on the toy environment with scripted samplers and the real Qwen tokenizer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.chat.history import ExtensionMode
from agentrl.core.env import EnvAction, EnvGroupWrapper
from agentrl.core.seeds import derive_seed
from agentrl.datums import trajectory_to_datum, trajectory_to_datums
from agentrl.envs.toy import ToyEnvGroup, make_toy_group, toy_task, toy_tasks, toy_tool_protocol
from agentrl.rollout import RolloutConfig, rollout_batch, rollout_group
from agentrl.testing import PolicySampler, ScriptedSampler, ScriptItem, synthetic_logprobs
from agentrl.types import (
    Completion,
    CompletionStop,
    CutReply,
    EnvStep,
    ParseErrorKind,
    StepCounting,
    StopReason,
    TaskInfo,
    Trajectory,
    TrajectoryGroup,
    TurnStatus,
)
from tests.helpers.paths import SHARED

PROTOCOL = toy_tool_protocol()
TASK = toy_tasks(1, seed=0)[0]  # key 1 on shelf 1, target bin 1, start at drawer 1
GAME = toy_task(0)
WIN = ["go to shelf 1", "take key 1 from shelf 1", "go to bin 1", "move key 1 to bin 1"]
FAST = RolloutConfig(group_size=1, retry_backoff=0.0)


def call(action: str) -> str:
    return PROTOCOL.call_text(action)


@pytest.fixture(scope="module")
def renderer(qwen_tokenizer: Any) -> ChatRenderer:
    return ChatRenderer(qwen_tokenizer, PROTOCOL.tools)


async def play(
    tok: Any,
    renderer: ChatRenderer,
    scripts: Sequence[Sequence[ScriptItem]],
    config: RolloutConfig,
    **kwargs: Any,
) -> tuple[TrajectoryGroup, ScriptedSampler]:
    sampler = ScriptedSampler(tok, scripts, prefix_cache=kwargs.pop("prefix_cache", False))
    group = await rollout_group(
        TASK,
        env_factory=kwargs.pop("env_factory", make_toy_group),
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=config,
        **kwargs,
    )
    assert sampler.violations == []
    return group, sampler


def check_tokens(trajectory: Trajectory, renderer: ChatRenderer) -> None:
    """Prefix property, logprob alignment and agreement with a full render."""
    full = trajectory.full_tokens
    for turn in trajectory.turns:
        n = len(turn.prompt_tokens)
        assert full[:n] == turn.prompt_tokens
        assert full[n : n + len(turn.completion_tokens)] == turn.completion_tokens
        assert turn.logprobs == synthetic_logprobs(turn.completion_tokens, n)
    datum = trajectory_to_datum(trajectory, [1.0] * len(trajectory.turns))
    assert datum.num_assistant_tokens == trajectory.tokens.completion
    rendered = renderer.render(trajectory.messages[:-1], add_generation_prompt=True)
    assert rendered == list(trajectory.turns[-1].prompt_tokens)


async def test_group_turn1_is_one_request_and_branches_follow_their_scripts(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    scripts: list[list[ScriptItem]] = [
        [call(a) for a in WIN],
        ["I will look around.", call("GO TO  Shelf 1"), call("fly away"), *map(call, WIN[1:])],
        ["Shelf first.\n" + call(WIN[0]), call(WIN[1]), call("drop key 1")],
        [call("look") + call("look"), call("look") + " trailing", *map(call, WIN)],
    ]
    config = RolloutConfig(group_size=4, retry_backoff=0.0)
    group, sampler = await play(qwen_tokenizer, renderer, scripts, config)

    assert sampler.calls[0].num_samples == 4
    assert [c.num_samples for c in sampler.calls[1:]] == [1] * (len(sampler.calls) - 1)
    assert len(sampler.calls) == sum(len(s) for s in scripts) - 3
    won, slow, dropped, sloppy = group.trajectories
    assert [t.branch for t in group.trajectories] == [0, 1, 2, 3]
    assert (won.stop_reason, won.won, won.invalid_actions, won.reward) == (
        StopReason.WON,
        True,
        0,
        1.0,
    )
    assert [t.status for t in slow.turns] == [
        TurnStatus.INVALID_FORMAT,
        TurnStatus.EXECUTED,
        TurnStatus.NOT_ADMISSIBLE,
        TurnStatus.EXECUTED,
        TurnStatus.EXECUTED,
        TurnStatus.WON,
    ]
    assert slow.turns[0].parsed.error is not None
    assert slow.turns[0].parsed.error.kind is ParseErrorKind.NO_CALL
    assert slow.turns[0].env_step is None and slow.turns[1].parsed.action == "go to shelf 1"
    assert slow.invalid_actions == 2 and slow.reward == pytest.approx(0.8)
    assert slow.env_steps == 5
    assert (
        dropped.stop_reason is StopReason.ENV_DONE and dropped.turns[-1].status is TurnStatus.ENDED
    )
    assert dropped.reward == 0.0
    kinds = [t.parsed.error.kind for t in sloppy.turns[:2] if t.parsed.error is not None]
    assert kinds == [ParseErrorKind.MULTIPLE_CALLS, ParseErrorKind.TEXT_AFTER_CALL]
    assert sloppy.won and sloppy.reward == pytest.approx(0.8)
    for trajectory in group.trajectories:
        check_tokens(trajectory, renderer)
        assert trajectory.turns[0].prompt_tokens == sampler.calls[0].prompt
        assert trajectory.turns[-1].tool_message is None
        assert all(t.tool_message is not None for t in trajectory.turns[:-1])
        assert trajectory.tokens.total == len(trajectory.full_tokens)
        assert trajectory.tokens.prompt == len(trajectory.turns[-1].prompt_tokens)
        assert trajectory.tokens.prefill == sum(len(t.prompt_tokens) for t in trajectory.turns)
        roles = [m.role for m in trajectory.messages]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"


async def test_tool_messages_and_state_keys(qwen_tokenizer: Any, renderer: ChatRenderer) -> None:
    group, _ = await play(qwen_tokenizer, renderer, [["oops", *map(call, WIN)]], FAST)
    (trajectory,) = group.trajectories
    env = ToyEnvGroup(TASK, 1)
    (initial,) = await env.reset()
    keys = [t.state_key for t in trajectory.turns]
    assert keys[0] == keys[1] == initial.state_key  # the invalid turn did not move the state
    for turn, nxt in zip(trajectory.turns[1:], trajectory.turns[2:], strict=False):
        assert turn.env_step is not None and nxt.state_key == turn.env_step.state_key
    first_tool = trajectory.turns[0].tool_message
    assert first_tool is not None and "invalid tool-call format" in first_tool.content
    assert "Step 1 of 50." in first_tool.content  # an invalid reply uses a step too
    second = trajectory.turns[1].tool_message
    assert second is not None and "Step 2 of 50." in second.content
    assert "On the shelf 1, you see a key 1." in second.content


async def test_max_env_steps_counting_env_calls(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    config = RolloutConfig(
        group_size=1, max_env_steps=3, retry_backoff=0.0, step_counting=StepCounting.ENV_CALLS
    )
    group, _ = await play(
        qwen_tokenizer, renderer, [["bad", call("look"), "bad", call("look"), call("look")]], config
    )
    (trajectory,) = group.trajectories
    assert trajectory.stop_reason is StopReason.MAX_STEPS
    assert trajectory.env_steps == 3 and len(trajectory.turns) == 5


async def test_assistant_token_limit(qwen_tokenizer: Any, renderer: ChatRenderer) -> None:
    config = RolloutConfig(
        group_size=1, max_assistant_tokens=30, retry_backoff=0.0, cut_reply=CutReply.END
    )
    rambling = "Let me think about this very carefully. " * 20 + call("look")
    group, sampler = await play(qwen_tokenizer, renderer, [[call("look"), rambling]], config)
    (trajectory,) = group.trajectories
    assert trajectory.stop_reason is StopReason.ASSISTANT_TOKEN_LIMIT and trajectory.truncated
    last = trajectory.turns[-1]
    assert len(last.completion_tokens) == 30 and last.status is TurnStatus.INVALID_FORMAT
    assert last.parsed.error is not None and last.parsed.error.kind is ParseErrorKind.TRUNCATED
    assert trajectory.invalid_actions == 1
    assert all(c.params.max_tokens == 30 for c in sampler.calls)
    check_tokens(trajectory, renderer)


@pytest.mark.parametrize("room", [5, 60])
async def test_token_budget_is_never_exceeded(
    qwen_tokenizer: Any, renderer: ChatRenderer, room: int
) -> None:
    messages = PROTOCOL.initial_messages(TASK, (await ToyEnvGroup(TASK, 1).reset())[0], 50)
    first = len(renderer.initial_prompt(messages))
    budget = first + 60 + room
    config = RolloutConfig(group_size=1, max_trajectory_tokens=budget, retry_backoff=0.0)
    long_reply = "Thinking. " * 40 + call("look")
    group, sampler = await play(
        qwen_tokenizer, renderer, [[call("look"), long_reply, call("look")]], config
    )
    (trajectory,) = group.trajectories
    assert trajectory.stop_reason is StopReason.TOKEN_BUDGET
    for c in sampler.calls:
        assert len(c.prompt) < budget and len(c.prompt) + c.params.max_tokens <= budget
    assert trajectory.tokens.total <= budget
    check_tokens(trajectory, renderer)


async def test_prompt_longer_than_budget_is_never_sent(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    config = RolloutConfig(group_size=2, max_trajectory_tokens=50)
    group, sampler = await play(qwen_tokenizer, renderer, [[], []], config)
    assert sampler.calls == []
    assert {t.stop_reason for t in group.trajectories} == {StopReason.TOKEN_BUDGET}


async def test_sampler_errors_are_retried_then_recorded(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    boom = RuntimeError("service unavailable")
    scripts: list[list[ScriptItem]] = [
        [call(WIN[0]), boom, boom, *map(call, WIN[1:])],
        [call(WIN[0]), boom, boom, boom, boom],
    ]
    config = RolloutConfig(group_size=2, sampler_retries=3, retry_backoff=0.001)
    group, _ = await play(qwen_tokenizer, renderer, scripts, config)
    recovered, failed = group.trajectories
    assert recovered.stop_reason is StopReason.WON
    assert failed.stop_reason is StopReason.SAMPLER_ERROR and failed.stop_reason.is_error
    assert failed.error is not None and "service unavailable" in failed.error
    assert len(failed.turns) == 1


async def test_first_request_failing_fails_the_whole_group(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    config = RolloutConfig(group_size=2, sampler_retries=1, retry_backoff=0.0)
    boom = RuntimeError("down")
    group, sampler = await play(qwen_tokenizer, renderer, [[boom, boom], [call("look")]], config)
    assert len(sampler.calls) == 2
    assert all(
        t.stop_reason is StopReason.SAMPLER_ERROR and not t.turns for t in group.trajectories
    )


class FlakyToy(EnvGroupWrapper):
    """A real toy group whose branch `bad` fails at its `at`-th step (fault injection)."""

    def __init__(
        self, task: TaskInfo, size: int, bad: int = 1, at: int = 2, raise_on_reset: bool = False
    ) -> None:
        super().__init__(ToyEnvGroup(task, size))
        self.bad, self.at, self.raise_on_reset = bad, at, raise_on_reset
        self.calls = 0
        self.closed = False

    async def reset(self) -> list[EnvStep]:
        if self.raise_on_reset:
            raise OSError("worker died")
        return await self.inner.reset()

    async def step(self, actions: Sequence[EnvAction | None]) -> list[EnvStep]:
        steps = await self.inner.step(actions)
        if actions[self.bad] is not None:
            self.calls += 1
            if self.calls >= self.at:
                steps[self.bad] = EnvStep(observation="", error="step timed out after 60s")
        return steps

    async def close(self) -> None:
        self.closed = True
        await self.inner.close()


async def test_env_errors_end_only_their_branch(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    envs: list[FlakyToy] = []

    def factory(task: TaskInfo, size: int) -> FlakyToy:
        envs.append(FlakyToy(task, size))
        return envs[-1]

    config = RolloutConfig(group_size=2, retry_backoff=0.0)
    scripts = [[call(a) for a in WIN]] * 2
    group, _ = await play(qwen_tokenizer, renderer, scripts, config, env_factory=factory)
    ok, broken = group.trajectories
    assert ok.stop_reason is StopReason.WON
    assert broken.stop_reason is StopReason.ENV_ERROR and broken.error == "step timed out after 60s"
    assert len(broken.turns) == 2 and envs[0].closed


async def test_reset_failure_records_env_error(qwen_tokenizer: Any, renderer: ChatRenderer) -> None:
    def factory(task: TaskInfo, size: int) -> FlakyToy:
        return FlakyToy(task, size, raise_on_reset=True)

    config = RolloutConfig(group_size=3)
    group, sampler = await play(qwen_tokenizer, renderer, [[], [], []], config, env_factory=factory)
    assert sampler.calls == []
    assert all(t.stop_reason is StopReason.ENV_ERROR for t in group.trajectories)
    assert group.trajectories[0].error is not None and "worker died" in group.trajectories[0].error


async def test_prefill_reported_by_the_sampler(qwen_tokenizer: Any, renderer: ChatRenderer) -> None:
    scripts = [[f"Branch {i}.\n" + call(a) for a in WIN] for i in range(3)]
    config = RolloutConfig(group_size=3, retry_backoff=0.0)
    group, sampler = await play(qwen_tokenizer, renderer, scripts, config, prefix_cache=True)
    first = len(sampler.calls[0].prompt)
    for trajectory in group.trajectories:
        prompts = sum(len(t.prompt_tokens) for t in trajectory.turns)
        new_per_turn = sum(
            len(b.prompt_tokens) - len(a.prompt_tokens) - len(a.completion_tokens)
            for a, b in zip(trajectory.turns, trajectory.turns[1:], strict=False)
        )
        shared = first if trajectory.branch == 0 else 0
        assert trajectory.tokens.prefill == shared + new_per_turn < prompts


async def test_custom_reward_and_sampling_params(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    class StepsReward:
        def __call__(self, trajectory: Trajectory) -> float:
            return float(-len(trajectory.turns))

        def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
            return (-1.0,) * len(trajectory.turns)

    config = RolloutConfig(group_size=1, sampling=SamplingParams(temperature=0.5, seed=7))
    group, sampler = await play(
        qwen_tokenizer, renderer, [[call(a) for a in WIN]], config, reward_fn=StepsReward()
    )
    assert group.trajectories[0].reward == -4.0
    params = sampler.calls[0].params
    assert (params.temperature, params.stop_tokens) == (0.5, renderer.stop_tokens)
    # the base seed keys each request: (group, "first"), then (group, branch, turn)
    gid = group.group_id
    assert params.seed == derive_seed(7, gid, "first")
    assert [c.params.seed for c in sampler.calls[1:]] == [
        derive_seed(7, gid, 0, turn) for turn in range(1, len(sampler.calls))
    ]


async def test_pretokenized_completion_is_kept_verbatim(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    # A non-canonical tokenization of "look" sampled by a model must be trained on as sampled.
    odd = Completion(
        tokens=(75, 1941, 151645), logprobs=(-0.5, -0.25, -0.125), stop_reason=CompletionStop.STOP
    )
    group, _ = await play(
        qwen_tokenizer,
        renderer,
        [[odd, call("look")]],
        RolloutConfig(group_size=1, max_env_steps=1),
    )
    turn = group.trajectories[0].turns[0]
    assert turn.completion_tokens == odd.tokens and turn.logprobs == odd.logprobs
    assert group.trajectories[0].full_tokens[len(turn.prompt_tokens) :][:3] == odd.tokens


def toy_policy(prompt: str) -> str:
    """Solve toy games from the prompt text alone (last listed actions)."""
    tail = prompt.rsplit("Available actions (copy one exactly):\n", 1)[1]
    actions = tail.split("<|im_end|>")[0].split("</tool_response>")[0].strip().splitlines()
    task = prompt.split("put the ", 1)[1].split(".", 1)[0]
    obj, target = task.split(" in the ")
    for action in actions:
        if action == f"move {obj} to {target}":
            return call(action)
    for action in actions:
        if action.startswith("take "):
            return call(action)
    if f"drop {obj}" in actions:
        return call(f"go to {target}")
    unvisited = [
        a
        for a in actions
        if a.startswith("go to ")
        and not a.endswith(target)
        and f"You arrive at {a[6:]}." not in prompt
    ]
    return call(unvisited[0])


async def test_rollout_batch_concurrent_and_ordered(
    qwen_tokenizer: Any, renderer: ChatRenderer
) -> None:
    in_flight = 0
    peak = 0

    class Slow(PolicySampler):
        async def sample(
            self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
        ) -> list[Completion]:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.001)
            try:
                return await super().sample(prompt_tokens, num_samples, params)
            finally:
                in_flight -= 1

    sampler = Slow(qwen_tokenizer, toy_policy)
    tasks = toy_tasks(6, seed=10)
    seen: list[str] = []
    groups = await rollout_batch(
        tasks,
        env_factory=make_toy_group,
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=RolloutConfig(group_size=3),
        max_concurrent_groups=2,
        on_group=lambda g: seen.append(g.group_id),
    )
    assert [g.task for g in groups] == tasks
    assert sorted(seen) == sorted(g.group_id for g in groups) and len(set(seen)) == 6
    assert all(t.won for g in groups for t in g.trajectories)
    assert 3 <= peak <= 6  # branches sample concurrently, at most 2 groups x 3 branches
    first_calls = [c for c in sampler.calls if c.num_samples == 3]
    assert len(first_calls) == 6


class StepLimitedToy(ToyEnvGroup):
    """The toy env with a step limit reported the way the ALFWorld group reports it."""

    async def step(self, actions: Sequence[str | None]) -> list[EnvStep]:
        steps = await super().step(actions)
        return [replace(s, info={"truncated": True}) if s.done and not s.won else s for s in steps]


async def test_env_step_limit_is_max_steps(qwen_tokenizer: Any, renderer: ChatRenderer) -> None:
    def factory(task: TaskInfo, size: int) -> StepLimitedToy:
        return StepLimitedToy(task, size, max_steps=2)

    config = RolloutConfig(group_size=1)
    group, _ = await play(
        qwen_tokenizer, renderer, [[call("look"), call("look")]], config, env_factory=factory
    )
    (trajectory,) = group.trajectories
    assert trajectory.stop_reason is StopReason.MAX_STEPS
    assert trajectory.turns[-1].status is TurnStatus.ENDED


class CountingTokenizer:
    """The real tokenizer, counting `len()` calls (costly in tokenizers 0.22) and template
    renders."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.len_calls = 0
        self.renders = 0

    def __len__(self) -> int:
        self.len_calls += 1
        return len(self.inner)

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
        self.renders += 1
        return self.inner.apply_chat_template(conversation, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def counted_groups(
    tok: Any, counting: CountingTokenizer, renderer: ChatRenderer, scripts: Any
) -> list[tuple[TrajectoryGroup, int, int]]:
    """Two groups on one renderer, each with the renders and `len()` calls it cost."""
    out = []
    for _ in range(2):
        renders, lens = counting.renders, counting.len_calls
        group, _ = await play(tok, renderer, scripts, replace(FAST, group_size=len(scripts)))
        out.append((group, counting.renders - renders, counting.len_calls - lens))
    return out


async def test_no_template_render_or_vocabulary_call_after_the_first_turn(
    qwen_tokenizer: Any,
) -> None:
    """The vocabulary size is read once per renderer (not per sampling request), and a turn
    after an episode's first prompt renders no template: a group on a renderer that has seen
    one tool message costs exactly its first prompt's render."""
    counting = CountingTokenizer(qwen_tokenizer)
    renderer = ChatRenderer(counting, PROTOCOL.tools)  # type: ignore[arg-type]
    (first, _, first_lens), (second, renders, lens) = await counted_groups(
        qwen_tokenizer, counting, renderer, [[call(a) for a in WIN]] * 2
    )
    for group in (first, second):
        assert sum(len(t.turns) for t in group.trajectories) == 8
        assert all(t.won for t in group.trajectories)
    assert first_lens + lens == 1
    assert renders == 1  # the group's first prompt; 8 turns, no render


async def test_qwen3_instruct_extends_by_tokens_in_one_segment(qwen_tokenizer: Any) -> None:
    """Qwen3's real template with thinking off: its generation prompt carries an empty think
    block that a re-render of history drops. That is a safe rewrite: the episode stays one
    segment, every trained token is a sampled token, no turn renders the template."""
    path = SHARED / "chat_templates" / "qwen3-0.6b.jinja"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    counting = CountingTokenizer(qwen_tokenizer)
    renderer = ChatRenderer(
        counting,  # type: ignore[arg-type]
        PROTOCOL.tools,
        chat_template=path.read_text(encoding="utf-8"),
        enable_thinking=False,
    )
    assert renderer.extension is ExtensionMode.SAFE_REWRITE
    assert renderer.dialect.name == "qwen_json"
    texts = [PROTOCOL.call_text(a, dialect=renderer.dialect) for a in WIN]
    results = await counted_groups(qwen_tokenizer, counting, renderer, [texts] * 3)
    first_prompt = qwen_tokenizer.decode(results[0][0].trajectories[0].turns[0].prompt_tokens)
    assert first_prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    for group, _, _ in results:
        for trajectory in group.trajectories:
            assert trajectory.won and len(trajectory.turns) == 4
            assert not any(turn.new_segment for turn in trajectory.turns)
            datums = trajectory_to_datums(trajectory, [1.0] * len(trajectory.turns))
            assert len(datums) == 1
            (datum,) = datums
            trained = [int(t) for t in datum.target_tokens[datum.mask == 1.0]]
            assert trained == [t for turn in trajectory.turns for t in turn.completion_tokens]
            assert np.allclose(
                datum.logprobs[datum.mask == 1.0],
                [lp for turn in trajectory.turns for lp in turn.logprobs],
            )
            full = trajectory.full_tokens
            for turn in trajectory.turns:
                n = len(turn.prompt_tokens)
                assert full[n : n + len(turn.completion_tokens)] == turn.completion_tokens
    assert results[1][1] == 1  # the second group: its first prompt only
