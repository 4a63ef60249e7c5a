"""Where a judge's replies come from: any agentrl `Sampler`, or an OpenAI-compatible endpoint.

A `JudgeModel` answers a list of chat messages with text. `SamplerJudgeModel` renders them with
a chat template (no tools) and samples one completion through any `Sampler` (the local model,
vLLM, PyTRIO, Tinker or a scripted one); `OpenAIJudgeModel` posts them to
`{base_url}/chat/completions` of any OpenAI-compatible server with the standard library's HTTP
client (in a worker thread), so no extra package is needed.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from agentrl.backends.base import Sampler, SamplingParams
from agentrl.chat import ChatRenderer
from agentrl.chat.base import ChatTokenizer
from agentrl.core.types import Message

__all__ = ["JudgeModel", "JudgeModelError", "OpenAIJudgeModel", "SamplerJudgeModel"]


class JudgeModelError(RuntimeError):
    """The judge model could not answer (a transport failure or a malformed response)."""


@runtime_checkable
class JudgeModel(Protocol):
    """Answers chat messages with text."""

    async def reply(self, messages: Sequence[Message]) -> str:
        """The model's reply to `messages`."""
        ...


@dataclass
class SamplerJudgeModel:
    """A judge model behind an agentrl `Sampler`: `messages` rendered with `tokenizer`'s chat
    template (or `chat_template`), one completion sampled with `params`."""

    sampler: Sampler
    tokenizer: ChatTokenizer
    params: SamplingParams = field(
        default_factory=lambda: SamplingParams(temperature=0.0, max_tokens=512)
    )
    chat_template: str | None = None
    _renderer: ChatRenderer | None = field(default=None, init=False, repr=False)

    def renderer(self) -> ChatRenderer:
        """The judge's renderer (no tools), built on first use."""
        if self._renderer is None:
            self._renderer = ChatRenderer(self.tokenizer, (), chat_template=self.chat_template)
        return self._renderer

    async def reply(self, messages: Sequence[Message]) -> str:
        """One sampled completion of the rendered `messages`, as text."""
        renderer = self.renderer()
        prompt = renderer.initial_prompt(messages)
        params = self.params
        if not params.stop_tokens:
            params = replace(params, stop_tokens=renderer.stop_tokens)
        completions = await self.sampler.sample(prompt, 1, params)
        if len(completions) != 1:
            raise JudgeModelError(f"the sampler returned {len(completions)} completions, not 1")
        return renderer.completion_text(completions[0].tokens)


@dataclass(frozen=True)
class OpenAIJudgeModel:
    """A judge model behind an OpenAI-compatible chat-completions endpoint."""

    base_url: str
    """E.g. `http://127.0.0.1:8000/v1` (`/chat/completions` is appended)."""
    model: str
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    timeout: float = 60.0
    """Seconds per request."""

    def _post(self, body: bytes) -> str:
        url = self.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise JudgeModelError(f"{url} answered HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise JudgeModelError(f"{url} could not be reached: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise JudgeModelError(f"{url} answered with invalid JSON: {exc}") from exc
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise JudgeModelError(f"{url} answered without choices[0].message.content") from exc
        if not isinstance(content, str):
            raise JudgeModelError(f"{url} answered with a non-text message content")
        return content

    async def reply(self, messages: Sequence[Message]) -> str:
        """The endpoint's reply to `messages` (the request runs in a worker thread)."""
        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": m.role, "content": m.content} for m in messages],
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
            }
        ).encode("utf-8")
        return await asyncio.to_thread(self._post, body)
