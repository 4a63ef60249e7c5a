"""Judge and group rewards: exact scores from scripted judges, failures as `reward_error`
(excluded from advantages, counted), retries, the cache, the ranking judge, an
OpenAI-compatible endpoint over real HTTP, and the tiny local model as a judge in training."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentrl.algo.advantages import advantages_of, score_groups
from agentrl.algo.metrics import episode_stats, eval_summaries, update_metrics
from agentrl.algo.rewards import GroupReward, RewardOutcome, apply_reward
from agentrl.chat import ChatRenderer
from agentrl.config.plugins import make_estimator
from agentrl.core.types import Message, StopReason, Trajectory, TrajectoryGroup
from agentrl.envs.toy import make_toy_group, toy_tasks, toy_tool_protocol
from agentrl.judges import (
    Judge,
    JudgeModelError,
    OpenAIJudgeModel,
    RankingJudge,
    SamplerJudgeModel,
    parse_ranking,
    parse_score,
)
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.store.records import TrajectoryRecord
from agentrl.testing import PolicySampler, ScriptedSampler
from tests.helpers.trainer_helpers import tiny_backend, toy_config, toy_trainer

PROTOCOL = toy_tool_protocol()
TASK = toy_tasks(1, seed=0)[0]  # key 1 on shelf 1, target bin 1
WIN = ["go to shelf 1", "take key 1 from shelf 1", "go to bin 1", "move key 1 to bin 1"]
LOSE = ["go to bin 1", "look", "look", "look"]
PARTIAL = ["look", "go to shelf 1", "take key 1 from shelf 1", "look"]
CONFIG = RolloutConfig(group_size=3, max_env_steps=4, retry_backoff=0.0)


def call(action: str) -> str:
    return PROTOCOL.call_text(action)


class ScriptedJudge:
    """A judge model answering from the question's text (a `JudgeModel`)."""

    def __init__(self, answer: Callable[[str, int], str]) -> None:
        self.answer = answer
        self.calls = 0

    async def reply(self, messages: Any) -> str:
        self.calls += 1
        return self.answer(messages[-1].content, self.calls)


def by_outcome(text: str, _n: int) -> str:
    won = "the environment reported success" in text
    return f"The agent {'finished' if won else 'wandered'}.\nSCORE: {8 if won else 2}"


async def play(renderer: ChatRenderer, tok: Any, reward: Any) -> TrajectoryGroup:
    scripts = [[call(a) for a in script] for script in (WIN, LOSE, PARTIAL)]
    sampler = ScriptedSampler(tok, scripts)
    return await rollout_group(
        TASK,
        env_factory=make_toy_group,
        sampler=sampler,
        renderer=renderer,
        protocol=PROTOCOL,
        config=CONFIG,
        reward_fn=reward,
    )


@pytest.fixture(scope="module")
def renderer(qwen_tokenizer: Any) -> ChatRenderer:
    return ChatRenderer(qwen_tokenizer, PROTOCOL.tools)


def test_score_and_ranking_parsers() -> None:
    assert parse_score("fine\nSCORE: 7", 10) == 0.7
    assert parse_score("SCORE: 3 then SCORE: **9**", 10) == 0.9  # the last line counts
    assert parse_score("no number here", 10) == "no 'SCORE: X' line"
    assert parse_score("SCORE: 11", 10) == "score 11 is outside [0, 10]"
    assert parse_ranking("TRAJECTORY 2: SCORE 0.1\nTRAJECTORY 1: SCORE 0.9", 2) == (0.9, 0.1)
    assert parse_ranking("TRAJECTORY 1: SCORE 0.9", 2) == "no score for trajectory 2"
    assert "twice" in str(parse_ranking("TRAJECTORY 1: SCORE 1\nTRAJECTORY 1: SCORE 0", 1))
    assert "outside" in str(parse_ranking("TRAJECTORY 1: SCORE 1.5", 1))
    assert "does not exist" in str(parse_ranking("TRAJECTORY 3: SCORE 1", 2))
    with pytest.raises(ValueError, match="reward or an error"):
        RewardOutcome(None)


async def test_a_scripted_judge_gives_exact_rewards_and_keeps_its_reply(
    renderer: ChatRenderer, qwen_tokenizer: Any
) -> None:
    judge_tokenizer_sampler = PolicySampler(qwen_tokenizer, lambda text: by_outcome(text, 0))
    judge = Judge(SamplerJudgeModel(judge_tokenizer_sampler, qwen_tokenizer))
    assert isinstance(judge, GroupReward)
    group = await play(renderer, qwen_tokenizer, judge)
    won, lost, partial = group.trajectories
    assert won.won and not lost.won and not partial.won
    assert [t.reward for t in group.trajectories] == pytest.approx([0.8, 0.2, 0.2])
    assert all(t.reward_error is None for t in group.trajectories)
    assert won.reward_detail is not None and won.reward_detail.endswith("SCORE: 8")
    # the judge saw the task and the tool results, not the system prompt
    (asked,) = {c.prompt for c in judge_tokenizer_sampler.calls[:1]}
    text = qwen_tokenizer.decode(asked)
    assert "TASK:" in text and "TOOL (toy_step)" in text and PROTOCOL.system_prompt not in text
    # a record keeps the reply
    record = TrajectoryRecord.from_json(TrajectoryRecord.from_trajectory(won).to_json())
    assert record.reward_detail == won.reward_detail
    assert record.to_trajectory().reward_detail == won.reward_detail


async def test_a_failed_judgement_is_a_reward_error_left_out_of_the_group(
    renderer: ChatRenderer, qwen_tokenizer: Any
) -> None:
    def answer(text: str, n: int) -> str:
        # the partial branch (it took the key, did not win) always gets nonsense
        if "take key 1" in text and "reported success" not in text:
            return "I refuse to score this."
        return by_outcome(text, n)

    model = ScriptedJudge(answer)
    group = await play(renderer, qwen_tokenizer, Judge(model, attempts=2))
    won, lost, partial = group.trajectories
    assert partial.reward_error is not None and "after 2 attempts" in partial.reward_error
    assert "no 'SCORE: X' line" in partial.reward_error and partial.reward == 0.0
    assert won.reward == pytest.approx(0.8) and lost.reward == pytest.approx(0.2)
    assert model.calls == 4  # one each for two branches, two for the failing one
    (scored,) = score_groups(make_estimator("group_mean"), [group])
    per_turn = scored.advantages.per_turn
    assert set(per_turn[2]) == {0.0}  # the failed judgement: no advantage
    assert per_turn[0][0] == pytest.approx(0.3) and per_turn[1][0] == pytest.approx(-0.3)
    stats = episode_stats(group.trajectories)
    assert stats.reward_errors == 1 and stats.reward_mean == pytest.approx(0.5)
    metrics = update_metrics(1, [group], advantages_of([scored]))
    assert metrics.stats.reward_errors == 1 and metrics.trained_trajectories == 2
    # an eval summary read back from records counts it too
    records = [TrajectoryRecord.from_trajectory(t) for t in group.trajectories]
    back = [TrajectoryRecord.from_json(r.to_json()).to_trajectory() for r in records]
    assert eval_summaries(back)[-1].stats.reward_errors == 1


async def test_retries_and_the_cache(renderer: ChatRenderer, qwen_tokenizer: Any) -> None:
    model = ScriptedJudge(lambda text, n: "hmm" if n == 1 else by_outcome(text, n))
    judge = Judge(model, attempts=3)
    group = await play(renderer, qwen_tokenizer, judge)
    assert all(t.reward_error is None for t in group.trajectories)
    first = model.calls
    assert first == 4  # the first call failed, was retried; the other two branches once each
    again = await apply_reward(judge, group.trajectories)
    assert model.calls == first  # the same contents are not judged twice
    assert [t.reward for t in again] == [t.reward for t in group.trajectories]

    def broken(text: str, n: int) -> str:
        raise ConnectionError("judge down")

    failing = Judge(ScriptedJudge(broken), attempts=2)
    (outcome,) = await failing.score_group(group.trajectories[:1])
    assert outcome.reward is None and "ConnectionError: judge down" in str(outcome.error)


async def test_the_ranking_judge_scores_branches_relative_to_each_other(
    renderer: ChatRenderer, qwen_tokenizer: Any
) -> None:
    def rank(text: str, n: int) -> str:
        parts = text.split("=== TRAJECTORY ")[1:]
        lines = [
            f"TRAJECTORY {i}: SCORE {1.0 if 'reported success' in p else 0.25}"
            for i, p in enumerate(parts, start=1)
        ]
        return "Compared.\n" + "\n".join(lines)

    model = ScriptedJudge(rank)
    group = await play(renderer, qwen_tokenizer, RankingJudge(model))
    assert [t.reward for t in group.trajectories] == [1.0, 0.25, 0.25]
    assert model.calls == 1  # one judgement for the whole group
    assert group.trajectories[1].reward_detail is not None
    assert group.trajectories[1].reward_detail.startswith("TRAJECTORY 2 of 3.")

    broken = ScriptedJudge(lambda text, n: "TRAJECTORY 1: SCORE 0.5")
    group = await play(renderer, qwen_tokenizer, RankingJudge(broken, attempts=2))
    assert all("no score for trajectory 2, 3" in str(t.reward_error) for t in group.trajectories)
    assert broken.calls == 2


async def test_error_trajectories_are_not_judged(qwen_tokenizer: Any) -> None:
    model = ScriptedJudge(by_outcome)
    broken = Trajectory(
        turns=(), stop_reason=StopReason.ENV_ERROR, won=False, group_id="g", task=TASK
    )
    (outcome,) = await Judge(model).score_group([broken])
    assert outcome == RewardOutcome(0.0) and model.calls == 0


class _Completions(BaseHTTPRequestHandler):
    """A loopback OpenAI-compatible endpoint: a score from the asked text, or HTTP 500."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/v1/chat/completions" and body["model"] == "judge-model"
        text = body["messages"][-1]["content"]
        if "fail" in self.headers.get("Authorization", ""):
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "overloaded"}}')
            return
        reply = {"choices": [{"message": {"role": "assistant", "content": by_outcome(text, 0)}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


async def test_an_openai_compatible_endpoint_as_judge(
    endpoint: str, renderer: ChatRenderer, qwen_tokenizer: Any
) -> None:
    judge = Judge(OpenAIJudgeModel(endpoint, "judge-model", api_key="k"))
    group = await play(renderer, qwen_tokenizer, judge)
    assert [t.reward for t in group.trajectories] == pytest.approx([0.8, 0.2, 0.2])
    failing = OpenAIJudgeModel(endpoint, "judge-model", api_key="fail")
    with pytest.raises(JudgeModelError, match=r"HTTP 500.*overloaded"):
        await failing.reply([Message(role="user", content="x")])
    group = await play(renderer, qwen_tokenizer, Judge(failing, attempts=1))
    assert all("HTTP 500" in str(t.reward_error) for t in group.trajectories)
    dead = OpenAIJudgeModel("http://127.0.0.1:9/v1", "judge-model", timeout=5)
    with pytest.raises(JudgeModelError, match="could not be reached"):
        await dead.reply([Message(role="user", content="x")])


async def test_training_with_judges_on_the_tiny_model(tmp_path: Path, qwen_tokenizer: Any) -> None:
    """A scripted judge trains like any reward; the tiny local model as judge (it writes no
    score line) turns every judged trajectory into a counted reward error and trains nothing."""
    config = toy_config(tmp_path / "scripted", max_steps=1)
    by_length = ScriptedJudge(lambda text, n: f"SCORE: {len(text) % 10}")  # rewards that differ
    trainer = toy_trainer(config, qwen_tokenizer, reward_fn=Judge(by_length))
    (metrics,) = (await trainer.run()).metrics
    assert metrics.stats.reward_errors == 0 and metrics.trained_tokens > 0

    config = toy_config(tmp_path / "tiny-judge", max_steps=1)
    backend = tiny_backend(config, qwen_tokenizer)
    from agentrl.backends.base import SamplingParams

    judge_model = SamplerJudgeModel(
        await backend.sampler(), qwen_tokenizer, SamplingParams(max_tokens=8, seed=0)
    )
    trainer = toy_trainer(
        config, qwen_tokenizer, inner=backend, reward_fn=Judge(judge_model, attempts=1)
    )
    (metrics,) = (await trainer.run()).metrics
    judged = metrics.stats.episodes - metrics.stats.errors
    assert metrics.stats.reward_errors == judged > 0
    assert metrics.trained_trajectories == 0 and metrics.trained_tokens == 0


def test_records_without_the_new_fields_still_load() -> None:
    won = Trajectory(turns=(), stop_reason=StopReason.WON, won=True, group_id="g", task=TASK)
    body = json.loads(TrajectoryRecord.from_trajectory(won).to_json())
    del body["reward_error"], body["reward_detail"]
    record = TrajectoryRecord.model_validate(body)
    assert record.reward_error is None and replace(record.to_trajectory()).reward_detail is None
