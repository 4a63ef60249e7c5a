"""The gateway without HTTP: its sessions, its renderers, its counters, and the OpenAI-shaped
answers of one call (`completion_body`, `stream_chunks`)."""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from agentrl.backends.base import Sampler
from agentrl.chat import ChatRenderer
from agentrl.chat.base import ChatTokenizer
from agentrl.core.types import JsonObject, JsonValue, TaskInfo, Trajectory
from agentrl.gateway.openai_shapes import ChatRequest, GatewayError, parse_request
from agentrl.gateway.session import CallResult, Choice, GatewaySession, RendererCache
from agentrl.rollout.config import RolloutConfig

__all__ = ["Gateway", "GatewayStats", "completion_body", "stream_chunks"]

STREAM_PIECE = 16
"""Characters of content per streamed chunk."""


@dataclass
class GatewayStats:
    """What the gateway answered: calls, errors by code, clients gone mid-stream."""

    calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    disconnects: int = 0


class Gateway:
    """Sessions of agents calling an OpenAI-compatible endpoint (see `agentrl.gateway`).

    `renderer(tools)` builds the chat renderer of a tool list (`Gateway.for_tokenizer` uses
    the tokenizer's own template); `sampler` is the default sampler of new sessions; `config`
    the budgets, default sampling and retries of each session. With `open_sessions` a call
    naming an unknown session opens it (`agentrl serve`); otherwise it is a 404.
    """

    def __init__(
        self,
        renderer: Callable[[tuple[JsonObject, ...]], ChatRenderer],
        *,
        sampler: Sampler | None = None,
        config: RolloutConfig | None = None,
        model: str = "agentrl",
        open_sessions: bool = False,
    ) -> None:
        self.renderers = RendererCache(renderer)
        self.sampler = sampler
        self.config = config or RolloutConfig(group_size=1)
        self.model = model
        self.open_sessions = open_sessions
        self.sessions: dict[str, GatewaySession] = {}
        self.stats = GatewayStats()

    @classmethod
    def for_tokenizer(
        cls,
        tokenizer: ChatTokenizer,
        *,
        chat_template: str | None = None,
        dialect: str | None = None,
        enable_thinking: bool = False,
        **kwargs: object,
    ) -> Gateway:
        """A gateway rendering with `tokenizer`'s chat template (or `chat_template`)."""

        def renderer(tools: tuple[JsonObject, ...]) -> ChatRenderer:
            return ChatRenderer(
                tokenizer,
                tools,
                chat_template=chat_template,
                dialect=dialect,
                enable_thinking=enable_thinking,
            )

        return cls(renderer, **kwargs)  # type: ignore[arg-type]

    # -- sessions --------------------------------------------------------------------------

    def open_session(
        self,
        session_id: str | None = None,
        *,
        sampler: Sampler | None = None,
        task: TaskInfo | None = None,
        group_id: str = "",
        branch: int = 0,
        config: RolloutConfig | None = None,
    ) -> GatewaySession:
        """A new session (a random id unless given); its calls sample with `sampler`."""
        session_id = session_id or secrets.token_hex(8)
        if session_id in self.sessions:
            raise ValueError(f"session {session_id!r} is already open")
        chosen = sampler or self.sampler
        if chosen is None:
            raise ValueError("Gateway.open_session needs a sampler (or a gateway default)")
        session = GatewaySession(
            session_id,
            chosen,
            self.renderers,
            config or self.config,
            task=task,
            group_id=group_id,
            branch=branch,
        )
        self.sessions[session_id] = session
        return session

    def session(self, session_id: str) -> GatewaySession:
        """The open session `session_id` (opened now with `open_sessions`), else a 404."""
        session = self.sessions.get(session_id)
        if session is None and self.open_sessions and self.sampler is not None:
            session = self.open_session(session_id)
        if session is None:
            raise GatewayError(
                404,
                "unknown_session",
                f"no open session {session_id!r}: use the base URL (or API key) the trainer "
                "gave this episode",
            )
        return session

    def end_session(
        self, session_id: str, *, won: bool = False, reward: float = 0.0, error: str | None = None
    ) -> Trajectory:
        """Close `session_id` and return its trajectory (see `GatewaySession.trajectory`)."""
        session = self.session(session_id)
        del self.sessions[session_id]
        return session.trajectory(won=won, reward=reward, error=error)

    # -- calls -----------------------------------------------------------------------------

    async def chat(self, session_id: str, body: bytes) -> tuple[ChatRequest, CallResult]:
        """Answer one `POST .../chat/completions` body; errors are counted and raised."""
        try:
            request = parse_request(body)
            result = await self.session(session_id).complete(request)
        except GatewayError as exc:
            self.stats.errors[exc.code] += 1
            raise
        self.stats.calls += 1
        return request, result

    def refuse(self, error: GatewayError) -> GatewayError:
        """Count an error raised outside `chat` (bad route, bad header) and return it."""
        self.stats.errors[error.code] += 1
        return error

    def models(self) -> JsonObject:
        """The `GET /v1/models` answer."""
        return {
            "object": "list",
            "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "agentrl"}],
        }


def _logprobs(choice: Choice, renderer: ChatRenderer) -> JsonObject:
    content: list[JsonValue] = []
    for token, logprob in zip(choice.completion.tokens, choice.completion.logprobs, strict=True):
        text = renderer.tokenizer.decode([token], skip_special_tokens=False)
        content.append(
            {
                "token": text,
                "logprob": logprob,
                "bytes": list(text.encode()),
                "top_logprobs": [],
            }
        )
    return {"content": content, "refusal": None}


def _usage(result: CallResult) -> JsonObject:
    completion = sum(len(c.completion.tokens) for c in result.choices)
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": result.prompt_tokens + completion,
    }


def completion_body(request: ChatRequest, result: CallResult, renderer: ChatRenderer) -> JsonObject:
    """The `chat.completion` object of a call."""
    return {
        "id": f"chatcmpl-{result.call_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": k,
                "message": choice.reply.message(),
                "finish_reason": choice.finish_reason,
                "logprobs": _logprobs(choice, renderer) if request.logprobs else None,
            }
            for k, choice in enumerate(result.choices)
        ],
        "usage": _usage(result),
    }


def stream_chunks(
    request: ChatRequest, result: CallResult, renderer: ChatRenderer
) -> Iterator[JsonObject]:
    """The `chat.completion.chunk` objects of a streamed call (one choice): the role, the
    content in pieces, each tool call, the finish reason, then the usage when asked for."""
    (choice,) = result.choices
    head: JsonObject = {
        "id": f"chatcmpl-{result.call_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.model,
        "system_fingerprint": None,
    }

    def chunk(delta: JsonObject, finish: str | None = None, **extra: object) -> JsonObject:
        entry: JsonObject = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        entry.update(extra)  # type: ignore[arg-type]
        return {**head, "choices": [entry]}

    reply = choice.reply
    yield chunk({"role": "assistant", "content": ""})
    if reply.reasoning:
        yield chunk({"reasoning_content": reply.reasoning})
    text = reply.content or ""
    for start in range(0, len(text), STREAM_PIECE):
        yield chunk({"content": text[start : start + STREAM_PIECE]})
    for index, (call_id, name, arguments) in enumerate(reply.calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ]
            }
        )
    logprobs = _logprobs(choice, renderer) if request.logprobs else None
    yield chunk({}, choice.finish_reason, logprobs=logprobs)
    options = request.stream_options
    if options is not None and options.include_usage:
        yield {**head, "choices": [], "usage": _usage(result)}
