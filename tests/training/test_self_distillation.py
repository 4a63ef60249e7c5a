"""On-policy self-distillation: the live model, shown the task's solution, scores the
student's own continuation; the scores land on the student's positions."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from agentrl.algo.datums import trajectory_to_datums
from agentrl.algo.distillation import datum_tokens
from agentrl.envs.toy.fetch import fetch_solution
from agentrl.training.self_distillation import PrivilegedTeacher


async def _fetch_trajectory() -> tuple[Any, Any, Any]:
    from agentrl.recipes.fetch import SMOKE, fetch_learning_env
    from agentrl.recipes.learning_env import play, random_valid_policy
    from agentrl.recipes.tokenizer import fetch_tokenizer
    from agentrl.testing import KeyedPolicySampler

    env, tokenizer = fetch_learning_env(SMOKE), fetch_tokenizer(SMOKE)
    policy = KeyedPolicySampler(tokenizer, random_valid_policy(env.protocol))
    (group,) = await play(policy, tokenizer, env, env.train_tasks[:1], 1, seed=0)
    return env, tokenizer, group.trajectories[0]


async def test_the_teacher_scores_the_continuation_after_the_privileged_prompt() -> None:
    from agentrl.backends.local import LocalBackend

    env, tokenizer, trajectory = await _fetch_trajectory()
    assert len(trajectory.turns) == 2  # take, then put
    (datum,) = trajectory_to_datums(trajectory, [1.0, 1.0])
    tokens = datum_tokens(datum)
    backend = LocalBackend.tiny(tokenizer, seed=0, device="cpu")
    teacher = PrivilegedTeacher(backend.sampler, env.renderer(tokenizer), lambda t: None)
    solution = fetch_solution(trajectory.task)
    assert solution.startswith("The solution: take ") and " in " in solution
    privileged = teacher.privileged_prompt(trajectory, solution)
    text = tokenizer.decode(privileged)
    assert solution in text and trajectory.task.description in text
    prompt = len(trajectory.turns[0].prompt_tokens)
    assert tokenizer.decode(tokens[:prompt]) + "\n\n" + solution != text  # a real re-render
    plain = await teacher.score(trajectory, tokens)  # no context: the tokens as they are
    assert plain == await (await backend.sampler()).compute_logprobs(tokens)
    teacher.context = lambda t: fetch_solution(t.task)
    scores = await teacher.score(trajectory, tokens)
    assert len(scores) == len(tokens) and scores[:prompt] == [None] * prompt
    rest = tokens[prompt:]
    with torch.no_grad():  # the model's own forward pass over privileged prompt + continuation
        ids = torch.tensor([[*privileged, *rest]])
        logits = backend.engine.model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    for j, token in enumerate(rest):
        direct = float(logp[len(privileged) + j - 1, token])
        assert scores[prompt + j] == pytest.approx(direct, abs=1e-4)
    assert scores[prompt:] != plain[prompt:]  # the context changes what the model expects


def _run(*argv: str) -> tuple[int, str]:
    from agentrl.cli.app import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main(list(argv))
    return status, out.getvalue()


SMALL = ["--base-model", "tiny", "--device", "cpu", "--max-steps", "1", "--group-size", "2"]
SMALL += ["--max-assistant-tokens", "12", "--max-episode-steps", "2", "--objective", "opsd"]


def test_train_objective_opsd_on_toy_fetch(tmp_path: Path) -> None:
    status, out = _run("train", "--env", "toy-fetch", *SMALL, "--run-dir", str(tmp_path / "r"))
    assert status == 0, out
    assert "objective opsd: the model shown env toy-fetch's privileged context" in out
    record = json.loads((tmp_path / "r" / "metrics.jsonl").read_text().splitlines()[-1])
    assert record["backend"]["distill/teacher_logprob"] < 0.0
    status, out = _run("train", "--env", "toy", *SMALL, "--run-dir", str(tmp_path / "t"))
    assert status == 1 and "env toy offers no privileged context" in out
