"""The search env through the real rollout engine: the env checker, scripted turns (search,
answer, invalid calls, the search limit, F1 credit) and the two baselines on valid_unseen."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from agentrl.chat import ChatRenderer
from agentrl.core.types import EnvAction, EnvStep, StopReason, TaskInfo, ToolCall, TrajectoryGroup
from agentrl.envs.search import (
    AnswerMetric,
    SearchFactory,
    SearchOptions,
    SearchReward,
    corpus_index,
    generated_data,
    nosearch_player,
    search_tool_protocol,
    solver_player,
)
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler, check_env_group


def _factory(options: SearchOptions | None = None) -> SearchFactory:
    data = generated_data(0)
    return SearchFactory(data.by_task_id(), corpus_index(data.corpus), options or SearchOptions())


def _task(index: int = 0) -> TaskInfo:
    return generated_data(0).tasks("valid_unseen", index + 1)[index]


def test_env_checker_passes_on_the_search_group() -> None:
    task = _task()
    answer = generated_data(0).split("valid_unseen")[0].answers[0]

    def choose(step: EnvStep, rng: random.Random) -> EnvAction:
        if step.outputs and rng.random() < 0.3:
            return (ToolCall("answer", {"text": answer}),)
        return (ToolCall("search", {"query": rng.choice(["founder", "city", task.description])}),)

    report = asyncio.run(
        check_env_group(
            lambda: _factory()(task, 3),
            max_steps=8,
            choose_action=choose,
            invalid_action=(ToolCall("search", {"query": "x", "k": "5"}),),
            probe_action=(ToolCall("answer", {"text": answer}),),
        )
    )
    assert report.group_size == 3 and report.invalid_actions_tried > 0


def _play(tokenizer: Any, scripts: list[list[str]], factory: SearchFactory) -> TrajectoryGroup:
    protocol = search_tool_protocol()
    return asyncio.run(
        rollout_group(
            _task(),
            env_factory=factory,
            sampler=ScriptedSampler(tokenizer, scripts),
            renderer=ChatRenderer(tokenizer, protocol.tools),
            protocol=protocol,
            config=RolloutConfig(group_size=len(scripts), max_env_steps=6, retry_backoff=0.0),
            reward_fn=SearchReward(),
        )
    )


def test_scripted_turns_search_answer_invalid_and_limit(qwen_tokenizer: Any) -> None:
    protocol = search_tool_protocol()
    question = generated_data(0).split("valid_unseen")[0]
    subject = generated_data(0).corpus.documents
    title = next(d.title for d in subject if d.id == question.support[0])
    search = protocol.call_text(ToolCall("search", {"query": title}))
    right = protocol.call_text(ToolCall("answer", {"text": f"the {question.answers[0]}."}))
    wrong = protocol.call_text(ToolCall("answer", {"text": "Paris"}))
    bad = protocol.call_text(ToolCall("search", {"q": title}))
    limited = SearchOptions(max_searches=1)
    group = _play(
        qwen_tokenizer, [[search, right], [bad, wrong], [search, search, wrong]], _factory(limited)
    )
    won, lost, capped = group.trajectories
    assert won.won and won.stop_reason is StopReason.WON and won.reward == pytest.approx(1.0)
    message = won.turns[0].tool_message
    assert message is not None and message.content.startswith(f'Search results for "{title}":')
    assert f"Result 1: {title}\n" in message.content
    assert not lost.won and lost.reward == pytest.approx(-0.1) and lost.turns[0].invalid
    assert capped.turns[1].tool_message is not None
    assert "Search limit reached" in capped.turns[1].tool_message.content
    assert won.turns[0].state_key == capped.turns[0].state_key  # same start, same key
    assert won.turns[1].state_key == capped.turns[1].state_key != won.turns[0].state_key


def test_f1_metric_gives_partial_credit(qwen_tokenizer: Any) -> None:
    protocol = search_tool_protocol()
    question = next(q for q in generated_data(0).split("valid_unseen") if q.type == "founder")
    index = generated_data(0).split("valid_unseen").index(question)
    task = _task(index)
    surname = question.answers[0].split()[-1]
    partial = protocol.call_text(ToolCall("answer", {"text": surname}))
    for metric, reward in ((AnswerMetric.EM, 0.0), (AnswerMetric.F1, 2 / 3)):
        group = asyncio.run(
            rollout_group(
                task,
                env_factory=_factory(SearchOptions(metric=metric)),
                sampler=ScriptedSampler(qwen_tokenizer, [[partial]]),
                renderer=ChatRenderer(qwen_tokenizer, protocol.tools),
                protocol=protocol,
                config=RolloutConfig(group_size=1, max_env_steps=3, retry_backoff=0.0),
                reward_fn=SearchReward(),
            )
        )
        (trajectory,) = group.trajectories
        assert not trajectory.won and trajectory.reward == pytest.approx(reward)


async def _success(player: Any, tasks: list[TaskInfo]) -> float:
    groups = await asyncio.gather(*(player(t) for t in tasks))
    return float(sum(g.trajectories[0].won for g in groups) / len(groups))


def test_solver_wins_and_nosearch_loses_valid_unseen(qwen_tokenizer: Any) -> None:
    protocol = search_tool_protocol()
    tasks = generated_data(0).tasks("valid_unseen")
    assert len(tasks) == 100
    kwargs: dict[str, Any] = {
        "env_factory": _factory(),
        "renderer": ChatRenderer(qwen_tokenizer, protocol.tools),
        "protocol": protocol,
        "rollout": RolloutConfig(group_size=1, max_env_steps=8, retry_backoff=0.0),
        "reward_fn": SearchReward(),
    }
    assert asyncio.run(_success(solver_player(**kwargs), tasks)) >= 0.95
    assert asyncio.run(_success(nosearch_player(**kwargs), tasks)) <= 0.05
