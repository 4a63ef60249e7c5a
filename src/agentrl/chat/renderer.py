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

Templates that rewrite history (e.g. Qwen3's, which drops the empty `<think></think>` block
of earlier assistant turns) are detected when the renderer is built and raise
`HistoryRewriteError`, unless `allow_history_rewrite=True`: the rollout then still trains on
the exact sampled tokens, but a fresh render of the same conversation would differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agentrl.types import JsonObject, JsonValue, Message

__all__ = [
    "ChatRenderer",
    "ChatTemplateError",
    "ChatTokenizer",
    "HistoryRewriteError",
    "message_to_dict",
]

PROBE_MARK = "zq7probe"
"""A string that never occurs in a chat template, used to find the probe reply."""


class ChatTokenizer(Protocol):
    """The part of a Hugging Face tokenizer the renderer uses."""

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any:
        """Render messages with the tokenizer's chat template."""
        ...

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]:
        """Text to token ids."""
        ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = ...) -> str:
        """Token ids to text."""
        ...


class ChatTemplateError(ValueError):
    """The chat template cannot be extended token by token."""


class HistoryRewriteError(ChatTemplateError):
    """The chat template renders earlier turns differently once more messages follow."""


def message_to_dict(message: Message) -> dict[str, Any]:
    """A `Message` in the dict form Hugging Face chat templates expect."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"type": "function", "function": {"name": c.name, "arguments": dict(c.arguments)}}
            for c in message.tool_calls
        ]
    if message.name is not None:
        out["name"] = message.name
    return out


def _first_difference(a: str, b: str) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"at character {i}: {a[max(0, i - 30) : i + 30]!r} became {b[max(0, i - 30) : i + 30]!r}"


class ChatRenderer:
    """Renders chat prompts as tokens with a tokenizer's own template; exact prefix extension.

    `template_kwargs` go to the template (default: `enable_thinking=False`); `chat_template`
    overrides the tokenizer's template; `probe_reply` is a typical assistant reply (a tool
    call) used to derive the closing and tool-message tokens.
    """

    def __init__(
        self,
        tokenizer: ChatTokenizer,
        tools: Sequence[JsonObject] = (),
        *,
        template_kwargs: Mapping[str, JsonValue] | None = None,
        chat_template: str | None = None,
        probe_reply: str = (
            "<tool_call>\n<function=probe_tool>\n<parameter=action>\nlook "
            f"{PROBE_MARK}\n</parameter>\n</function>\n</tool_call>"
        ),
        allow_history_rewrite: bool = False,
        verify: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.tools: tuple[JsonObject, ...] = tuple(tools)
        self.template_kwargs: dict[str, JsonValue] = (
            {"enable_thinking": False} if template_kwargs is None else dict(template_kwargs)
        )
        self.chat_template = chat_template
        self.allow_history_rewrite = allow_history_rewrite
        self.verify = verify
        if PROBE_MARK not in probe_reply:
            probe_reply = f"{probe_reply} {PROBE_MARK}"
        self._reply = probe_reply
        self._context = [
            {"role": "system", "content": "Probe system."},
            {"role": "user", "content": "Probe task."},
        ]
        self.closing_text, self.closing_tokens = self._derive_closing()
        self._assistant = {"role": "assistant", "content": self._reply}
        self._probe_text = self.render_text([*self._context, self._assistant])
        self._probe_tokens = self.encode(self._probe_text)
        self._check_history()

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

    # -- extension -------------------------------------------------------------------------

    @property
    def stop_tokens(self) -> tuple[int, ...]:
        """Token ids that end an assistant turn: the first closing token, then the EOS token."""
        stops: list[int] = [self.closing_tokens[0]] if self.closing_tokens else []
        eos = getattr(self.tokenizer, "eos_token_id", None)
        if isinstance(eos, int) and eos not in stops:
            stops.append(eos)
        return tuple(stops)

    def missing_closing(self, completion: Sequence[int]) -> list[int]:
        """The closing tokens the completion lacks (its tail may already hold a prefix of them,
        typically the stop token)."""
        closing = self.closing_tokens
        for k in range(min(len(closing), len(completion)), 0, -1):
            if list(completion[-k:]) == closing[:k]:
                return closing[k:]
        return list(closing)

    def tool_message_tokens(self, message: Message) -> list[int]:
        """Tokens the template puts after a closed assistant turn for `message`, up to and
        including the next generation prompt. Derived from the fixed probe conversation."""
        full = self.render_text(
            [*self._context, self._assistant, message_to_dict(message)],
            add_generation_prompt=True,
        )
        if full.startswith(self._probe_text):
            cut = len(self._probe_text)
        else:
            if not self.allow_history_rewrite:
                raise HistoryRewriteError(
                    "the chat template renders the earlier assistant turn differently once a "
                    f"{message.role} message follows ({_first_difference(self._probe_text, full)})"
                    "; pass allow_history_rewrite=True to keep the sampled tokens anyway"
                )
            marker = self._reply + self.closing_text
            found = full.find(marker)
            if found < 0:
                raise ChatTemplateError(
                    "cannot find the assistant reply in the template's render of a tool message"
                )
            cut = found + len(marker)
        delta = self.encode(full[cut:])
        if self.verify:
            head = self._probe_tokens if cut == len(self._probe_text) else self.encode(full[:cut])
            if head + delta != self.encode(full):
                raise ChatTemplateError(
                    "the tool message's first tokens merge with the assistant turn's closing "
                    f"text {self.closing_text!r}; this template cannot be extended token by token"
                )
        return delta

    def extend(
        self, prompt_tokens: Sequence[int], completion_tokens: Sequence[int], tool_message: Message
    ) -> list[int]:
        """`prompt + completion + missing closing tokens + tool-message tokens`."""
        return [
            *prompt_tokens,
            *completion_tokens,
            *self.missing_closing(completion_tokens),
            *self.tool_message_tokens(tool_message),
        ]

    def completion_text(self, completion_tokens: Sequence[int]) -> str:
        """The assistant's text: the completion decoded without its trailing stop tokens."""
        tokens = list(completion_tokens)
        stops = set(self.stop_tokens)
        while tokens and tokens[-1] in stops:
            tokens.pop()
        return self.tokenizer.decode(tokens, skip_special_tokens=False)

    # -- template checks -------------------------------------------------------------------

    def _derive_closing(self) -> tuple[str, list[int]]:
        prompt = self.render_text(self._context, add_generation_prompt=True)
        with_reply = self.render_text(
            [*self._context, {"role": "assistant", "content": self._reply}]
        )
        if not with_reply.startswith(prompt):
            raise HistoryRewriteError(
                "the chat template renders an assistant turn differently from its own "
                f"generation prompt ({_first_difference(prompt, with_reply)})"
            )
        after = with_reply[len(prompt) :]
        if not after.startswith(self._reply):
            raise ChatTemplateError(
                "the chat template changes the assistant's text when it renders it "
                f"({_first_difference(self._reply, after)})"
            )
        closing = after[len(self._reply) :]
        tokens = self.encode(closing)
        if self.verify and self.encode(prompt) + self.encode(self._reply) + tokens != (
            self.encode(with_reply)
        ):
            raise ChatTemplateError(
                f"the closing text {closing!r} merges with the assistant's last tokens"
            )
        return closing, tokens

    def _check_history(self) -> None:
        """Two probe rounds: each prompt must be a text prefix of the next render."""
        messages: list[dict[str, Any]] = list(self._context)
        previous = self.render_text(messages, add_generation_prompt=True)
        for round_ in range(2):
            messages.append({"role": "assistant", "content": self._reply})
            closed = self.render_text(messages)
            tool = {"role": "tool", "name": "probe_tool", "content": f"Probe result {round_}."}
            messages.append(tool)
            following = self.render_text(messages, add_generation_prompt=True)
            for before, after in ((previous, closed), (closed, following)):
                if not after.startswith(before) and not self.allow_history_rewrite:
                    where = _first_difference(before, after)
                    raise HistoryRewriteError(
                        "the chat template rewrites history: an earlier part of the "
                        f"conversation renders differently later ({where}"
                        "). agentrl extends prompts token by token, so training would use tokens "
                        "this template no longer produces. Use a template that renders past turns "
                        "as generated (e.g. agentrl.tokenizer.QWEN_CHAT_TEMPLATE for Qwen models, "
                        "via chat_template=...), or pass allow_history_rewrite=True to keep the "
                        "exact sampled tokens anyway."
                    )
            previous = following
