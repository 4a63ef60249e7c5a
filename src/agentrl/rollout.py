"""The rollout engine: K branches of one game, sampled concurrently, exact token prefixes.

`rollout_group` plays one game with K branches that share the first prompt: turn 1 is ONE
sampling request with `num_samples=K`; after that every live branch sends its own request,
branches concurrently (asyncio), each branch strictly in order. Every prompt is the previous
one extended by `ChatRenderer.extend`, so the tokens a trajectory trains on are the tokens it
sampled from. A branch ends when the environment reports a win or the end of the episode,
after `max_env_steps` steps (by default every assistant reply uses one, as in the published
recipe), or when the next prompt would reach the trajectory token budget (the prompt is never
sent). A reply cut at the per-turn assistant token limit is, by default, an invalid-format turn
and the episode goes on. Whether a turn is invalid never depends on whether it also ended the
episode. The full table of turn semantics is in docs/tools-and-rollout.md. A
sampler error is retried with exponential backoff, then recorded as `sampler_error` for that
branch; an environment failure is recorded as `env_error`. Neither fails the batch.

`rollout_batch` runs many games concurrently with a bound on the number of live groups.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from agentrl.algo.rewards import RewardFn, WinMinusInvalid
from agentrl.backends.base import Sampler, SamplingParams
from agentrl.chat import ChatRenderer, ChatTemplateError
from agentrl.core.env import EnvGroup, EnvGroupFactory
from agentrl.core.tokens import TokenBuffer
from agentrl.core.types import (
    Completion,
    CompletionStop,
    CutReply,
    EnvAction,
    EnvStep,
    Message,
    StepCounting,
    StopReason,
    TaskInfo,
    TokenCounts,
    Trajectory,
    TrajectoryGroup,
    Turn,
    TurnStatus,
)
from agentrl.tools import ToolProtocol, ToolResult, parse_with_dialect, tool_messages

__all__ = ["RolloutConfig", "SamplerFailure", "rollout_batch", "rollout_group"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RolloutConfig:
    """Budgets and sampling of one rollout (defaults: the published ALFWorld recipe)."""

    group_size: int = 8
    """Branches K per game."""
    max_env_steps: int = 50
    """Steps after which a branch ends with `max_steps` (what counts: `step_counting`)."""
    max_trajectory_tokens: int = 12_000
    """No prompt reaching this many tokens is sent; a completion may fill up to it."""
    max_assistant_tokens: int = 2_048
    """Completion tokens per turn; what a cut reply does: `cut_reply`."""
    step_counting: StepCounting = StepCounting.TURNS
    """`turns`: every assistant reply uses a step (the recipe); `env_calls`: only replies whose
    call reached the environment."""
    cut_reply: CutReply = CutReply.CONTINUE
    """`continue`: a reply cut at `max_assistant_tokens` is an invalid-format turn and the
    episode goes on (the recipe); `end`: it ends the branch (`assistant_token_limit`)."""
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """Temperature, top-p and seed; `max_tokens` is set per turn, empty `stop_tokens` are
    replaced by the renderer's."""
    sampler_retries: int = 3
    """Retries of a failed sampling request before the branch records `sampler_error`."""
    retry_backoff: float = 1.0
    """Seconds before the first retry; doubled for each further retry."""
    sample_timeout: float | None = None
    """Seconds one sampling request may take (None: no limit); a timeout counts as a failure."""

    def __post_init__(self) -> None:
        for name in (
            "group_size",
            "max_env_steps",
            "max_trajectory_tokens",
            "max_assistant_tokens",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"RolloutConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.sampler_retries < 0 or not 0 <= self.retry_backoff < math.inf:
            raise ValueError("RolloutConfig.sampler_retries and retry_backoff must be >= 0")
        if self.sample_timeout is not None and not 0 < self.sample_timeout < math.inf:
            raise ValueError(
                f"RolloutConfig.sample_timeout must be a positive number of seconds or None "
                f"(no limit), got {self.sample_timeout}"
            )


class SamplerFailure(RuntimeError):
    """Sampling failed after all retries."""


def _vocab_size(renderer: ChatRenderer) -> int | None:
    """How many token ids the renderer's tokenizer can decode (None: unknown)."""
    try:
        return len(renderer.tokenizer)  # type: ignore[arg-type]
    except TypeError:
        return None


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


async def _sample(
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


class _Stepper:
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
                        future.set_exception(exc)
                else:
                    for i, (_, future) in batch.items():
                        future.set_result(steps[i])
                batch = {}
        finally:
            for _, future in [*batch.values(), *self._pending.values()]:
                if not future.done():
                    future.set_exception(RuntimeError("environment stepping was interrupted"))


@dataclass
class _Branch:
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


@dataclass(frozen=True)
class _Setup:
    sampler: Sampler
    renderer: ChatRenderer
    protocol: ToolProtocol
    config: RolloutConfig


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
    branch: _Branch, cut: bool, max_tokens: int, config: RolloutConfig
) -> StopReason | None:
    """The stop reason a budget implies after a turn the environment did not end."""
    if cut and max_tokens < config.max_assistant_tokens:
        return StopReason.TOKEN_BUDGET  # the trajectory budget, not the per-turn limit, cut it
    if cut and config.cut_reply is CutReply.END:
        return StopReason.ASSISTANT_TOKEN_LIMIT
    if branch.steps_used >= config.max_env_steps:
        return StopReason.MAX_STEPS
    return None


async def _play_turn(
    branch: _Branch, completion: Completion, max_tokens: int, setup: _Setup, stepper: _Stepper
) -> None:
    """Parse one completion, step the env, record the turn and extend the prompt."""
    config, renderer = setup.config, setup.renderer
    prefill = completion.prefill_tokens
    branch.prefill += len(branch.prompt) if prefill is None else prefill
    branch.completion_tokens += len(completion.tokens)
    text = renderer.completion_text(completion.tokens)
    cut = completion.stop_reason is CompletionStop.LENGTH
    parsed = parse_with_dialect(setup.protocol, renderer.dialect, text, truncated=cut)
    step: EnvStep | None = None
    action = parsed.env_action
    if action is not None:
        try:
            step = await stepper.step(branch.index, action)
        except Exception as exc:
            step = EnvStep(observation="", error=f"{type(exc).__name__}: {exc}")
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
    )
    branch.messages.append(Message(role="assistant", content=text))
    if stop is None:
        result = ToolResult(
            status=status,
            step=step if step is not None else branch.current,
            parsed=parsed,
            env_steps=branch.steps_used,
            max_env_steps=config.max_env_steps,
        )
        messages = tool_messages(setup.protocol, result)
        extension, fresh = _next_prompt(branch, completion, messages, setup)
        length = len(extension) + (0 if fresh else len(branch.prompt) + len(completion.tokens))
        if length >= config.max_trajectory_tokens:
            stop = StopReason.TOKEN_BUDGET
        else:
            turn = replace(turn, tool_message=messages[0], more_tool_messages=messages[1:])
            branch.messages.extend(messages)
            if fresh:
                branch.prompt = TokenBuffer(extension)
            else:
                branch.prompt.extend(completion.tokens)
                branch.prompt.extend(extension)
            branch.new_segment = fresh
            if step is not None:
                branch.current = step
    branch.turns.append(turn)
    branch.stop = stop


def _next_prompt(
    branch: _Branch, completion: Completion, messages: Sequence[Message], setup: _Setup
) -> tuple[list[int], bool]:
    """What the next prompt needs and whether it starts a new segment: the tokens that extend
    the last prompt after the completion (`ChatRenderer.continuation`), or a fresh render of the
    conversation where the template cannot be extended."""
    renderer = setup.renderer
    if not renderer.segments:
        try:
            return renderer.continuation(completion.tokens, messages), False
        except ChatTemplateError as exc:
            log.warning("cannot extend the prompt (%s); starting a new segment", exc)
    return renderer.segment_prompt([*branch.messages, *messages], setup.protocol.tools), True


async def _run_branch(
    branch: _Branch, first: Completion, first_max: int, setup: _Setup, stepper: _Stepper
) -> None:
    """Play the branch's first completion, then sample and play turns until it stops."""
    config = setup.config
    completion, max_tokens = first, first_max
    while True:
        await _play_turn(branch, completion, max_tokens, setup, stepper)
        if branch.stop is not None:
            return
        max_tokens = min(
            config.max_assistant_tokens, config.max_trajectory_tokens - len(branch.prompt)
        )
        params = _params(setup, max_tokens)
        try:
            prompt = branch.prompt.prefix()
            (completion,) = await _sample(
                setup.sampler, prompt, 1, params, config, _vocab_size(setup.renderer)
            )
        except SamplerFailure as exc:
            branch.stop, branch.error = StopReason.SAMPLER_ERROR, str(exc)
            return


def _params(setup: _Setup, max_tokens: int) -> SamplingParams:
    sampling = setup.config.sampling
    stops = sampling.stop_tokens or setup.renderer.stop_tokens
    return replace(sampling, max_tokens=max_tokens, stop_tokens=stops)


def _trajectory(branch: _Branch, task: TaskInfo, group_id: str, reward_fn: RewardFn) -> Trajectory:
    assert branch.stop is not None
    last = branch.turns[-1] if branch.turns else None
    tokens = TokenCounts(
        prompt=len(last.prompt_tokens) if last else len(branch.prompt),
        completion=branch.completion_tokens,
        prefill=branch.prefill,
        total=len(last.prompt_tokens) + len(last.completion_tokens) if last else 0,
    )
    trajectory = Trajectory(
        turns=tuple(branch.turns),
        stop_reason=branch.stop,
        won=branch.stop is StopReason.WON,
        group_id=group_id,
        task=task,
        tokens=tokens,
        messages=tuple(branch.messages),
        branch=branch.index,
        error=branch.error,
    )
    return replace(trajectory, reward=float(reward_fn(trajectory)))


async def rollout_group(
    task: TaskInfo,
    *,
    env_factory: EnvGroupFactory,
    sampler: Sampler,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    config: RolloutConfig | None = None,
    reward_fn: RewardFn | None = None,
    group_id: str | None = None,
) -> TrajectoryGroup:
    """Play `config.group_size` branches of `task`; errors are recorded, never raised."""
    config = config or RolloutConfig()
    reward_fn = reward_fn or WinMinusInvalid()
    group_id = task.task_id if group_id is None else group_id
    size = config.group_size
    setup = _Setup(sampler, renderer, protocol, config)
    env = env_factory(task, size)

    def ended(reason: StopReason, error: str | None) -> TrajectoryGroup:
        branches = [
            _Branch(i, TokenBuffer(), EnvStep(observation=""), [], stop=reason, error=error)
            for i in range(size)
        ]
        trajectories = tuple(_trajectory(b, task, group_id, reward_fn) for b in branches)
        return TrajectoryGroup(group_id=group_id, task=task, trajectories=trajectories)

    try:
        try:
            initial = await env.reset()
            if len(initial) != size or initial[0].error is not None:
                raise RuntimeError(initial[0].error if initial else "reset() returned no steps")
        except Exception as exc:
            return ended(StopReason.ENV_ERROR, f"reset failed: {type(exc).__name__}: {exc}")
        messages = protocol.initial_messages(task, initial[0], config.max_env_steps)
        prompt = renderer.initial_prompt(messages, protocol.tools)
        room = config.max_trajectory_tokens - len(prompt)
        if room < 1:
            return ended(StopReason.TOKEN_BUDGET, None)
        max_tokens = min(config.max_assistant_tokens, room)
        try:
            params = _params(setup, max_tokens)
            firsts = await _sample(sampler, prompt, size, params, config, _vocab_size(renderer))
        except SamplerFailure as exc:
            return ended(StopReason.SAMPLER_ERROR, str(exc))
        stepper = _Stepper(env)
        branches = [
            _Branch(i, TokenBuffer(prompt), initial[i], list(messages)) for i in range(size)
        ]
        await asyncio.gather(
            *(
                _run_branch(b, c, max_tokens, setup, stepper)
                for b, c in zip(branches, firsts, strict=True)
            )
        )
    finally:
        try:
            await env.close()
        except Exception as exc:
            log.warning("closing the environment of %s failed: %s", group_id, exc)
    trajectories = tuple(_trajectory(b, task, group_id, reward_fn) for b in branches)
    return TrajectoryGroup(group_id=group_id, task=task, trajectories=trajectories)


async def rollout_batch(
    tasks: Sequence[TaskInfo],
    *,
    env_factory: EnvGroupFactory,
    sampler: Sampler,
    renderer: ChatRenderer,
    protocol: ToolProtocol,
    config: RolloutConfig | None = None,
    reward_fn: RewardFn | None = None,
    max_concurrent_groups: int = 8,
    on_group: Callable[[TrajectoryGroup], Awaitable[None] | None] | None = None,
    progress: bool = False,
) -> list[TrajectoryGroup]:
    """Roll out every task (one group each), at most `max_concurrent_groups` at a time.

    Groups come back in task order; `on_group` is called as each one finishes (e.g. to append
    it to a JSONL file, so nothing is lost on a crash); `progress` shows a tqdm bar.
    """
    if max_concurrent_groups < 1:
        raise ValueError(f"max_concurrent_groups must be >= 1, got {max_concurrent_groups}")
    limit = asyncio.Semaphore(max_concurrent_groups)
    bar = None
    if progress:
        from tqdm.auto import tqdm  # type: ignore[import-untyped]

        bar = tqdm(total=len(tasks), desc="rollout", unit="game")

    async def one(index: int, task: TaskInfo) -> TrajectoryGroup:
        async with limit:
            group = await rollout_group(
                task,
                env_factory=env_factory,
                sampler=sampler,
                renderer=renderer,
                protocol=protocol,
                config=config,
                reward_fn=reward_fn,
                group_id=f"{index}:{task.task_id}",
            )
        if on_group is not None:
            maybe = on_group(group)
            if maybe is not None:
                await maybe
        if bar is not None:
            bar.update(1)
        return group

    try:
        return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))
    finally:
        if bar is not None:
            bar.close()
