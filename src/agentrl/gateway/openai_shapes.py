"""The OpenAI chat-completions request as the gateway reads it, and its errors.

`ChatRequest` validates a request body: every field OpenAI's API defines is known (an unknown
name is a 400, as OpenAI answers); fields whose value the gateway cannot honour (a multi-token
`stop` string, `top_logprobs`, penalties, JSON response formats, audio, ...) are a 422 naming
the field. `GatewayError` carries the status and the OpenAI-style error body.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentrl.core.types import JsonObject

__all__ = [
    "ChatRequest",
    "ErrorCode",
    "GatewayError",
    "parse_request",
]

ErrorCode = Literal[
    "invalid_json",
    "unknown_field",
    "invalid_value",
    "unsupported_parameter",
    "unknown_session",
    "session_busy",
    "conversation_mismatch",
    "context_length_exceeded",
    "session_finished",
    "sampler_error",
    "not_found",
]
"""The gateway's error codes (`error.code` of the body); each is counted."""


class GatewayError(Exception):
    """A request the gateway refuses: `status` (400/404/409/413/422/502), `code` and a message
    that names the field or the session and says what to do."""

    def __init__(self, status: int, code: ErrorCode, message: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.code: ErrorCode = code
        self.message = message
        self.param = param

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"

    def body(self) -> JsonObject:
        """The OpenAI-style error body: `{"error": {message, type, param, code}}`."""
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {
            "error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}
        }


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StreamOptions(_Model):
    """`stream_options`: only `include_usage` is read."""

    include_usage: bool = False
    include_obfuscation: bool | None = None


# JSON values are `Any` here: pydantic cannot build a schema of agentrl's recursive Any.
class ChatRequest(_Model):
    """A `POST /v1/chat/completions` body (the OpenAI fields; see the module docstring)."""

    messages: list[dict[str, Any]] = Field(min_length=1)
    model: str = "agentrl"
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    n: int = Field(default=1, ge=1, le=64)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    reasoning_effort: str | None = None
    verbosity: str | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    response_format: dict[str, Any] | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict[str, Any] | None = None
    safety_identifier: str | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: Any = None

    @property
    def completion_limit(self) -> int | None:
        """`max_completion_tokens`, else `max_tokens` (None: the gateway's default)."""
        return self.max_completion_tokens or self.max_tokens

    @property
    def stops(self) -> tuple[str, ...]:
        """The `stop` strings."""
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def check_supported(self) -> None:
        """Raise a 422 `GatewayError` for a value the gateway cannot honour."""

        def refuse(param: str, why: str) -> GatewayError:
            return GatewayError(422, "unsupported_parameter", f"{param}: {why}", param)

        if self.top_logprobs:
            raise refuse("top_logprobs", "the gateway returns each sampled token's logprob only")
        for name in ("frequency_penalty", "presence_penalty"):
            if getattr(self, name):
                raise refuse(name, "penalties would change the sampled distribution; use 0")
        if self.logit_bias:
            raise refuse("logit_bias", "biases would change the sampled distribution")
        kind = (self.response_format or {}).get("type", "text")
        if kind != "text":
            raise refuse("response_format", f"only type 'text' is supported, got {kind!r}")
        if self.modalities and set(self.modalities) != {"text"}:
            raise refuse("modalities", "only text is supported")
        for name in ("audio", "prediction", "web_search_options", "functions", "function_call"):
            if getattr(self, name):
                raise refuse(name, "not supported (use `tools` for function calling)")
        if self.stream and self.n > 1:
            raise refuse("n", "streaming answers one choice; use n=1 with stream=true")
        if self.tool_choice not in (None, "auto", "none"):
            raise refuse("tool_choice", "only 'auto' and 'none' are supported")


def parse_request(raw: bytes) -> ChatRequest:
    """The request of a body, or a 400 `GatewayError` (malformed JSON, unknown field, bad
    value) / 422 (unsupported value) naming the field."""
    try:
        request = ChatRequest.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        if first["type"] == "json_invalid":
            raise GatewayError(
                400, "invalid_json", f"the body is not valid JSON: {first['msg']}"
            ) from None
        if first["type"] == "extra_forbidden":
            raise GatewayError(
                400,
                "unknown_field",
                f"unrecognized request argument supplied: {where}",
                where,
            ) from None
        raise GatewayError(400, "invalid_value", f"{where}: {first['msg']}", where) from None
    request.check_supported()
    return request
