"""ChatRenderer: prompts as tokens, each turn an exact token-prefix extension of the last.

The first prompt is one render of the tokenizer's own chat template. After that a prompt is
never re-rendered: `extend(prompt, completion, tool_message)` returns

    prompt + completion + (closing tokens the completion lacks) + tool-message tokens

so the tokens a trajectory trains on are exactly the tokens it sampled from. The closing
tokens (e.g. `<|im_end|>\\n`) and the tool-message tokens (e.g. `<|im_start|>user\\n
<tool_response>...<|im_end|>\\n<|im_start|>assistant\\n`) come from the template itself,
rendered over a small fixed probe conversation, so the per-turn cost grows with the new
message, not with the history. Every delta is checked against a token-level render of that
probe (cheap: its size is fixed).

The model family's tool-call dialect (`agentrl.chat.dialects`) is detected from the template
(or named): it writes the probe reply, parses replies and adds its stop markers. How the template
treats history is checked when the renderer is built (`extension`, see `agentrl.chat.history`):
it extends; or its only rewrite drops think blocks of earlier turns (Qwen3: accepted with a
one-time warning and recorded); or it rewrites otherwise (`HistoryRewriteError`, unless
`allow_history_rewrite=True`: the rollout then still trains on the exact sampled tokens); or it
renders an assistant turn differently from its own generation prompt, and the rollout
re-renders every turn as a new segment (`segment_prompt`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from agentrl.chat.base import (
    ChatTemplateError,
    ChatTokenizer,
    HistoryRewriteError,
    message_to_dict,
)
from agentrl.chat.dialects import ToolCallDialect, detect_dialect, dialect_for
from agentrl.chat.encoding import (
    BoundaryCheck,
    LineEncoder,
    VerifyMode,
    batch_encoder,
    missing_suffix,
    verify_mode,
)
from agentrl.chat.history import (
    ExtensionMode,
    RenderRecord,
    drop_think_blocks,
    first_difference,
    structured_messages,
    warn_once,
)
from agentrl.core.types import JsonObject, JsonValue, Message, ToolCall

__all__ = [
    "ChatRenderer",
    "ChatTemplateError",
    "ChatTokenizer",
    "HistoryRewriteError",
    "message_to_dict",
]

PROBE_MARK = "zq7probe"
"""A string that never occurs in a chat template, used to find the probe reply."""


_first_difference = first_difference


class ChatRenderer:
    """Renders chat prompts as tokens with a tokenizer's own template; exact prefix extension.

    `template_kwargs` go to the template (default: `enable_thinking=<enable_thinking>`);
    `chat_template` overrides the tokenizer's template; `dialect` names the tool-call dialect
    (a name or an object; default: detected from the template); `probe_reply` is a typical
    assistant reply (default: a call written by the dialect, in its reasoning form when
    thinking) used to derive the closing and tool-message tokens. `verify` says how each
    tool-message delta is checked against a full render (`VerifyMode`: True = "boundary", the
    cheap default; "full" re-encodes the probe every turn; False = "off"); `line_cache` reuses
    the tokens of repeated lines (exact; see `agentrl.chat.encoding`).
    """

    def __init__(
        self,
        tokenizer: ChatTokenizer,
        tools: Sequence[JsonObject] = (),
        *,
        template_kwargs: Mapping[str, JsonValue] | None = None,
        chat_template: str | None = None,
        dialect: ToolCallDialect | str | None = None,
        enable_thinking: bool = False,
        probe_reply: str | None = None,
        allow_history_rewrite: bool = False,
        verify: bool | str | VerifyMode = True,
        line_cache: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.tools: tuple[JsonObject, ...] = tuple(tools)
        self.template_kwargs: dict[str, JsonValue] = (
            {"enable_thinking": enable_thinking}
            if template_kwargs is None
            else dict(template_kwargs)
        )
        self.enable_thinking = self.template_kwargs.get("enable_thinking") is True
        self.chat_template = chat_template
        self.allow_history_rewrite = allow_history_rewrite
        self.verify = verify_mode(verify)
        template = chat_template or getattr(tokenizer, "chat_template", None) or ""
        if isinstance(dialect, str):
            dialect = dialect_for(dialect)
        self.dialect: ToolCallDialect = dialect or detect_dialect(str(template))
        self._context = [
            {"role": "system", "content": "Probe system."},
            {"role": "user", "content": "Probe task."},
        ]
        self._reply = self._probe_reply(probe_reply)
        self.rewrite: str | None = None
        self.extension = ExtensionMode.EXTENDS
        try:
            self.closing_text, self.closing_tokens = self._derive_closing()
        except HistoryRewriteError as exc:  # the assistant turn never extends its prompt
            self.extension, self.rewrite = ExtensionMode.SEGMENTS, str(exc)
            self.closing_text, self.closing_tokens = "", []
            warn_once(f"segments:{template}", f"{exc}; every turn starts a new segment")
        self._assistant = {"role": "assistant", "content": self._reply}
        self._delta_tools: tuple[JsonObject, ...] | None = None
        """Tools of tool-message probe renders: () where checked to give the same text."""
        if self.extension is not ExtensionMode.SEGMENTS:
            self._probe_text = self.render_text([*self._context, self._assistant])
            self._check_history(str(template))
            if self.verify is not VerifyMode.FULL and self.tools:
                self._try_bare_probe()
            self._probe_tokens = self.encode(self._probe_text)
        self._boundary = BoundaryCheck(
            tokenizer, self.encode, self.closing_text, self.closing_tokens
        )
        self._lines = LineEncoder(
            self.encode, encode_many=batch_encoder(tokenizer), enabled=line_cache
        )
        self._frames: dict[tuple[tuple[str, str | None], ...], _Frame] = {}
        """Per tool-message shape: the template's text before, between and after contents."""
        self._no_frame: set[tuple[tuple[str, str | None], ...]] = set()
        """Shapes whose contents the template does not insert verbatim (rendered each time)."""

    @property
    def record(self) -> RenderRecord:
        """What this renderer decided about its template (for run records)."""
        return RenderRecord(
            dialect=self.dialect.name,
            extension=self.extension,
            enable_thinking=self.enable_thinking,
            stop_markers=self.dialect.stop_markers,
            rewrite=self.rewrite,
        )

    @property
    def segments(self) -> bool:
        """True when the rollout must re-render each turn (the template cannot be extended)."""
        return self.extension is ExtensionMode.SEGMENTS

    # -- rendering -------------------------------------------------------------------------

    def render_text(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        add_generation_prompt: bool = False,
        tools: Sequence[JsonObject] | None = None,
    ) -> str:
        """The template's text for `messages` (dicts); tools default to the renderer's."""
        kwargs: dict[str, Any] = dict(self.template_kwargs)
        if self.chat_template is not None:
            kwargs["chat_template"] = self.chat_template
        chosen = self.tools if tools is None else tuple(tools)
        text = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages],
            tools=list(chosen) or None,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
            **kwargs,
        )
        if not isinstance(text, str):
            raise ChatTemplateError(f"apply_chat_template returned {type(text)}, not text")
        return text

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (no special tokens added: the template writes them)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def render(
        self, messages: Sequence[Message], *, add_generation_prompt: bool = False
    ) -> list[int]:
        """Full render of a conversation to tokens (O(history): for checks, not rollouts)."""
        dicts = [message_to_dict(m) for m in messages]
        return self.encode(self.render_text(dicts, add_generation_prompt=add_generation_prompt))

    def initial_prompt(
        self, messages: Sequence[Message], tools: Sequence[JsonObject] | None = None
    ) -> list[int]:
        """Tokens of the first prompt: `messages` plus the generation prompt."""
        dicts = [message_to_dict(m) for m in messages]
        return self.encode(self.render_text(dicts, add_generation_prompt=True, tools=tools))

    def segment_prompt(
        self, messages: Sequence[Message], tools: Sequence[JsonObject] | None = None
    ) -> list[int]:
        """A fresh render of the whole conversation plus the generation prompt (a new segment).

        Assistant replies are given to the template in its own form (calls as `tool_calls`,
        reasoning in the family's field), as parsed back by the dialect.
        """
        dicts = structured_messages(messages, self.dialect)
        return self.encode(self.render_text(dicts, add_generation_prompt=True, tools=tools))

    # -- extension -------------------------------------------------------------------------

    @functools.cached_property
    def vocab_size(self) -> int | None:
        """How many token ids the tokenizer can decode (None: unknown); read once per renderer
        (`len(tokenizer)` costs ~160 ms in tokenizers 0.22)."""
        try:
            return len(self.tokenizer)  # type: ignore[arg-type]
        except TypeError:
            return None

    @functools.cached_property
    def stop_tokens(self) -> tuple[int, ...]:
        """Token ids that end an assistant turn: the first closing token, the EOS token, then
        the dialect's stop markers that are single tokens of this tokenizer (computed once per
        renderer)."""
        stops: list[int] = [self.closing_tokens[0]] if self.closing_tokens else []
        eos = getattr(self.tokenizer, "eos_token_id", None)
        candidates = [eos] if isinstance(eos, int) else []
        for marker in self.dialect.stop_markers:
            ids = self.encode(marker)
            if len(ids) == 1:
                candidates.append(ids[0])
        stops.extend(t for t in candidates if t not in stops)
        return tuple(dict.fromkeys(stops))

    def missing_closing(self, completion: Sequence[int]) -> list[int]:
        """The closing tokens the completion lacks (its tail may already hold a prefix of them,
        typically the stop token)."""
        return missing_suffix(completion, self.closing_tokens)

    def tool_message_tokens(self, message: Message | Sequence[Message]) -> list[int]:
        """Tokens the template puts after a closed assistant turn for `message` (or several
        tool messages, one per call, in order), up to and including the next generation
        prompt. Derived from the fixed probe conversation; the template's text around the
        contents is rendered once per message shape (roles and names) and reused when the
        template is checked to insert contents verbatim (`_frame`)."""
        if self.segments:
            raise ChatTemplateError("this template cannot be extended; use segment_prompt")
        messages = [message] if isinstance(message, Message) else list(message)
        text: str | None = None
        frame = self._frames.get(_shape(messages)) if self.verify is not VerifyMode.FULL else None
        if frame is not None and frame.fits(m.content for m in messages):
            text = frame.fill([m.content for m in messages])
            delta = self._lines.encode(text)
            if self.verify is VerifyMode.BOUNDARY and not self._boundary.ok(text, delta):
                raise ChatTemplateError(
                    "the tool message's first tokens merge with the assistant turn's closing "
                    f"text {self.closing_text!r}; this template cannot be extended token by token"
                )
            return delta
        full, cut = self._tool_render(messages)
        text = full[cut:]
        delta = self._lines.encode(text)
        if self.verify is VerifyMode.FULL:
            head = self._probe_tokens if cut == len(self._probe_text) else self.encode(full[:cut])
            merged = head + delta != self.encode(full)
        else:
            merged = self.verify is VerifyMode.BOUNDARY and not self._boundary.ok(text, delta)
        if merged:
            raise ChatTemplateError(
                "the tool message's first tokens merge with the assistant turn's closing "
                f"text {self.closing_text!r}; this template cannot be extended token by token"
            )
        if self.verify is not VerifyMode.FULL:
            self._learn_frame(messages, text)
        return delta

    def _tool_render(self, messages: Sequence[Message]) -> tuple[str, int]:
        """The probe conversation plus `messages` rendered, and where their text starts."""
        full = self.render_text(
            [*self._context, self._assistant, *(message_to_dict(m) for m in messages)],
            add_generation_prompt=True,
            tools=self._delta_tools,
        )
        if full.startswith(self._probe_text):
            return full, len(self._probe_text)
        if self.extension is ExtensionMode.EXTENDS:
            raise HistoryRewriteError(
                "the chat template renders the earlier assistant turn differently once a "
                f"{messages[0].role} message follows "
                f"({_first_difference(self._probe_text, full)})"
                "; pass allow_history_rewrite=True to keep the sampled tokens anyway"
            )
        marker = self._reply + self.closing_text
        found = full.find(marker)
        if found < 0:
            raise ChatTemplateError(
                "cannot find the assistant reply in the template's render of a tool message"
            )
        return full, found + len(marker)

    def _learn_frame(self, messages: Sequence[Message], text: str) -> None:
        """Keep the template's text around the contents of this message shape, when two renders
        with marker contents (one with whitespace, quotes and markup) show that it inserts
        contents verbatim, trimmed or as JSON strings, and the frame reproduces the real render
        `text`."""
        shape = _shape(messages)
        if shape in self._frames or shape in self._no_frame:
            return
        texts = []
        for simple in (False, True):
            markers = [_marker(i, simple) for i in range(len(messages))]
            marked = [
                Message(role=m.role, content=marker, name=m.name)
                for m, marker in zip(messages, markers, strict=True)
            ]
            full, cut = self._tool_render(marked)
            texts.append((full[cut:], markers))
        (marked_text, marked_markers), (plain_text, plain_markers) = texts
        # the markers with whitespace, quotes and a non-ASCII letter show how contents are
        # inserted; the plain ones must give the same frame that way, and so must the real text
        frame = _Frame.learn(marked_text, marked_markers)
        if (
            frame is None
            or _split_frame(plain_text, [frame.insert.apply(m) for m in plain_markers])
            != frame.pieces
            or frame.fill([m.content for m in messages]) != text
        ):
            self._no_frame.add(shape)
            return
        self._frames[shape] = frame

    def extend(
        self,
        prompt_tokens: Sequence[int],
        completion_tokens: Sequence[int],
        tool_message: Message | Sequence[Message],
    ) -> list[int]:
        """`prompt + completion + missing closing tokens + tool-message tokens`."""
        return [
            *prompt_tokens,
            *completion_tokens,
            *self.continuation(completion_tokens, tool_message),
        ]

    def continuation(
        self, completion_tokens: Sequence[int], tool_message: Message | Sequence[Message]
    ) -> list[int]:
        """What `extend` appends after the completion: the closing tokens it lacks, then the
        tool-message tokens (not twice where the completion ended on them, e.g. GLM's)."""
        after = [*self.closing_tokens, *self.tool_message_tokens(tool_message)]
        return missing_suffix(completion_tokens, after)

    def completion_text(self, completion_tokens: Sequence[int]) -> str:
        """The assistant's text: the completion decoded without its trailing stop tokens."""
        tokens = list(completion_tokens)
        stops = set(self.stop_tokens)
        while tokens and tokens[-1] in stops:
            tokens.pop()
        return self.tokenizer.decode(tokens, skip_special_tokens=False)

    # -- template checks -------------------------------------------------------------------

    def _try_bare_probe(self) -> None:
        """Render tool messages over a probe without tools where that gives the same text."""
        tool = {"role": "tool", "name": "probe_tool", "content": "Probe result."}
        messages = [*self._context, self._assistant, tool, {**tool, "content": "Second."}]
        bare_probe = self.render_text([*self._context, self._assistant], tools=())
        bare = self.render_text(messages, add_generation_prompt=True, tools=())
        full = self.render_text(messages, add_generation_prompt=True)
        if (
            bare.startswith(bare_probe)
            and full.startswith(self._probe_text)
            and bare[len(bare_probe) :] == full[len(self._probe_text) :]
        ):
            self._delta_tools, self._probe_text = (), bare_probe

    def _probe_reply(self, given: str | None) -> str:
        if given is not None:
            return given if PROBE_MARK in given else f"{given} {PROBE_MARK}"
        call = self.dialect.write(ToolCall("probe_tool", {"action": f"look {PROBE_MARK}"}))
        if not self.enable_thinking or self.dialect.think is None:
            return call
        prompt = self.render_text(self._context, add_generation_prompt=True)
        opened = prompt.rstrip().endswith(self.dialect.think[0])
        return self.dialect.reasoning_reply(f"Probe reasoning {PROBE_MARK}.", call, opened=opened)

    def _derive_closing(self) -> tuple[str, list[int]]:
        prompt = self.render_text(self._context, add_generation_prompt=True)
        try:
            with_reply = self.render_text(
                [*self._context, {"role": "assistant", "content": self._reply}]
            )
        except ChatTemplateError:
            raise
        except Exception as exc:  # the template refuses its own reply as plain content
            raise HistoryRewriteError(
                f"the chat template refuses the assistant's reply as text ({exc})"
            ) from exc
        if not with_reply.startswith(prompt):
            raise HistoryRewriteError(
                "the chat template renders an assistant turn differently from its own "
                f"generation prompt ({_first_difference(prompt, with_reply)})"
            )
        after = with_reply[len(prompt) :]
        if not after.startswith(self._reply):
            raise HistoryRewriteError(
                "the chat template changes the assistant's text when it renders it "
                f"({_first_difference(self._reply, after)})"
            )
        closing = after[len(self._reply) :]
        tokens = self.encode(closing)
        pieces = self.encode(prompt) + self.encode(self._reply) + tokens
        if self.verify is not VerifyMode.OFF and pieces != self.encode(with_reply):
            raise ChatTemplateError(
                f"the closing text {closing!r} merges with the assistant's last tokens"
            )
        return closing, tokens

    def _check_history(self, template: str) -> None:
        """Two probe rounds: each prompt must be a text prefix of the next render, or differ
        from it only by dropped think blocks (a safe rewrite)."""
        messages: list[dict[str, Any]] = list(self._context)
        previous = self.render_text(messages, add_generation_prompt=True)
        for round_ in range(2):
            messages.append({"role": "assistant", "content": self._reply})
            closed = self.render_text(messages)
            tool = {"role": "tool", "name": "probe_tool", "content": f"Probe result {round_}."}
            messages.append(tool)
            following = self.render_text(messages, add_generation_prompt=True)
            for before, after in ((previous, closed), (closed, following)):
                if after.startswith(before):
                    continue
                where = _first_difference(before, after)
                stripped = drop_think_blocks(before, self.dialect)
                if drop_think_blocks(after, self.dialect).startswith(stripped):
                    self.extension = ExtensionMode.SAFE_REWRITE
                    self.rewrite = f"drops think blocks of earlier assistant turns ({where})"
                    warn_once(
                        f"rewrite:{template}",
                        f"the chat template {self.rewrite}; accepted as a safe rewrite: prompts "
                        "keep the sampled think blocks, a fresh render would not",
                    )
                    continue
                if self.allow_history_rewrite:
                    self.extension, self.rewrite = ExtensionMode.REWRITE_ALLOWED, where
                    continue
                raise HistoryRewriteError(
                    "the chat template rewrites history: an earlier part of the "
                    f"conversation renders differently later ({where}"
                    "). agentrl extends prompts token by token, so training would use tokens "
                    "this template no longer produces. Use a template that renders past turns "
                    "as generated (--chat-template PATH, e.g. agentrl.chat.tokenizers."
                    "QWEN_CHAT_TEMPLATE for Qwen models, chat_template=...), or pass "
                    "--allow-history-rewrite (allow_history_rewrite=True) to keep the exact "
                    "sampled tokens anyway."
                )
            previous = following


def _shape(messages: Sequence[Message]) -> tuple[tuple[str, str | None], ...]:
    """What of a tool-message list a template's text around the contents may depend on."""
    return tuple((m.role, m.name) for m in messages)


def _marker(index: int, plain: bool) -> str:
    """A content that never occurs in a template; the second kind carries the characters a
    template could trim or escape (whitespace, quotes, markup, a backslash, a non-ASCII
    letter)."""
    return f"{PROBE_MARK}c{index}" if plain else f"  \n{PROBE_MARK}d{index} \"<&'\\\t \u00e9 \n"


def _split_frame(text: str, markers: Sequence[str]) -> tuple[str, ...] | None:
    """`text` cut at each marker, in order, each exactly once (None otherwise)."""
    pieces: list[str] = []
    rest = text
    for marker in markers:
        if rest.count(marker) != 1:
            return None
        before, rest = rest.split(marker)
        pieces.append(before)
    pieces.append(rest)
    return tuple(pieces)


class _Insert(Enum):
    """How a template inserts a tool message's content into its text."""

    VERBATIM = "verbatim"
    TRIM = "trim"
    """Leading and trailing whitespace stripped (Jinja's `trim` filter is `str.strip()`)."""
    JSON = "json"
    """As a JSON string (transformers' `tojson`: `json.dumps(x, ensure_ascii=False)`; Llama
    3.1's template JSON-encodes tool results)."""

    def apply(self, content: str) -> str:
        """`content` as the template writes it."""
        if self is _Insert.TRIM:
            return content.strip()
        if self is _Insert.JSON:
            return json.dumps(content, ensure_ascii=False)
        return content


@dataclass(frozen=True)
class _Frame:
    """A template's text around the contents of one tool-message shape."""

    pieces: tuple[str, ...]
    """The text before, between and after the contents."""
    insert: _Insert

    @classmethod
    def learn(cls, text: str, markers: Sequence[str]) -> _Frame | None:
        """The frame of a render `text` of marker contents, by the first way of inserting them
        that cuts `text` at each one exactly once; None when the template changes them in any
        other way."""
        for insert in _Insert:
            pieces = _split_frame(text, [insert.apply(m) for m in markers])
            if pieces is not None:
                return cls(pieces, insert)
        return None

    def fits(self, contents: Iterable[str]) -> bool:
        """Whether the frame was shown to hold for these contents: none may be empty, before or
        after insertion (a template may leave out an empty result's tags; the markers are never
        empty), so such a message is rendered."""
        return all(c and self.insert.apply(c) for c in contents)

    def fill(self, contents: Sequence[str]) -> str:
        """The frame's pieces with the contents between them."""
        out = [self.pieces[0]]
        for content, piece in zip(contents, self.pieces[1:], strict=True):
            out += [self.insert.apply(content), piece]
        return "".join(out)
