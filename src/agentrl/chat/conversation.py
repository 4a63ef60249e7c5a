"""A whole conversation as training tokens: which tokens the assistant wrote, which it read.

Supervised fine-tuning trains a model on conversations it did not sample. `render_conversation`
renders one with the renderer's chat template the way a rollout would have produced it: each
assistant reply follows the tokens of the generation prompt before it (the prompt encoded on its
own, as the sampler would have been given it), and the reply's tokens are the reply's text
encoded on its own plus the template's first closing token (the stop token the sampler would
have emitted). What the template appends after that token (a newline), the tool or user
messages and the next generation prompt are context. Where the template renders an earlier
turn differently once more messages follow (e.g. it drops the think blocks of old replies),
the conversation continues in a new segment: a fresh render whose earlier replies are context
only, so every reply is trained exactly once, always after the prompt it would have followed.

The result is pieces of tokens with a flag (trained or not); `agentrl.algo.datums.
supervised_datum` turns one segment's pieces into a datum (the only place masks are built).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentrl.chat.base import message_to_dict
from agentrl.chat.renderer import ChatRenderer, ChatTemplateError
from agentrl.core.types import JsonObject, Message

__all__ = ["ConversationPiece", "RenderedConversation", "render_conversation"]


@dataclass(frozen=True)
class ConversationPiece:
    """Consecutive tokens of one kind: written by the assistant (`trained`) or read by it."""

    tokens: tuple[int, ...]
    trained: bool


@dataclass(frozen=True)
class RenderedConversation:
    """A conversation's tokens: one or more segments, each a list of pieces."""

    segments: tuple[tuple[ConversationPiece, ...], ...]

    @property
    def longest_segment(self) -> int:
        """Tokens of the longest segment (what one datum must hold)."""
        return max((sum(len(p.tokens) for p in s) for s in self.segments), default=0)


def render_conversation(
    renderer: ChatRenderer,
    messages: Sequence[Message],
    tools: Sequence[JsonObject] | None = None,
) -> RenderedConversation:
    """The tokens of `messages` with the assistant's replies marked (see the module doc).

    `tools` are the conversation's tool schemas (default: the renderer's). Raises
    `ChatTemplateError` when the conversation has no assistant message or the template renders
    a reply other than after its own generation prompt."""
    replies = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not replies:
        raise ChatTemplateError("the conversation has no assistant message to train on")
    dicts = [message_to_dict(m) for m in messages]
    segments: list[tuple[ConversationPiece, ...]] = []
    pieces: list[ConversationPiece] = []
    committed = ""  # the text the pieces of the open segment encode
    for index in replies:
        prompt = renderer.render_text(dicts[:index], add_generation_prompt=True, tools=tools)
        full = renderer.render_text(dicts[: index + 1], tools=tools)
        if not full.startswith(prompt):
            raise ChatTemplateError(
                f"message {index}: the chat template renders this assistant reply other than "
                "after its own generation prompt"
            )
        if not prompt.startswith(committed):  # earlier turns re-rendered: a new segment
            segments.append(tuple(pieces))
            pieces, committed = [], ""
        context = prompt[len(committed) :]
        if context:
            pieces.append(ConversationPiece(tuple(renderer.encode(context)), False))
        pieces.extend(_reply_pieces(renderer, full[len(prompt) :]))
        committed = full
    segments.append(tuple(pieces))
    return RenderedConversation(tuple(segments))


def _reply_pieces(renderer: ChatRenderer, after: str) -> list[ConversationPiece]:
    """The reply as the sampler would have written it (text + stop token, trained) and what the
    template appends after the stop token (context)."""
    closing = renderer.closing_text
    if closing and after.endswith(closing) and renderer.closing_tokens:
        reply = after[: -len(closing)]
        stop, rest = renderer.closing_tokens[0], renderer.closing_tokens[1:]
        pieces = [ConversationPiece((*renderer.encode(reply), stop), True)]
        if rest:
            pieces.append(ConversationPiece(tuple(rest), False))
        return pieces
    return [ConversationPiece(tuple(renderer.encode(after)), True)]  # the template's own end
