"""One episode of an agent that talks to the gateway: its calls become a `Trajectory`, exactly.

The agent re-sends its whole history on every call. The gateway compares that history, message
by message (`agentrl.gateway.messages.MessageKey`), with the session's last call plus the reply
it sampled then:

- **it extends** (the last call's messages, then one of the sampled replies unchanged, then new
  tool or user messages, with the same tools): the new prompt is the last prompt + the sampled
  completion + `ChatRenderer.continuation` of the new messages. The history is never
  re-tokenized, so every prompt is a token prefix of the next and the sampled tokens are the
  trained tokens, as in `agentrl.rollout`.
- **it is the last call again** (a retry, e.g. after a dropped connection): the reply that was
  never received is discarded and the same prompt is sampled again.
- **anything else** (a message dropped, edited or re-ordered, a reply rewritten, the tools
  changed, or a template that cannot be extended): the call renders its history afresh and
  starts a new segment (`Turn.new_segment`, the reason in `Turn.segment_reason`); each segment
  trains as its own datum, still only on sampled tokens.
- a history whose first messages (up to the first user message) differ from the session's
  first call is another episode: refused with 409 (`conversation_mismatch`).

With `n > 1` the next call says which choice the agent kept: that one is the turn, the others
are dropped (counted in `discarded_choices`); when no call follows, choice 0 is the turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentrl.backends.base import Sampler, SamplingParams
from agentrl.chat import ChatRenderer, ChatTemplateError
from agentrl.chat.dialects.base import DialectParse
from agentrl.core.seeds import derive_seed
from agentrl.core.tokens import TokenBuffer, Tokens
from agentrl.core.types import (
    Completion,
    CompletionStop,
    EnvStep,
    JsonObject,
    Message,
    ParsedAction,
    ParseErrorKind,
    StopReason,
    TaskInfo,
    TokenCounts,
    Trajectory,
    Turn,
    TurnStatus,
)
from agentrl.gateway.messages import (
    AssistantReply,
    MessageKey,
    arguments_json,
    message_key,
    to_messages,
)
from agentrl.gateway.openai_shapes import ChatRequest, GatewayError
from agentrl.rollout.config import RolloutConfig, SamplerFailure
from agentrl.rollout.turn import sample
from agentrl.tools.toolset import call_summary

__all__ = ["CallResult", "Choice", "GatewaySession", "RendererCache"]


class RendererCache:
    """One `ChatRenderer` per distinct tool list, built by `make(tools)` on first use."""

    def __init__(self, make: Callable[[tuple[JsonObject, ...]], ChatRenderer]) -> None:
        self._make = make
        self._renderers: dict[str, ChatRenderer] = {}

    def get(self, tools: tuple[JsonObject, ...]) -> ChatRenderer:
        """The renderer for `tools`."""
        key = tools_key(tools)
        renderer = self._renderers.get(key)
        if renderer is None:
            renderer = self._renderers[key] = self._make(tools)
        return renderer


def tools_key(tools: Sequence[JsonObject]) -> str:
    """Canonical text of a tool list (equal lists, equal keys)."""
    return json.dumps(list(tools), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Choice:
    """One sampled completion of a call and the assistant message it answers with."""

    completion: Completion
    text: str
    parsed: DialectParse
    reply: AssistantReply

    @property
    def finish_reason(self) -> str:
        """OpenAI's `finish_reason`: tool_calls, length or stop."""
        if self.completion.stop_reason is CompletionStop.LENGTH:
            return "length"
        return "tool_calls" if self.reply.calls else "stop"


@dataclass(frozen=True)
class CallResult:
    """What one call sampled."""

    call_id: str
    prompt_tokens: int
    choices: tuple[Choice, ...]


@dataclass
class _Pending:
    """The last call, until the next one says which of its choices the agent kept."""

    prompt: Tokens
    choices: tuple[Choice, ...]
    keys: tuple[MessageKey, ...]
    messages: tuple[Message, ...]
    tools: str
    new_segment: bool
    segment_reason: str | None


@dataclass
class _Counts:
    completion: int = 0
    prefill: int = 0
    discarded_choices: int = 0
    segments: int = 0


@dataclass
class GatewaySession:
    """The state of one episode's calls (see the module docstring); `trajectory()` at the end.

    `config` gives the budgets (`max_trajectory_tokens`, `max_assistant_tokens`), the default
    sampling (temperature, top_p, a base seed keyed per call) and the sampler retries.
    """

    session_id: str
    sampler: Sampler
    renderers: RendererCache
    config: RolloutConfig
    task: TaskInfo | None = None
    group_id: str = ""
    branch: int = 0
    turns: list[Turn] = field(default_factory=list)
    stop: StopReason | None = None
    """Set when the gateway ended the episode (token budget, sampler failure)."""
    error: str | None = None
    finished: bool = False
    counts: _Counts = field(default_factory=_Counts)
    _head: tuple[MessageKey, ...] | None = None
    _buffer: TokenBuffer | None = None
    _pending: _Pending | None = None
    _sampled: dict[MessageKey, str] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _calls: int = 0

    # -- one call --------------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> CallResult:
        """Sample the reply to `request`, recording the turn (409 while another call of this
        session runs, or for another episode's history; 413 over the token budget)."""
        if self._lock.locked():
            raise GatewayError(
                409,
                "session_busy",
                f"session {self.session_id!r} already has a call in flight; an episode's calls "
                "must be sequential (use one session per episode)",
            )
        async with self._lock:
            if self.finished or self.stop is not None:
                why = self.stop.value if self.stop is not None else "finished"
                raise GatewayError(
                    409, "session_finished", f"session {self.session_id!r} has ended ({why})"
                )
            return await self._complete(request)

    async def _complete(self, request: ChatRequest) -> CallResult:
        keys = tuple(message_key(m, i) for i, m in enumerate(request.messages))
        if keys[-1].role == "assistant":
            raise GatewayError(
                422,
                "unsupported_parameter",
                "messages: the last message is an assistant message; continuing a reply is not "
                "supported (end the history with a user or tool message)",
                "messages",
            )
        tools = tuple(request.tools or ())
        renderer = self.renderers.get(tools)
        messages = to_messages(keys, renderer.dialect, self._sampled)
        self._check_head(keys)
        stops = self._stop_tokens(request, renderer)  # checked before the session changes
        prompt, new_segment, reason = self._prompt(keys, messages, tools, renderer)
        if len(prompt) >= self.config.max_trajectory_tokens:
            self.stop = StopReason.TOKEN_BUDGET
            raise GatewayError(
                413,
                "context_length_exceeded",
                f"the prompt has {len(prompt)} tokens; the session's budget is "
                f"{self.config.max_trajectory_tokens} (max_trajectory_tokens)",
                "messages",
            )
        params = self._params(request, stops, len(prompt))
        try:
            completions = await sample(
                self.sampler, prompt, request.n, params, self.config, renderer.vocab_size
            )
        except SamplerFailure as exc:
            self.stop, self.error = StopReason.SAMPLER_ERROR, str(exc)
            raise GatewayError(502, "sampler_error", str(exc)) from None
        self._calls += 1
        call_id = f"{self.session_id}-{self._calls}"
        choices = tuple(
            self._choice(c, renderer, tools, f"{call_id}-{k}") for k, c in enumerate(completions)
        )
        for choice in choices:
            self._sampled[choice.reply.key] = choice.text
        self._pending = _Pending(
            prompt, choices, keys, tuple(messages), tools_key(tools), new_segment, reason
        )
        return CallResult(call_id, len(prompt), choices)

    def _check_head(self, keys: tuple[MessageKey, ...]) -> None:
        first_user = next((i for i, k in enumerate(keys) if k.role == "user"), len(keys) - 1)
        head = keys[: first_user + 1]
        if self._head is None:
            self._head = head
        elif head != self._head:
            raise GatewayError(
                409,
                "conversation_mismatch",
                f"session {self.session_id!r} began with other first messages (system prompt "
                "and task); this history belongs to another episode: start a new session",
                "messages",
            )

    def _prompt(
        self,
        keys: tuple[MessageKey, ...],
        messages: list[Message],
        tools: tuple[JsonObject, ...],
        renderer: ChatRenderer,
    ) -> tuple[Tokens, bool, str | None]:
        """The call's prompt, whether it starts a segment, and why (see the module docstring)."""
        pending = self._pending
        if pending is None:
            self._buffer = TokenBuffer(renderer.initial_prompt(messages, tools))
            return self._buffer.prefix(), False, None
        if keys == pending.keys and tools_key(tools) == pending.tools:  # a retry
            self.counts.discarded_choices += len(pending.choices)
            return pending.prompt, pending.new_segment, pending.segment_reason
        kept, reason = self._kept(pending, keys, tools)
        after = messages[len(pending.keys) + 1 :]
        choice = pending.choices[0] if kept is None else kept
        self.counts.discarded_choices += len(pending.choices) - 1
        self._finish_turn(pending, choice, after if kept is not None else ())
        if kept is not None and not renderer.segments:
            try:
                extension = renderer.continuation(kept.completion.tokens, after)
            except ChatTemplateError as exc:
                reason = f"the chat template cannot extend this history ({exc})"
            else:
                assert self._buffer is not None
                self._buffer.extend(kept.completion.tokens)
                self._buffer.extend(extension)
                return self._buffer.prefix(), False, None
        elif kept is not None:
            reason = "the chat template cannot be extended (every call renders afresh)"
        self.counts.segments += 1
        self._buffer = TokenBuffer(renderer.segment_prompt(messages, tools))
        return self._buffer.prefix(), True, reason

    def _kept(
        self, pending: _Pending, keys: tuple[MessageKey, ...], tools: tuple[JsonObject, ...]
    ) -> tuple[Choice | None, str]:
        """The choice this history extends, or None and why it does not."""
        n = len(pending.keys)
        if tools_key(tools) != pending.tools:
            return None, "the request's tools differ from the last call's"
        for i, (old, new) in enumerate(zip(pending.keys, keys, strict=False)):
            if old != new:
                return None, f"messages[{i}] ({new.role}) differs from the last call's"
        if len(keys) <= n:
            return None, f"the history has {len(keys)} messages, the last call had {n}"
        sent = keys[n]
        kept = next((c for c in pending.choices if c.reply.key == sent), None)
        if kept is None:
            return None, f"messages[{n}] ({sent.role}) is not the reply the gateway sampled"
        later = [i for i in range(n + 1, len(keys)) if keys[i].role == "assistant"]
        if later:
            return None, f"messages[{later[0]}] is an assistant message the gateway did not sample"
        if len(keys) == n + 1:
            return None, "no message follows the sampled reply"
        return kept, ""

    def _stop_tokens(self, request: ChatRequest, renderer: ChatRenderer) -> tuple[int, ...]:
        """The turn's stop tokens: the renderer's (or the config's) and the request's `stop`
        strings, each of which must be one token (a 422 otherwise)."""
        stops = list(self.config.sampling.stop_tokens or renderer.stop_tokens)
        for text in request.stops:
            ids = renderer.encode(text)
            if len(ids) != 1:
                raise GatewayError(
                    422,
                    "unsupported_parameter",
                    f"stop: {text!r} is {len(ids)} tokens of this tokenizer; only single-token "
                    "stop strings are supported (the trained tokens must be the sampled ones)",
                    "stop",
                )
            stops.append(ids[0])
        return tuple(dict.fromkeys(stops))

    def _params(self, request: ChatRequest, stops: tuple[int, ...], prompt: int) -> SamplingParams:
        """The call's sampling parameters: the request's, else the config's; a base seed is
        keyed by the session's group, branch and turn."""
        base = self.config.sampling
        limit = request.completion_limit or self.config.max_assistant_tokens
        max_tokens = min(
            limit, self.config.max_assistant_tokens, self.config.max_trajectory_tokens - prompt
        )
        seed = request.seed
        if seed is None and base.seed is not None:
            seed = derive_seed(base.seed, self.group_id, self.branch, len(self.turns))
        return SamplingParams(
            temperature=base.temperature if request.temperature is None else request.temperature,
            top_p=base.top_p if request.top_p is None else request.top_p,
            max_tokens=max_tokens,
            stop_tokens=stops,
            seed=seed,
        )

    @staticmethod
    def _choice(
        completion: Completion, renderer: ChatRenderer, tools: tuple[JsonObject, ...], prefix: str
    ) -> Choice:
        text = renderer.completion_text(completion.tokens)
        cut = completion.stop_reason is CompletionStop.LENGTH
        parsed = renderer.dialect.parse(text, max_calls=None, truncated=cut)
        if parsed.ok and parsed.calls:
            calls = tuple(
                (f"call_{prefix}-{i}", c.name, arguments_json(c, tools))
                for i, c in enumerate(parsed.calls)
            )
            reply = AssistantReply(parsed.content.strip() or None, calls, parsed.reasoning)
        else:
            split = renderer.dialect.split_reasoning(text)
            reasoning, body = split if isinstance(split, tuple) else (None, text)
            reply = AssistantReply(body.strip(), (), reasoning)
        return Choice(completion, text, parsed, reply)

    # -- turns and the trajectory ----------------------------------------------------------

    def _finish_turn(
        self,
        pending: _Pending,
        choice: Choice,
        after: Sequence[Message],
        ended: bool = False,
        won: bool = False,
    ) -> None:
        """Record the pending call as a turn with the choice kept and the messages after it."""
        completion = choice.completion
        prefill = completion.prefill_tokens
        self.counts.prefill += len(pending.prompt) if prefill is None else prefill
        self.counts.completion += len(completion.tokens)
        calls = choice.parsed.calls if choice.parsed.ok else ()
        if calls:
            parsed = ParsedAction(action=call_summary(calls), calls=calls)
        elif (
            choice.parsed.error is not None
            and choice.parsed.error.kind is not ParseErrorKind.NO_CALL
        ):
            parsed = ParsedAction(action=None, error=choice.parsed.error)
        else:
            parsed = ParsedAction.failure(ParseErrorKind.NO_CALL, "a text reply (no call)")
        outputs = tuple(m.content for m in after if m.role == "tool")
        step: EnvStep | None = None
        if ended:
            step = EnvStep(observation="", done=True, won=won)
            status = TurnStatus.WON if won else TurnStatus.ENDED
        elif not parsed.ok:
            status = TurnStatus.INVALID_FORMAT
        else:
            status = TurnStatus.EXECUTED
            if calls and outputs:
                step = EnvStep(observation="\n".join(outputs), outputs=outputs)
        self.turns.append(
            Turn(
                prompt_tokens=pending.prompt,
                completion_tokens=completion.tokens,
                logprobs=completion.logprobs,
                assistant_text=choice.text,
                parsed=parsed,
                status=status,
                env_step=step,
                tool_message=after[0] if after else None,
                more_tool_messages=tuple(after[1:]),
                new_segment=pending.new_segment,
                policy_version=completion.policy_version,
                segment_reason=pending.segment_reason,
            )
        )
        self._pending = None

    def trajectory(
        self, *, won: bool = False, reward: float = 0.0, error: str | None = None
    ) -> Trajectory:
        """The episode as a `Trajectory` (the session is finished): the last call's choice 0 is
        its last turn. `error` (the agent failed) makes it an `env_error`."""
        self.finished = True
        pending = self._pending
        if pending is not None:
            self.counts.discarded_choices += len(pending.choices) - 1
            self._finish_turn(pending, pending.choices[0], (), ended=error is None, won=won)
            conversation = [*pending.messages, Message("assistant", pending.choices[0].text)]
        else:
            conversation = []
        if error is not None:
            stop = StopReason.ENV_ERROR
        elif self.stop is not None:
            stop = self.stop
        else:
            stop = StopReason.WON if won else StopReason.ENV_DONE
        last = self.turns[-1] if self.turns else None
        tokens = TokenCounts(
            prompt=len(last.prompt_tokens) if last else 0,
            completion=self.counts.completion,
            prefill=self.counts.prefill,
            total=len(last.prompt_tokens) + len(last.completion_tokens) if last else 0,
        )
        task = self.task or TaskInfo(task_id=self.session_id)
        return Trajectory(
            turns=tuple(self.turns),
            stop_reason=stop,
            won=stop is StopReason.WON,
            group_id=self.group_id or task.task_id,
            task=task,
            reward=reward,
            tokens=tokens,
            messages=tuple(conversation),
            branch=self.branch,
            error=error if error is not None else self.error,
        )
