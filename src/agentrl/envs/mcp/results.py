"""`McpResult`: a tool call's `CallToolResult` as the text of one tool message.

Text blocks are kept as they are, one per line; an embedded text resource is its text; images,
audio, binary resources and resource links become one bracketed line each (`[image image/png,
1204 bytes]`: the model is text-only). The structured content (JSON) is shown only when the
result has no text block (a server that returns both SHOULD put the same JSON in a text block,
as the SDK's `MCPServer` does). `isError` is kept: the env writes such a result as
`Error: ...` and marks the step not admissible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from agentrl.core.types import JsonValue

if TYPE_CHECKING:
    from mcp_types import CallToolResult, ContentBlock

__all__ = ["McpResult", "clip", "result_text"]


@dataclass(frozen=True)
class McpResult:
    """A tool call's result as text."""

    text: str
    is_error: bool = False
    """The server marked the result as an error (the tool failed; the model sees why)."""
    structured: JsonValue = None
    """The result's structured content (JSON), when the tool returned one."""

    @property
    def output(self) -> str:
        """The tool message text: the text, prefixed with `Error: ` for an error result."""
        return f"Error: {self.text}" if self.is_error else self.text


def _size(data: str) -> int:
    """Bytes of a base64 payload."""
    return len(data) * 3 // 4 - data[-2:].count("=")


def _block_text(block: ContentBlock) -> tuple[str, bool]:
    """(text, is_text) of one content block."""
    from mcp_types import (
        AudioContent,
        BlobResourceContents,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
    )

    if isinstance(block, TextContent):
        return block.text, True
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type} {block.mime_type}, {_size(block.data)} bytes]", False
    if isinstance(block, ResourceLink):
        name = f" ({block.name})" if block.name and block.name != block.uri else ""
        return f"[resource link {block.uri}{name}]", False
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, BlobResourceContents):
            mime = resource.mime_type or "application/octet-stream"
            return f"[resource {resource.uri} {mime}, {_size(resource.blob)} bytes]", False
        return resource.text, True
    return f"[{getattr(block, 'type', 'unknown')} content]", False


def result_text(result: CallToolResult) -> McpResult:
    """The `McpResult` of one `CallToolResult`."""
    parts = [_block_text(block) for block in result.content]
    structured = cast(JsonValue, result.structured_content)
    lines = [text for text, _ in parts]
    if structured is not None and not any(is_text for _, is_text in parts):
        lines.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    return McpResult(text="\n".join(lines), is_error=result.is_error, structured=structured)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters cut]"
