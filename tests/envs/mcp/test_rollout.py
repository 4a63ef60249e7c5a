"""End to end through agentrl's rollout engine: a scripted sampler, the real Qwen tokenizer and
chat renderer, and the calc server over stdio; tool messages come from the server, `submit`
decides the win, a crashing server is `env_error`; and the example of docs/mcp.md runs."""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentrl.chat import ChatRenderer
from agentrl.envs.mcp import McpEnvFactory, McpServer, McpTools
from agentrl.rollout import RolloutConfig, rollout_group
from agentrl.testing import ScriptedSampler
from agentrl.types import ParseErrorKind, StopReason, TurnStatus
from tests.envs.mcp.conftest import TASK, CalcEnv
from tests.helpers.paths import DOCS

pytest.importorskip("mcp")

CONFIG = RolloutConfig(group_size=3, max_env_steps=6, retry_backoff=0.0)


async def test_rollout_with_server_tools_wins_fails_and_records_a_crash(
    qwen_tokenizer: Any, calc_tools: McpTools
) -> None:
    c, text = calc_tools.call, calc_tools.call_text
    scripts = [
        ["I will add first.\n" + text(c("add", a=17, b=25)), text(c("submit", answer=42))],
        [
            text(c("divide", a=1, b=0)),
            text(c("add", a="seventeen", b=25)),
            text(c("submit", answer=41)),
        ],
        [text(c("crash"))],
    ]
    renderer = ChatRenderer(qwen_tokenizer, calc_tools.tools)
    sampler = ScriptedSampler(qwen_tokenizer, scripts)
    group = await rollout_group(
        TASK,
        env_factory=McpEnvFactory(calc_tools, CalcEnv),
        sampler=sampler,
        renderer=renderer,
        protocol=calc_tools,
        config=CONFIG,
    )
    assert sampler.violations == []
    won, lost, crashed = group.trajectories

    assert won.stop_reason is StopReason.WON and won.won and won.reward == 1.0
    first = won.turns[0]
    assert first.status is TurnStatus.EXECUTED and first.tool_message is not None
    assert first.tool_message.name == "add"
    assert first.tool_message.content == "42\n[step 1 of 6]"  # the server's answer
    assert [m.role for m in won.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert "What is 17 + 25?" in won.messages[1].content
    prompt = qwen_tokenizer.decode(list(won.turns[-1].prompt_tokens))
    assert '"name": "add"' in prompt and '"name": "submit"' in prompt  # schemas in the prompt
    assert renderer.render(won.messages[:-1], add_generation_prompt=True) == list(
        won.turns[-1].prompt_tokens
    )

    assert lost.stop_reason is StopReason.ENV_DONE and not lost.won
    assert [t.status for t in lost.turns] == [
        TurnStatus.NOT_ADMISSIBLE,
        TurnStatus.INVALID_FORMAT,
        TurnStatus.ENDED,
    ]
    error = lost.turns[0].tool_message
    assert error is not None and error.content.startswith("Error: ")
    assert "division by zero" in error.content
    bad = lost.turns[1].parsed.error
    assert bad is not None and bad.kind is ParseErrorKind.INVALID_ARGUMENTS
    assert bad.detail == "add: a: 'seventeen' is not of type 'integer'"
    assert lost.reward == pytest.approx(-0.2)

    assert crashed.stop_reason is StopReason.ENV_ERROR and not crashed.won
    assert crashed.error is not None and "closed the connection while tool 'crash' ran" in (
        crashed.error
    )
    assert crashed.reward <= 0.0


async def test_rollout_whose_server_does_not_start_is_env_error(
    qwen_tokenizer: Any, calc_tools: McpTools
) -> None:
    missing = replace(calc_tools, server=McpServer.stdio("agentrl-no-such-server"))
    group = await rollout_group(
        TASK,
        env_factory=McpEnvFactory(missing, CalcEnv),
        sampler=ScriptedSampler(qwen_tokenizer, [["unused"]] * 2),
        renderer=ChatRenderer(qwen_tokenizer, missing.tools),
        protocol=missing,
        config=replace(CONFIG, group_size=2),
    )
    for trajectory in group.trajectories:
        assert trajectory.stop_reason is StopReason.ENV_ERROR and not trajectory.won
        assert trajectory.error is not None
        assert "command 'agentrl-no-such-server' was not found" in trajectory.error


def test_the_docs_example_runs_and_prints_what_the_page_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("dashscope")
    page = (DOCS / "mcp.md").read_text(encoding="utf-8")
    server_code, example = re.findall(r"```python\n(.*?)```", page, re.DOTALL)[:2]
    printed = re.search(r"It prints\n\n```\n(.*?)```", page, re.DOTALL)
    assert printed is not None
    (tmp_path / "calc_server.py").write_text(server_code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, "docs/mcp.md", "exec"), {"__name__": "docs_example"})
    assert out.getvalue() == printed.group(1)
