"""The calc server over stdio, started by the env group: schemas, calls and results, an erroring
tool, sessions per branch and per group, a server killed or crashing mid-episode, a slow tool
against the call timeout, and servers that do not start."""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import replace

import pytest

from agentrl.envs.mcp import McpEnvFactory, McpServer, McpSession, McpStartError, McpTools
from agentrl.tools import ToolInfraError, tool
from agentrl.types import ToolCall
from tests.envs.mcp.conftest import (
    SYSTEM,
    TASK,
    CalcEnv,
    SharedCalcEnv,
    calc_stdio,
    connect_calc,
    process_gone,
)

pytest.importorskip("mcp")


def names(tools: McpTools) -> list[str]:
    return [str(t["function"]["name"]) for t in tools.tools]  # type: ignore[index]


def test_connect_lists_the_server_tools_then_the_local_ones(calc_tools: McpTools) -> None:
    assert names(calc_tools) == [
        "add", "join", "point", "divide", "slow", "pid", "count", "crash", "submit"
    ]  # fmt: skip
    add = calc_tools.tools[0]["function"]
    assert add == {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    }
    assert calc_tools.instructions == "A calculator. Add numbers with `add`."
    assert calc_tools.local_tool("submit") is not None and calc_tools.remote_tool("submit") is None


async def test_branch_sessions_run_calls_errors_and_a_won_submit(calc_tools: McpTools) -> None:
    group = McpEnvFactory(calc_tools, CalcEnv)(TASK, 2)
    c = calc_tools.call
    try:
        first = await group.reset()
        assert first[0] == first[1] and first[0].observation == TASK.description
        assert len(group.sessions) == 2
        steps = await group.step([(c("add", a=17, b=25),), (c("divide", a=1, b=0),)])
        assert (steps[0].outputs, steps[0].admissible) == (("42",), True)
        assert steps[1].outputs == ("Error: Error executing tool divide: division by zero",)
        assert not steps[1].admissible and not steps[1].finished
        steps = await group.step(
            [(c("point", x=3), c("join", words=["a", "b"], sep="-")), (c("count"), c("pid"))]
        )
        assert steps[0].outputs == ('{\n  "x": 3,\n  "y": 6\n}', "a-b")
        assert steps[1].outputs[0] == "1"
        steps = await group.step([(c("count"), c("pid")), None])
        assert steps[0].outputs[0] == "1"  # each branch has its own server process
        pids = [int(steps[0].outputs[1]), int(steps[1].outputs[1])]
        assert pids[0] != pids[1]
        steps = await group.step([(c("submit", answer=42), c("add", a=1, b=1)), None])
        assert steps[0].won and steps[0].done and steps[0].score == 1.0
        assert steps[0].outputs == ("Correct.", "Skipped: the episode ended before this call.")
        again = await group.step([(c("add", a=1, b=1),), (c("submit", answer=41),)])
        assert again[0] == steps[0]  # a finished branch does not move
        assert again[1].done and not again[1].won
    finally:
        await group.close()
    await group.close()  # idempotent
    assert all(process_gone(pid) for pid in pids)  # close() stopped what reset() started
    with pytest.raises(RuntimeError, match="closed"):
        await group.step([None, None])


async def test_a_crash_mid_call_ends_only_that_branch(calc_tools: McpTools) -> None:
    group = McpEnvFactory(calc_tools, CalcEnv)(TASK, 2)
    c = calc_tools.call
    try:
        await group.reset()
        steps = await group.step([(c("crash"), c("add", a=1, b=2)), (c("add", a=1, b=2),)])
        crashed = steps[0]
        assert crashed.error is not None and crashed.finished and not crashed.won
        assert "MCP server 'calc' (command: " in crashed.error and "calc_server.py" in crashed.error
        assert "closed the connection while tool 'crash' ran" in crashed.error
        assert "calc server: crashing on purpose" in crashed.error  # its stderr is quoted
        assert crashed.outputs[1] == "Skipped: the MCP server failed before this call."
        assert steps[1].error is None and steps[1].outputs == ("3",)
        steps = await group.step([(c("add", a=1, b=1),), (c("submit", answer=42),)])
        assert steps[0].error == crashed.error  # the failed branch stays failed
        assert steps[1].won
    finally:
        await group.close()


async def test_a_shared_session_killed_ends_its_group_only(calc_tools: McpTools) -> None:
    factory = McpEnvFactory(calc_tools, SharedCalcEnv)
    killed, other = factory(TASK, 2), factory(TASK, 1)
    c = calc_tools.call
    try:
        await killed.reset()
        await other.reset()
        assert len(killed.sessions) == 1
        steps = await killed.step([(c("count"), c("pid")), (c("count"), c("pid"))])
        assert sorted(s.outputs[0] for s in steps) == ["1", "2"]  # one server, shared state
        pid = int(steps[0].outputs[1])
        assert int(steps[1].outputs[1]) == pid
        os.kill(pid, signal.SIGKILL)
        start = time.monotonic()
        steps = await killed.step([(c("add", a=1, b=2),), (c("add", a=2, b=2),)])
        assert time.monotonic() - start < 5
        assert all(s.error is not None and "closed the connection" in s.error for s in steps)
        (alive,) = await other.step([(c("add", a=2, b=3),)])
        assert alive.error is None and alive.outputs == ("5",)
    finally:
        await killed.close()
        await other.close()


async def test_a_slow_tool_hits_the_call_timeout(calc_tools: McpTools) -> None:
    tools = replace(calc_tools, server=calc_stdio(call_timeout=0.5))
    group = McpEnvFactory(tools, CalcEnv)(TASK, 1)
    try:
        await group.reset()
        start = time.monotonic()
        (step,) = await group.step([(tools.call("slow", seconds=30),)])
        assert time.monotonic() - start < 5
        assert step.error is not None and not step.won
        assert "tool 'slow' did not answer within 0.5 s (call_timeout)" in step.error
        assert group.sessions[0].alive  # a timeout is not a crash; the branch still ends
    finally:
        start = time.monotonic()
        await group.close()
    assert time.monotonic() - start < 15


async def test_a_server_that_does_not_start_is_named() -> None:
    with pytest.raises(McpStartError, match="command 'agentrl-no-such-server' was not found"):
        await McpSession.open(McpServer.stdio("agentrl-no-such-server", "--flag"))
    exits = McpServer.stdio(
        sys.executable, "-c", "import sys; sys.stderr.write('cannot bind\\n'); sys.exit(2)"
    )
    with pytest.raises(McpStartError) as failed:
        await McpSession.open(exits)
    text = str(failed.value)
    assert text.startswith(f"MCP server {exits.describe()} did not start: ")
    assert "server stderr: cannot bind" in text
    mute = McpServer.stdio(sys.executable, "-c", "import time; time.sleep(60)", connect_timeout=1)
    with pytest.raises(McpStartError, match=r"no handshake within 1 s \(connect_timeout\)"):
        await McpSession.open(mute)


async def test_a_group_whose_server_does_not_start_raises_on_reset(calc_tools: McpTools) -> None:
    missing = replace(calc_tools, server=McpServer.stdio("agentrl-no-such-server"))
    group = McpEnvFactory(missing, CalcEnv)(TASK, 2)
    with pytest.raises(McpStartError, match="agentrl-no-such-server"):
        await group.reset()
    await group.close()
    with pytest.raises(McpStartError, match="agentrl-no-such-server"):
        await connect_calc(McpServer.stdio("agentrl-no-such-server"))


async def test_a_step_before_reset_is_refused(calc_tools: McpTools) -> None:
    group = McpEnvFactory(calc_tools, CalcEnv)(TASK, 1)
    with pytest.raises(RuntimeError, match="before reset"):
        await group.step([(ToolCall("add", {}),)])
    await group.close()


class LedgerEnv(CalcEnv):
    """A local tool whose backing store goes away: the infrastructure's fault."""

    @tool
    def audit(self, account: int) -> str:
        """Audit an account.

        Args:
            account: The account number.
        """
        raise ToolInfraError(f"ledger store for {account} is down")


async def test_a_local_tool_infra_error_is_an_env_error() -> None:
    tools = await LedgerEnv.connect(calc_stdio(), system_prompt=SYSTEM)
    group = McpEnvFactory(tools, LedgerEnv)(TASK, 2)
    c = tools.call
    try:
        await group.reset()
        steps = await group.step([(c("audit", account=7),), (c("submit", answer="x"),)])
        assert steps[0].error is not None and steps[0].finished
        assert steps[0].error.startswith("ToolInfraError: ledger store for 7 is down (at ")
        assert steps[1].error is None and not steps[1].admissible  # a bad argument: the model's
    finally:
        await group.close()
