"""The search environment's scripted baselines, played through the rollout engine like a model.

Both read only what a model sees: the prompt text (the question and the tool messages so far).

- `solver`: reads the question with the generated questions' templates, then follows the
  chain of relations: search the entity's name, find its document among the results (by
  title), read the relation's object from the text, search that, and so on; then answers. It
  measures the ceiling of the env and of BM25 (about 100% won). A question it cannot read (a
  user's own) gets one search of the whole question and the top result's title as the answer.
- `nosearch`: answers at once, without searching, with the entity the question names (what a
  model that cannot look facts up falls back to): about 0% won on invented entities.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agentrl.algo.rewards import RewardFn
from agentrl.chat import ChatRenderer
from agentrl.core.env import EnvGroupFactory
from agentrl.core.types import ToolCall
from agentrl.envs.search.env import RESULT_HEADER
from agentrl.envs.search.language import match_question, read_relation
from agentrl.rollout import PlayFn, RolloutConfig, model_player
from agentrl.testing import PolicySampler
from agentrl.tools import FunctionTools

__all__ = [
    "nosearch_player",
    "nosearch_reply",
    "solver_player",
    "solver_reply",
]

_QUESTION = re.compile(r"Question: (.+)")
_FIRST_TITLE = re.compile(r"^Result 1: (.+)$", re.MULTILINE)


def _question(prompt: str) -> str:
    match = _QUESTION.search(prompt)
    return match.group(1).strip() if match else ""


def _document(prompt: str, title: str) -> str | None:
    """The text of the last search result titled `title` in the prompt, if any."""
    found = re.findall(rf"^Result \d+: {re.escape(title)}\n(.*)$", prompt, re.MULTILINE)
    return found[-1] if found else None


def _searched(prompt: str, query: str) -> bool:
    return RESULT_HEADER.format(query=query) in prompt


def solver_reply(prompt: str) -> ToolCall:
    """The solver's next call for a prompt: a search for the next entity, or the answer."""
    question = _question(prompt)
    parsed = match_question(question)
    if parsed is None:
        if not _searched(prompt, question):
            return ToolCall("search", {"query": question})
        titles = _FIRST_TITLE.findall(prompt)
        return ToolCall("answer", {"text": titles[-1] if titles else "unknown"})
    template, entity = parsed
    for relation in template.chain:
        text = _document(prompt, entity)
        if text is None:
            if _searched(prompt, entity):
                break  # the index did not return the document: give up with what we have
            return ToolCall("search", {"query": entity})
        found = read_relation(relation, entity, text)
        if found is None:
            break
        entity = found
    return ToolCall("answer", {"text": entity})


def nosearch_reply(prompt: str) -> ToolCall:
    """The no-search baseline's call: answer at once with the entity the question names."""
    parsed = match_question(_question(prompt))
    return ToolCall("answer", {"text": parsed[1] if parsed else "unknown"})


def _player(
    reply: Callable[[str], ToolCall],
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: FunctionTools,
    rollout: RolloutConfig,
    reward_fn: RewardFn,
) -> PlayFn:
    def policy(prompt: str) -> str:
        return protocol.call_text(reply(prompt), dialect=renderer.dialect)

    return model_player(
        env_factory=env_factory,
        sampler=PolicySampler(renderer.tokenizer, policy),
        renderer=renderer,
        protocol=protocol,
        rollout=rollout,
        reward_fn=reward_fn,
    )


def solver_player(
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: FunctionTools,
    rollout: RolloutConfig,
    reward_fn: RewardFn,
) -> PlayFn:
    """Search questions played by the solver baseline through the rollout engine."""
    return _player(
        solver_reply, env_factory=env_factory, renderer=renderer, protocol=protocol,
        rollout=rollout, reward_fn=reward_fn,
    )  # fmt: skip


def nosearch_player(
    *,
    env_factory: EnvGroupFactory,
    renderer: ChatRenderer,
    protocol: FunctionTools,
    rollout: RolloutConfig,
    reward_fn: RewardFn,
) -> PlayFn:
    """Search questions played by the no-search baseline through the rollout engine."""
    return _player(
        nosearch_reply, env_factory=env_factory, renderer=renderer, protocol=protocol,
        rollout=rollout, reward_fn=reward_fn,
    )  # fmt: skip
