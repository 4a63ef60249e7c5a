"""The gateway over HTTP: bad input gets OpenAI-style errors with the right status (raw HTTP),
64 concurrent sessions of the async `openai` client keep their trajectories apart, retries and
dropped streams lose nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from agentrl.backends.base import SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.core.types import Completion
from agentrl.gateway import GatewayServer, GatewayThread
from agentrl.rollout import RolloutConfig
from agentrl.testing import PolicySampler
from tests.gateway.helpers import (
    PROTOCOL,
    TARGET,
    add_reply,
    first_messages,
    gateway_for,
    play_async,
    tools,
)

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")


class SlowSampler:
    """A policy sampler that takes `delay` seconds per request."""

    def __init__(self, inner: PolicySampler, delay: float) -> None:
        self.inner, self.delay = inner, delay

    async def sample(
        self, prompt_tokens: Sequence[int], num_samples: int, params: SamplingParams
    ) -> list[Completion]:
        await asyncio.sleep(self.delay)
        return await self.inner.sample(prompt_tokens, num_samples, params)


def _sampler(tokenizer: Any) -> PolicySampler:
    reply = add_reply(ChatRenderer(tokenizer, PROTOCOL.tools))
    return PolicySampler(tokenizer, lambda prompt: reply)


def _body(**extra: Any) -> dict[str, Any]:
    return {"model": "agentrl", "messages": first_messages(), "tools": tools(), **extra}


def _error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    return error


def test_bad_input_gets_status_and_body(qwen_tokenizer: Any) -> None:
    small = RolloutConfig(group_size=1, max_trajectory_tokens=300, max_assistant_tokens=32)
    gateway = gateway_for(qwen_tokenizer, sampler=_sampler(qwen_tokenizer), config=small)
    with GatewayThread(gateway) as server:
        server.call(_open(gateway, "a"))
        url = server.session_url("a") + "/chat/completions"
        with httpx.Client(timeout=30) as http:
            _error(http.post(url, content=b"{not json"), 400, "invalid_json")
            error = _error(http.post(url, json=_body(temprature=0.5)), 400, "unknown_field")
            assert error["param"] == "temprature"
            _error(http.post(url, json={"messages": []}), 400, "invalid_value")
            error = _error(http.post(url, json=_body(top_logprobs=3)), 422, "unsupported_parameter")
            assert error["param"] == "top_logprobs"
            error = _error(
                http.post(url, json=_body(stop=["total 9"])), 422, "unsupported_parameter"
            )
            assert error["param"] == "stop"
            missing = server.session_url("nobody") + "/chat/completions"
            _error(http.post(missing, json=_body()), 404, "unknown_session")
            keyed = server.base_url + "/v1/chat/completions"
            _error(http.post(keyed, json=_body()), 404, "unknown_session")
            _error(http.get(server.base_url + "/v2/nothing"), 404, "not_found")
            ok = http.post(url, json=_body())
            assert ok.status_code == 200, ok.text
            other = _body()
            other["messages"][1]["content"] = "A different task."
            _error(http.post(url, json=other), 409, "conversation_mismatch")
            # the session's budget (300 tokens) cannot hold a long history
            long = _body()
            long["messages"][1]["content"] = first_messages()[1]["content"]
            reply = ok.json()["choices"][0]["message"]
            long["messages"] += [
                reply,
                {
                    "role": "tool",
                    "tool_call_id": reply["tool_calls"][0]["id"],
                    "content": "x " * 400,
                },
            ]
            error = _error(http.post(url, json=long), 413, "context_length_exceeded")
            _error(http.post(url, json=long), 409, "session_finished")
            stats = http.get(server.base_url + "/stats").json()
        counted = stats["errors"]
        for code in ("invalid_json", "unknown_field", "unsupported_parameter", "unknown_session"):
            assert counted[code] >= 1, code
        assert counted["unsupported_parameter"] == 2 and counted["unknown_session"] == 2
        trajectory = server.call(_end(gateway, "a"))
    assert trajectory.stop_reason.value == "token_budget"
    assert len(trajectory.turns) == 1


async def _open(gateway: Any, session_id: str) -> None:
    gateway.open_session(session_id)


async def _end(gateway: Any, session_id: str) -> Any:
    return gateway.end_session(session_id)


async def test_concurrent_calls_of_one_session_are_refused(qwen_tokenizer: Any) -> None:
    slow = SlowSampler(_sampler(qwen_tokenizer), delay=0.5)
    gateway = gateway_for(qwen_tokenizer, sampler=slow)
    async with GatewayServer(gateway) as server:
        gateway.open_session("s")
        gateway.open_session("t")
        url = server.session_url("s") + "/chat/completions"
        async with httpx.AsyncClient(timeout=30) as http:
            first, second, elsewhere = await asyncio.gather(
                http.post(url, json=_body()),
                _later(http.post(url, json=_body())),
                _later(http.post(server.session_url("t") + "/chat/completions", json=_body())),
            )
    assert first.status_code == 200
    _error(second, 409, "session_busy")
    assert elsewhere.status_code == 200  # another session is not held up
    assert gateway.stats.errors["session_busy"] == 1


async def _later(call: Any) -> Any:
    await asyncio.sleep(0.1)
    return await call


async def test_64_concurrent_sessions_keep_their_trajectories_apart(qwen_tokenizer: Any) -> None:
    gateway = gateway_for(qwen_tokenizer, sampler=_sampler(qwen_tokenizer))
    async with GatewayServer(gateway) as server:

        async def episode(i: int) -> Any:
            session = gateway.open_session(f"ep{i}")
            messages = first_messages()
            messages[1]["content"] += f"\nEpisode marker {i:02d}."
            client = openai.AsyncOpenAI(base_url=server.session_url(f"ep{i}"), api_key="x")
            async with client:
                played = await play_async(client, messages)
            return played, gateway.end_session(session.session_id, won=played.total >= TARGET)

        results = await asyncio.gather(*(episode(i) for i in range(64)))
    for i, (played, trajectory) in enumerate(results):
        assert played.total == TARGET and trajectory.won
        assert len(trajectory.turns) == TARGET and not any(t.new_segment for t in trajectory.turns)
        text = qwen_tokenizer.decode(list(trajectory.full_tokens))
        markers = {m for m in range(64) if f"Episode marker {m:02d}." in text}
        assert markers == {i}
        for before, after in zip(trajectory.turns, trajectory.turns[1:], strict=False):
            extended = tuple(before.prompt_tokens) + before.completion_tokens
            assert tuple(after.prompt_tokens[: len(extended)]) == extended
    assert gateway.stats.calls == 64 * TARGET and not gateway.stats.errors


def test_a_retry_replaces_the_unreceived_reply(qwen_tokenizer: Any) -> None:
    gateway = gateway_for(qwen_tokenizer, sampler=_sampler(qwen_tokenizer))
    with GatewayThread(gateway) as server:
        server.call(_open(gateway, "r"))
        url = server.session_url("r") + "/chat/completions"
        with httpx.Client(timeout=30) as http:
            with http.stream("POST", url, json=_body(stream=True)) as response:
                assert response.status_code == 200
                next(response.iter_lines())  # the client goes away after the first event
            again = http.post(url, json=_body())
            assert again.status_code == 200
            reply = again.json()["choices"][0]["message"]
            follow = _body()
            follow["messages"] += [
                reply,
                {"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"], "content": "ok"},
            ]
            assert http.post(url, json=follow).status_code == 200
        session = gateway.sessions["r"]
        assert session.counts.discarded_choices == 1
        trajectory = server.call(_end(gateway, "r"))
    assert len(trajectory.turns) == 2 and not trajectory.turns[1].new_segment


def test_streamed_chunks_follow_openai(qwen_tokenizer: Any) -> None:
    gateway = gateway_for(qwen_tokenizer, sampler=_sampler(qwen_tokenizer))
    with GatewayThread(gateway) as server:
        server.call(_open(gateway, "c"))
        url = server.session_url("c") + "/chat/completions"
        body = _body(stream=True, stream_options={"include_usage": True}, logprobs=True)
        with httpx.Client(timeout=30) as http:
            lines = [x for x in http.post(url, json=body).text.splitlines() if x]
            models = http.get(server.session_url("c") + "/models").json()
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(x.removeprefix("data: ")) for x in lines[:-1]]
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    finish = [e for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert [e["choices"][0]["finish_reason"] for e in finish] == ["tool_calls"]
    assert finish[0]["choices"][0]["logprobs"]["content"]
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 0
    calls = [
        c for e in events if e["choices"] for c in e["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"amount": 1}]
    assert models["data"][0]["id"] == "agentrl"
