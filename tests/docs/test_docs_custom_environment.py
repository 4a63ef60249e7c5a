"""docs/custom-environment.md: its complete example runs, stays about 40 lines, and its
env-checker snippet passes on the example's environment."""

from __future__ import annotations

import re

import pytest

from tests.helpers.doc_examples import doc_example, run_example
from tests.helpers.paths import DOCS

DOC = DOCS / "custom-environment.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_complete_example_runs_and_wins(qwen_tokenizer: object) -> None:
    code = doc_example(DOC, "guess")
    body = [line for line in code.splitlines() if line.strip()]
    assert 35 <= len(body) <= 60, len(body)
    namespace: dict[str, object] = {"__name__": "docs_example"}
    printed = run_example(code, DOC, namespace)
    assert printed.startswith("won [")
    messages = namespace["trajectory"].turns[0].tool_messages  # type: ignore[attr-defined]
    assert len(messages) == 2 and messages[0].content.startswith("Higher.")

    checker = next(b for b in blocks() if "check_env_group(" in b)
    exec(compile(checker, str(DOC), "exec"), namespace)


def test_the_schema_the_doc_describes() -> None:
    pytest.importorskip("pydantic")
    from agentrl import FunctionEnv, TaskInfo, tool

    class Env(FunctionEnv):
        def __init__(self, task: TaskInfo) -> None:
            self.task = task

        @tool
        def guess(self, number: int) -> str:
            """Guess the number.

            Args:
                number: Your guess, from 1 to 100.
            """
            return str(number)

    (schema,) = Env.protocol("p").tools
    function = schema["function"]
    assert isinstance(function, dict)
    assert function["description"] == "Guess the number."
    assert function["parameters"] == {
        "type": "object",
        "additionalProperties": False,
        "properties": {"number": {"type": "integer", "description": "Your guess, from 1 to 100."}},
        "required": ["number"],
    }
