"""The calc server over streamable HTTP on 127.0.0.1 (a process the test starts and kills):
schemas, calls, the env-group contract, a server killed mid-episode, a URL nothing answers."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace

import pytest

from agentrl.envs.mcp import McpEnvFactory, McpServer, McpStartError, McpTool, McpTools
from agentrl.testing import check_env_group
from agentrl.types import EnvAction, EnvStep, ToolCall
from tests.envs.mcp.conftest import (
    SYSTEM,
    TASK,
    CalcEnv,
    HttpServer,
    connect_calc,
    free_port,
    start_http_server,
)

pytest.importorskip("mcp")


async def test_connect_over_http_and_keep_some_tools(http_server: HttpServer) -> None:
    tools = await McpTools.connect(
        http_server.config(), system_prompt=SYSTEM, include=["divide", "add"]
    )
    assert [t["function"]["name"] for t in tools.tools] == ["divide", "add"]  # type: ignore[index]
    with pytest.raises(ValueError, match=r"has no tool \['subtract'\]; it lists: add, join"):
        await McpTools.connect(http_server.config(), system_prompt=SYSTEM, include=["subtract"])


async def test_calls_over_http_share_the_server_state(http_server: HttpServer) -> None:
    tools = await connect_calc(http_server.config())
    group = McpEnvFactory(tools, CalcEnv)(TASK, 2)
    c = tools.call
    try:
        await group.reset()
        steps = await group.step([(c("count"),), (c("divide", a=7, b=2),)])
        first = int(steps[0].outputs[0])
        assert steps[1].outputs == ("3.5",)
        steps = await group.step([(c("count"),), (c("divide", a=1, b=0),)])
        assert int(steps[0].outputs[0]) == first + 1
        assert steps[1].outputs[0].startswith("Error: ") and not steps[1].admissible
        steps = await group.step([(c("submit", answer=42),), (c("submit", answer=7),)])
        assert steps[0].won and steps[1].done and not steps[1].won
    finally:
        await group.close()


async def test_the_group_passes_the_env_contract_checker(http_server: HttpServer) -> None:
    tools = await connect_calc(http_server.config())

    def choose(step: EnvStep, rng: random.Random) -> EnvAction:
        if step.outputs and rng.random() < 0.3:
            return (tools.call("submit", answer=42),)
        return (tools.call("add", a=rng.randint(0, 9), b=1),)

    report = await check_env_group(
        lambda: McpEnvFactory(tools, CalcEnv)(TASK, 3),
        max_steps=6,
        choose_action=choose,
        invalid_action=(tools.call("divide", a=1, b=0),),
        probe_action=(tools.call("add", a=1, b=1),),
    )
    assert report.group_size == 3 and report.invalid_actions_tried > 0


async def test_a_killed_http_server_is_an_env_error_at_once() -> None:
    server = start_http_server()
    try:
        tools = await connect_calc(server.config())
        group = McpEnvFactory(tools, CalcEnv)(TASK, 2)
        await group.reset()
        (ok, _) = await group.step([(tools.call("add", a=1, b=2),), None])
        assert ok.outputs == ("3",)
        server.stop()
        start = time.monotonic()
        steps = await group.step([(tools.call("add", a=1, b=2),), (tools.call("pid"),)])
        assert time.monotonic() - start < 5
        for step in steps:
            assert step.error is not None and step.error.startswith(
                f"MCP server 'calc-http' (url: {server.url})"
            )
            assert not step.won and step.finished
        await group.close()
        await group.close()
    finally:
        server.stop()


async def test_a_url_nothing_answers_is_a_start_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(McpStartError, match=rf"MCP server '{url}' \(url: {url}\) did not start"):
        await connect_calc(McpServer.http(url, connect_timeout=10))


async def test_one_slow_call_does_not_hold_other_groups(http_server: HttpServer) -> None:
    tools = await connect_calc(http_server.config(call_timeout=1.0))
    factory = McpEnvFactory(tools, CalcEnv)
    slow, fast = factory(TASK, 1), factory(TASK, 1)
    try:
        await asyncio.gather(slow.reset(), fast.reset())
        start = time.monotonic()
        slow_step = asyncio.ensure_future(slow.step([(tools.call("slow", seconds=20),)]))
        (answer,) = await fast.step([(ToolCall("add", {"a": "2", "b": "2"}),)])
        assert answer.outputs == ("4",) and time.monotonic() - start < 1.0
        (timed_out,) = await slow_step
        assert timed_out.error is not None and "did not answer within 1 s" in timed_out.error
    finally:
        await slow.close()
        await fast.close()


async def test_a_session_without_a_tool_of_the_protocol_fails_reset(
    http_server: HttpServer,
) -> None:
    tools = await connect_calc(http_server.config())
    stale = replace(tools, remote=(*tools.remote, McpTool("vanished")))
    group = McpEnvFactory(stale, CalcEnv)(TASK, 2)
    with pytest.raises(McpStartError, match=r"no longer lists the tools \['vanished'\]"):
        await group.reset()
    assert group.sessions == ()  # the sessions it opened are closed again
    await group.close()
