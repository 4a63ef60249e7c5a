"""Tool-call dialects, one file per model family, and their detection from a chat template.

`dialect_for(name)` returns a dialect by its `--tool-dialect` name; `detect_dialect(template)`
the one whose signature the template text carries (most specific first), or raises
`DialectError` naming `--tool-dialect` and the known names.
"""

from __future__ import annotations

from agentrl.chat.dialects.base import DialectParse, Extracted, ToolCallDialect
from agentrl.chat.dialects.deepseek import DeepSeekDialect
from agentrl.chat.dialects.glm import GlmDialect
from agentrl.chat.dialects.harmony import HarmonyDialect
from agentrl.chat.dialects.kimi import KimiDialect
from agentrl.chat.dialects.llama import LlamaJsonDialect
from agentrl.chat.dialects.qwen import QwenJsonDialect, QwenXmlDialect

__all__ = [
    "DIALECTS",
    "DeepSeekDialect",
    "DialectError",
    "DialectParse",
    "Extracted",
    "GlmDialect",
    "HarmonyDialect",
    "KimiDialect",
    "LlamaJsonDialect",
    "QwenJsonDialect",
    "QwenXmlDialect",
    "ToolCallDialect",
    "detect_dialect",
    "dialect_for",
]

DIALECTS: dict[str, ToolCallDialect] = {
    d.name: d
    for d in (
        HarmonyDialect(),
        KimiDialect(),
        DeepSeekDialect(),
        GlmDialect(),
        QwenXmlDialect(),
        QwenJsonDialect(),
        LlamaJsonDialect(),
    )
}
"""Every dialect by name, in detection order (most specific signature first)."""


class DialectError(ValueError):
    """No dialect of that name, or none recognised in a chat template."""


def dialect_for(name: str) -> ToolCallDialect:
    """The dialect called `name` (a `--tool-dialect` value)."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise DialectError(
            f"--tool-dialect {name!r} is not a known tool-call dialect; choose one of "
            f"{', '.join(DIALECTS)}"
        ) from None


def detect_dialect(template: str, *, source: str = "the chat template") -> ToolCallDialect:
    """The dialect whose signature markers all occur in `template`."""
    for dialect in DIALECTS.values():
        if all(marker in template for marker in dialect.signature):
            return dialect
    raise DialectError(
        f"cannot tell the tool-call format of {source}: it shows none of the known dialects' "
        f"markers. Name it with --tool-dialect NAME (tool_dialect=...), one of "
        f"{', '.join(DIALECTS)}"
    )
