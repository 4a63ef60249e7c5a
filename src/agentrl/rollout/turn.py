"""One turn of one branch: sample (with retries), parse the reply, step the environment,
record the turn and extend the prompt by exactly the tokens that follow the completion.

The table of turn semantics (statuses, stop reasons, budgets) is in docs/tools-and-rollout.md;
`agentrl.rollout.engine` runs the turns of a group's branches concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from agentrl.backends.base import Sampler, SamplingParams
from agentrl.chat import ChatRenderer, ChatTemplateError
from agentrl.core.env import EnvGroup
from agentrl.core.errors import describe_exception
from agentrl.core.seeds import derive_seed
from agentrl.core.tokens import TokenBuffer
from agentrl.core.types import (
    Completion,
    CompletionStop,
    CutReply,
    EnvAction,
    EnvStep,
    Message,
    ParsedAction,
    ParseErrorKind,
    StepCounting,
    StopReason,
    TaskInfo,
    Turn,
    TurnStatus,
)
from agentrl.rollout.config import RolloutConfig, SamplerFailure
from agentrl.rollout.context import SummaryPolicy
from agentrl.tools import ToolProtocol, ToolResult, parse_with_dialect, tool_messages

__all__ = [
    "FIRST_REQUEST",
    "Branch",
    "Stepper",
    "TurnSetup",
    "play_turn",
    "request_seed",
    "sample",
    "turn_params",
    "vocab_size",
]

log = logging.getLogger(__name__)


def vocab_size(renderer: ChatRenderer) -> int | None:
    """How many token ids the renderer's tokenizer can decode (None: unknown; read once per
    renderer)."""
    return renderer.vocab_size


def _check_completion(completion: Completion, vocab_size: int | None) -> None:
    """Raise ValueError for a completion no trajectory may hold (bad ids, NaN logprobs)."""
    for token in completion.tokens:
        if not isinstance(token, int) or token < 0 or (vocab_size and token >= vocab_size):
            raise ValueError(
                f"the sampler returned token id {token!r}, outside the tokenizer's "
                f"range [0, {vocab_size})"
            )
    for logprob in completion.logprobs:
        if not math.isfinite(logprob) or logprob > 1e-3:
            raise ValueError(f"the sampler returned an invalid logprob {logprob!r}")


async def sample(
    sampler: Sampler,
    prompt: Sequence[int],
    num_samples: int,
    params: SamplingParams,
    config: RolloutConfig,
    vocab_size: int | None = None,
) -> list[Completion]:
    """Sample with retries and exponential backoff; raise SamplerFailure at the end.

    A malformed answer (wrong count, token ids outside `vocab_size`, non-finite logprobs)
    counts as a failed attempt, like an exception."""
    delay = config.retry_backoff
    last: BaseException | None = None
    for attempt in range(config.sampler_retries + 1):
        if attempt:
            await asyncio.sleep(delay)
            delay *= 2
        try:
            request = sampler.sample(prompt, num_samples, params)
            if config.sample_timeout is not None:
                completions = await asyncio.wait_for(request, config.sample_timeout)
            else:
                completions = await request
            if len(completions) != num_samples:
                raise ValueError(f"asked for {num_samples} completions, got {len(completions)}")
            for completion in completions:
                _check_completion(completion, vocab_size)
            return list(completions)
        except Exception as exc:
            last = exc
            log.warning("sampling failed (attempt %d): %s", attempt + 1, exc)
    raise SamplerFailure(
        f"sampling failed after {config.sampler_retries + 1} attempts: "
        f"{type(last).__name__}: {last}"
    )


STEP_GRACE = 10.0
"""Seconds a group torn down mid-step gives that step to finish before cancelling it."""


class Stepper:
    """Serialises a group's env steps and batches the actions of branches ready together."""

    def __init__(self, group: EnvGroup) -> None:
        self._group = group
        self._pending: dict[int, tuple[EnvAction, asyncio.Future[EnvStep]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def step(self, branch: int, action: EnvAction) -> EnvStep:
        future: asyncio.Future[EnvStep] = asyncio.get_running_loop().create_future()
        self._pending[branch] = (action, future)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await future

    async def stop(self, grace: float | None = None) -> None:
        """The group is being torn down (an interrupt, a stale group dropped): let a step still
        in flight finish for up to `grace` seconds (default `STEP_GRACE`), then cancel it, and
        wait until it has stopped, so the env is never closed under a running step. (Letting it
        finish keeps a worker shared by other groups in step with them; a step cut short ends
        its worker.)"""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        await asyncio.wait({task}, timeout=STEP_GRACE if grace is None else grace)
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _drain(self) -> None:
        batch: dict[int, tuple[EnvAction, asyncio.Future[EnvStep]]] = {}
        try:
            while self._pending:
                batch, self._pending = self._pending, {}
                actions = [batch[i][0] if i in batch else None for i in range(self._group.size)]
                try:
                    steps = await self._group.step(actions)
                    if len(steps) != len(actions):
                        raise RuntimeError(f"step() returned {len(steps)} steps for {len(actions)}")
                except Exception as exc:
                    for _, future in batch.values():
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for i, (_, future) in batch.items():
                        if not future.done():  # a branch cancelled meanwhile wants nothing
                            future.set_result(steps[i])
                batch = {}
        finally:
            for _, future in [*batch.values(), *self._pending.values()]:
                if not future.done():
                    future.set_exception(RuntimeError("environment stepping was interrupted"))


@dataclass
class Branch:
    """Mutable state of one live branch (private to the engine)."""

    index: int
    prompt: TokenBuffer
    """The current prompt; each turn records a prefix of it (one buffer per segment)."""
    current: EnvStep
    messages: list[Message]
    turns: list[Turn] = field(default_factory=list)
    env_steps: int = 0
    """Turns whose call reached the environment."""
    steps_used: int = 0
    """Steps counted against `max_env_steps` (see `RolloutConfig.step_counting`)."""
    completion_tokens: int = 0
    prefill: int = 0
    stop: StopReason | None = None
    error: str | None = None
    new_segment: bool = False
    """The current prompt was re-rendered (it starts a new segment)."""
    turn_starts: list[int] = field(default_factory=list)
    """Per turn played, the index in `messages` of its assistant message."""
    context_start: int = 0
    """The first turn the current prompt holds (earlier ones were cut by the context policy)."""
    summary: Message | None = None
    """The latest summary of the cut turns (a user message every later prompt holds after
    the first messages), with a summarizing context policy."""


@dataclass(frozen=True)
class TurnSetup:
    sampler: Sampler
    renderer: ChatRenderer
    protocol: ToolProtocol
    config: RolloutConfig
    group_id: str = ""
    """Keys the group's sampling seeds (see `RolloutConfig.sampling`)."""
    task: TaskInfo | None = None
    """The group's task (handed to the protocol with every tool result)."""


def _status(step: EnvStep | None) -> TurnStatus:
    """The turn's status: whether its action was valid comes first, the episode's end second
    (a non-admissible action on the step that ends the episode is NOT_ADMISSIBLE)."""
    if step is None:
        return TurnStatus.INVALID_FORMAT
    if step.won:
        return TurnStatus.WON
    if not step.admissible:
        return TurnStatus.NOT_ADMISSIBLE
    return TurnStatus.ENDED if step.done else TurnStatus.EXECUTED


def _env_stop(step: EnvStep | None) -> StopReason | None:
    """The stop reason the environment's own answer implies, if any."""
    if step is None:
        return None
    if step.error is not None:
        return StopReason.ENV_ERROR
    if step.won:
        return StopReason.WON
    if step.done:
        return StopReason.MAX_STEPS if step.info.get("truncated") is True else StopReason.ENV_DONE
    return None


def _budget_stop(
    branch: Branch, cut: bool, max_tokens: int, config: RolloutConfig
) -> StopReason | None:
    """The stop reason a budget implies after a turn the environment did not end."""
    if cut and max_tokens < config.max_assistant_tokens:
        return StopReason.TOKEN_BUDGET  # the trajectory budget, not the per-turn limit, cut it
    if cut and config.cut_reply is CutReply.END:
        return StopReason.ASSISTANT_TOKEN_LIMIT
    if branch.steps_used >= config.max_env_steps:
        return StopReason.MAX_STEPS
    return None


def _count_sampled(branch: Branch, completion: Completion, prompt_length: int) -> None:
    """Add a completion's tokens and its prompt's prefill (what the sampler reports, else the
    whole prompt) to the branch's counts."""
    prefill = completion.prefill_tokens
    branch.prefill += prompt_length if prefill is None else prefill
    branch.completion_tokens += len(completion.tokens)


async def play_turn(
    branch: Branch, completion: Completion, max_tokens: int, setup: TurnSetup, stepper: Stepper
) -> None:
    """Parse one completion, step the env, record the turn and extend the prompt."""
    config, renderer = setup.config, setup.renderer
    _count_sampled(branch, completion, len(branch.prompt))
    text = renderer.completion_text(completion.tokens)
    cut = completion.stop_reason is CompletionStop.LENGTH
    parsed = parse_with_dialect(setup.protocol, renderer.dialect, text, truncated=cut)
    step: EnvStep | None = None
    action = parsed.env_action
    if action is not None:
        try:
            step = await stepper.step(branch.index, action)
        except Exception as exc:
            step = EnvStep(observation="", error=describe_exception(exc))
        branch.env_steps += 1
    if step is not None or config.step_counting is StepCounting.TURNS:
        branch.steps_used += 1
    status = _status(step)
    stop = _env_stop(step)
    if step is not None and step.error is not None:
        branch.error = step.error
    if stop is None:
        stop = _budget_stop(branch, cut, max_tokens, config)
    turn = Turn(
        prompt_tokens=branch.prompt.prefix(),
        completion_tokens=completion.tokens,
        logprobs=completion.logprobs,
        assistant_text=text,
        parsed=parsed,
        status=status,
        env_step=step,
        state_key=branch.current.state_key,
        new_segment=branch.new_segment,
        dropped_turns=branch.context_start,
        policy_version=completion.policy_version,
    )
    branch.turn_starts.append(len(branch.messages))
    branch.messages.append(Message(role="assistant", content=text))
    summary: Turn | None = None
    if stop is None:
        result = ToolResult(
            status=status,
            step=step if step is not None else branch.current,
            parsed=parsed,
            env_steps=branch.steps_used,
            max_env_steps=config.max_env_steps,
            task=setup.task,
        )
        messages = tool_messages(setup.protocol, result)
        keep = _keep(branch, setup)
        policy = config.context
        if keep is not None and isinstance(policy, SummaryPolicy):
            try:
                summary = await _summary_turn(branch, messages, policy, setup)
            except SamplerFailure as exc:
                stop, branch.error = StopReason.SAMPLER_ERROR, str(exc)
        if stop is None:
            turn, stop = _extend(branch, turn, completion, step, messages, keep, setup)
    branch.turns.append(turn)
    if summary is not None:
        branch.turns.append(summary)
    branch.stop = stop


def _extend(
    branch: Branch,
    turn: Turn,
    completion: Completion,
    step: EnvStep | None,
    messages: Sequence[Message],
    keep: int | None,
    setup: TurnSetup,
) -> tuple[Turn, StopReason | None]:
    """Move the branch to its next prompt (extended, or rendered afresh as a new segment);
    `turn` with its tool messages, or a token-budget stop when that prompt would not fit."""
    extension, fresh, start = _next_prompt(branch, completion, messages, keep, setup)
    length = len(extension) + (0 if fresh else len(branch.prompt) + len(completion.tokens))
    if length >= setup.config.max_trajectory_tokens:
        return turn, StopReason.TOKEN_BUDGET
    turn = replace(turn, tool_message=messages[0], more_tool_messages=tuple(messages[1:]))
    branch.messages.extend(messages)
    if fresh:
        branch.prompt = TokenBuffer(extension)
    else:
        branch.prompt.extend(completion.tokens)
        branch.prompt.extend(extension)
    branch.new_segment = fresh
    branch.context_start = start
    if step is not None:
        branch.current = step
    return turn, None


def _keep(branch: Branch, setup: TurnSetup) -> int | None:
    """How many of the latest turns the next prompt keeps (None: no cut), from the context
    policy."""
    played = len(branch.turn_starts)
    keep = setup.config.context.keep(played - branch.context_start)
    if keep is not None and keep < 1:
        raise ValueError(f"{setup.config.context!r}.keep() returned {keep}; it must keep >= 1 turn")
    return keep


def _context(branch: Branch, start: int) -> list[Message]:
    """The conversation a fresh prompt renders: the first messages, the latest summary (if
    any) and the turns from `start` on."""
    head = branch.messages[: branch.turn_starts[0]]
    summary = [] if branch.summary is None else [branch.summary]
    return [*head, *summary, *branch.messages[branch.turn_starts[start] :]]


async def _summary_turn(
    branch: Branch, messages: Sequence[Message], policy: SummaryPolicy, setup: TurnSetup
) -> Turn | None:
    """Sample the summary a cut asks for (its own segment: the prompt as it stands, the turns
    about to be dropped included, and the policy's instruction); None when that prompt leaves
    no room in the trajectory budget (the cut then drops the turns unsummarized)."""
    config, renderer = setup.config, setup.renderer
    request = Message(role="user", content=policy.instruction)
    conversation = [*_context(branch, branch.context_start), *messages, request]
    prompt = renderer.segment_prompt(conversation, setup.protocol.tools)
    room = config.max_trajectory_tokens - len(prompt)
    if room < 2:
        return None
    params = turn_params(
        setup, min(policy.max_tokens, room - 1), branch.index, len(branch.turns), "summary"
    )
    (completion,) = await sample(setup.sampler, prompt, 1, params, config, vocab_size(renderer))
    _count_sampled(branch, completion, len(prompt))
    text = renderer.completion_text(completion.tokens)
    branch.summary = Message(role="user", content=policy.summary_prefix + text)
    return Turn(
        prompt_tokens=TokenBuffer(prompt).prefix(),
        completion_tokens=completion.tokens,
        logprobs=completion.logprobs,
        assistant_text=text,
        parsed=ParsedAction.failure(ParseErrorKind.NO_CALL, "a context summary (no call)"),
        status=TurnStatus.SUMMARY,
        env_step=None,
        new_segment=True,
        dropped_turns=branch.context_start,
        policy_version=completion.policy_version,
    )


def _next_prompt(
    branch: Branch,
    completion: Completion,
    messages: Sequence[Message],
    keep: int | None,
    setup: TurnSetup,
) -> tuple[list[int], bool, int]:
    """What the next prompt needs, whether it starts a new segment and the first turn it holds:
    the tokens that extend the last prompt after the completion (`ChatRenderer.continuation`),
    or a fresh render of the conversation where the template cannot be extended or the context
    policy cuts earlier turns (`keep`: the first messages, the latest summary and the turns it
    keeps)."""
    renderer = setup.renderer
    played = len(branch.turn_starts)
    if keep is None and not renderer.segments:
        try:
            return renderer.continuation(completion.tokens, messages), False, branch.context_start
        except ChatTemplateError as exc:
            log.warning("cannot extend the prompt (%s); starting a new segment", exc)
    start = branch.context_start if keep is None else max(branch.context_start, played - keep)
    prompt = renderer.segment_prompt([*_context(branch, start), *messages], setup.protocol.tools)
    return prompt, True, start


FIRST_REQUEST = "first"
"""The key of a group's first request (every branch's first reply at once); a later turn's
request is keyed `(branch, turn)`, `turn` the number of turns the branch has played."""


def request_seed(seed: int, group_id: str, *key: int | str) -> int:
    """The keyed seed of one sampling request of group `group_id` (`turn_params`):
    `derive_seed(seed, group_id, *key)`, `key` `(FIRST_REQUEST,)` or `(branch, turn)`. A
    scripted sampler reads the turn back from it (`agentrl.rollout.ReplySampler`)."""
    return derive_seed(seed, group_id, *key)


def turn_params(setup: TurnSetup, max_tokens: int, *key: int | str) -> SamplingParams:
    """The turn's sampling parameters; a base seed becomes the request's keyed seed
    `request_seed(seed, group_id, *key)`."""
    sampling = setup.config.sampling
    stops = sampling.stop_tokens or setup.renderer.stop_tokens
    seed = sampling.seed
    if seed is not None:
        seed = request_seed(seed, setup.group_id, *key)
    return replace(sampling, max_tokens=max_tokens, stop_tokens=stops, seed=seed)
