"""Core records of agentrl: messages, tool calls, completions, turns and trajectories.

Every record is a frozen dataclass. Nothing here imports torch, transformers, textworld,
alfworld or pytrio: these types are the shared language between environments, the rollout
engine, reward functions, advantage estimators, datums and training backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, TypeAlias

from agentrl.core.tokens import Tokens

JsonValue: TypeAlias = str | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None
"""A JSON-compatible value (used only at boundaries: tool schemas, records on disk)."""

JsonObject: TypeAlias = dict[str, JsonValue]
"""A JSON object, e.g. a tool's JSON schema."""

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


class StopReason(StrEnum):
    """Why a trajectory ended."""

    WON = "won"
    """The environment reported success."""
    ENV_DONE = "env_done"
    """The environment ended the episode without success."""
    MAX_STEPS = "max_steps"
    """The maximum number of environment steps was reached."""
    TOKEN_BUDGET = "token_budget"
    """The next prompt would exceed the trajectory token budget (truncated)."""
    ASSISTANT_TOKEN_LIMIT = "assistant_token_limit"
    """A completion hit the per-turn assistant token limit (cut off)."""
    SAMPLER_ERROR = "sampler_error"
    """Sampling failed after retries."""
    ENV_ERROR = "env_error"
    """The environment failed (crash, timeout, dead worker)."""

    @property
    def truncated(self) -> bool:
        """True when the episode was cut by a budget rather than ended by the environment."""
        return self in (
            StopReason.MAX_STEPS,
            StopReason.TOKEN_BUDGET,
            StopReason.ASSISTANT_TOKEN_LIMIT,
        )

    @property
    def is_error(self) -> bool:
        """True when the episode ended because of an infrastructure failure."""
        return self in (StopReason.SAMPLER_ERROR, StopReason.ENV_ERROR)


class CompletionStop(StrEnum):
    """Why the sampler stopped generating one completion."""

    STOP = "stop"
    """A stop token (or stop sequence) was generated."""
    LENGTH = "length"
    """The maximum number of new tokens was reached."""


class TurnStatus(StrEnum):
    """What happened to the environment after one assistant turn."""

    WON = "won"
    """The action was executed and the task is complete."""
    ENDED = "ended"
    """The action was executed and the episode ended without success."""
    INVALID_FORMAT = "invalid_format"
    """The tool call could not be parsed; the environment state was not advanced."""
    NOT_ADMISSIBLE = "not_admissible"
    """The call parsed but the environment could not execute the action (also when the
    environment ended the episode on that step: `Turn.ended` keeps that fact)."""
    EXECUTED = "executed"
    """The action was executed; the episode goes on."""
    SUMMARY = "summary"
    """A summary the context policy asked for before cutting the prompt
    (`agentrl.rollout.context.SummarizedTurns`): no action, the environment was not stepped."""

    @property
    def is_invalid(self) -> bool:
        """True for turns that count as invalid actions in the reward."""
        return self in (TurnStatus.INVALID_FORMAT, TurnStatus.NOT_ADMISSIBLE)


class StepCounting(StrEnum):
    """Which assistant turns use one of the episode's `max_env_steps` steps."""

    TURNS = "turns"
    """Every assistant reply, whether its tool call parsed or not (the published recipe)."""
    ENV_CALLS = "env_calls"
    """Only replies whose call parsed and reached the environment (admissible or not)."""


class CutReply(StrEnum):
    """What a reply cut at the per-turn assistant token limit does to the episode."""

    CONTINUE = "continue"
    """It is an invalid-format turn and the episode goes on (the published recipe)."""
    END = "end"
    """It ends the branch with `assistant_token_limit` (and still counts as invalid)."""


class ParseErrorKind(StrEnum):
    """Typed reasons a tool call could not be parsed."""

    NO_CALL = "no_call"
    MULTIPLE_CALLS = "multiple_calls"
    UNKNOWN_TOOL = "unknown_tool"
    MISSING_ACTION = "missing_action"
    EMPTY_ACTION = "empty_action"
    MULTILINE_ACTION = "multiline_action"
    MALFORMED = "malformed"
    TEXT_AFTER_CALL = "text_after_call"
    TRUNCATED = "truncated"
    INVALID_ARGUMENTS = "invalid_arguments"
    """A call's arguments do not match its tool's schema (missing, mistyped or extra)."""


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool by the assistant."""

    name: str
    arguments: Mapping[str, str]
    """Each argument as the model wrote it: a string value verbatim, any other JSON value as
    its JSON text (some dialects, e.g. Qwen's XML form, carry no types); a function tool
    decodes and validates them against its schema (`agentrl.tools.functions`)."""


EnvAction: TypeAlias = str | tuple[ToolCall, ...]
"""What one branch's turn sends the environment: the command of a text-command protocol
(`CommandTool`), or the turn's validated tool calls, in order (function tools)."""


@dataclass(frozen=True)
class Message:
    """One chat message, as text."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None
    """Tool name, for role="tool" messages."""


@dataclass(frozen=True)
class ParseError:
    """Why an assistant message is not a valid tool call."""

    kind: ParseErrorKind
    detail: str


@dataclass(frozen=True)
class ParsedAction:
    """The result of parsing an assistant message: an action or a typed error, never both."""

    action: str | None
    """The command (text-command protocols), or a one-line summary of the calls."""
    error: ParseError | None = None
    call: ToolCall | None = None
    calls: tuple[ToolCall, ...] = ()
    """The turn's validated calls, in order, when the protocol sends calls to the environment
    (function tools); empty for a text-command protocol, whose environment gets `action`."""

    def __post_init__(self) -> None:
        if (self.action is None) == (self.error is None):
            raise ValueError("ParsedAction needs exactly one of `action` and `error`")
        if self.calls and self.error is not None:
            raise ValueError("a failed ParsedAction carries no calls")

    @property
    def ok(self) -> bool:
        """True when an action was parsed."""
        return self.action is not None

    @property
    def env_action(self) -> EnvAction | None:
        """What the environment receives for this turn: the calls, else the command."""
        return self.calls if self.calls else self.action

    @classmethod
    def failure(cls, kind: ParseErrorKind, detail: str) -> ParsedAction:
        """Build a failed parse."""
        return cls(action=None, error=ParseError(kind=kind, detail=detail))


@dataclass(frozen=True)
class Completion:
    """One sampled completion: its tokens, the sampler's logprob of each, and why it stopped."""

    tokens: tuple[int, ...]
    logprobs: tuple[float, ...]
    stop_reason: CompletionStop
    prefill_tokens: int | None = None
    """Prompt tokens the sampler actually computed for this completion (not served from a
    prefix cache), when it reports them; None means unknown and the rollout counts the whole
    prompt. For a `num_samples=K` request a sampler reports the shared prefill on one
    completion (the others 0) or splits it."""
    weights_version: int | None = None
    """The sampler's own count of weight changes when it generated this completion, reported
    by samplers whose weights change under them (the local one: `ModelEngine.version`);
    None: the weights the sampler was created with."""
    policy_version: int | None = None
    """The policy version (training updates completed) whose weights sampled this completion,
    set by `agentrl.backends.versions.VersionedSampler`; None: not tracked."""

    def __post_init__(self) -> None:
        if self.prefill_tokens is not None and self.prefill_tokens < 0:
            raise ValueError(f"Completion.prefill_tokens must be >= 0, got {self.prefill_tokens}")
        if len(self.tokens) != len(self.logprobs):
            raise ValueError(
                f"Completion has {len(self.tokens)} tokens but {len(self.logprobs)} logprobs"
            )


@dataclass(frozen=True)
class EnvStep:
    """What one environment branch reports after a reset or a step."""

    observation: str
    score: float = 0.0
    done: bool = False
    won: bool = False
    admissible: bool = True
    """Whether the action of this step was executable (True after a reset)."""
    admissible_actions: tuple[str, ...] = ()
    """Actions executable from the new state."""
    state_key: str | None = None
    """An identifier of the environment state (equal states give equal keys), for step-level
    credit assignment; None when the environment does not provide one."""
    error: str | None = None
    """Set when the branch failed (crash, timeout); the branch is then finished."""
    info: Mapping[str, str | int | float | bool] = field(default_factory=dict)
    """Extra scalar facts the environment reports (logged, never used as state)."""
    outputs: tuple[str, ...] = ()
    """One result text per call of the step, in call order (function-tool environments: each
    becomes one tool message); empty for text-command environments."""

    @property
    def finished(self) -> bool:
        """True when this branch can take no further action."""
        return self.done or self.won or self.error is not None


@dataclass(frozen=True)
class TaskInfo:
    """What a task (one game) is, independently of any branch."""

    task_id: str
    """Stable identifier of the game (e.g. its path relative to the data root)."""
    task_type: str = "unknown"
    description: str = ""
    split: str = "train"
    path: str | None = None
    """Where the game file lives, when there is one."""


@dataclass(frozen=True)
class Turn:
    """One assistant turn: the exact prompt, the sampled completion and what it caused."""

    prompt_tokens: Tokens
    """The prompt: a tuple, or (from the rollout) a prefix of the trajectory's one shared token
    buffer, so that prompts are stored once (see `agentrl.core.tokens`)."""
    completion_tokens: tuple[int, ...]
    logprobs: tuple[float, ...]
    """Sampler logprob of each completion token."""
    assistant_text: str
    parsed: ParsedAction
    status: TurnStatus
    env_step: EnvStep | None
    """The environment's answer; None when the state was not advanced (invalid format)."""
    tool_message: Message | None = None
    """The tool message appended after this turn (None for the last turn of a trajectory)."""
    state_key: str | None = None
    """State key of the environment state this turn acted from (anchor state)."""
    new_segment: bool = False
    """The prompt was re-rendered, not extended from the previous turn (the chat template
    cannot be extended): this turn starts a new training segment (datum)."""
    more_tool_messages: tuple[Message, ...] = ()
    """Tool messages after `tool_message` when the turn made several calls (one per call)."""
    dropped_turns: int = 0
    """Earlier turns of the episode that this turn's prompt left out (a context policy cut
    them, `agentrl.rollout.context`); 0: the prompt holds the whole history."""
    policy_version: int | None = None
    """The policy version (training updates completed) whose weights sampled this turn's
    completion; its logprobs are that version's behaviour logprobs. None: not tracked (a
    sampler used outside a trainer)."""
    segment_reason: str | None = None
    """Why this turn's prompt starts a new segment when something other than the template or a
    context policy decided it (the gateway: the agent edited its history); None otherwise."""

    @property
    def summary(self) -> bool:
        """True for a context-policy summary turn (status `summary`): sampled and trained, but
        not an action; episode statistics leave it out."""
        return self.status is TurnStatus.SUMMARY

    @property
    def tool_messages(self) -> tuple[Message, ...]:
        """Every tool message appended after this turn, in call order."""
        first = () if self.tool_message is None else (self.tool_message,)
        return (*first, *self.more_tool_messages)

    def __post_init__(self) -> None:
        if len(self.completion_tokens) != len(self.logprobs):
            raise ValueError(
                f"Turn has {len(self.completion_tokens)} completion tokens "
                f"but {len(self.logprobs)} logprobs"
            )

    @property
    def invalid(self) -> bool:
        """True when this turn counts as an invalid action (whether or not it also ended the
        episode: a non-admissible action on the last step is still invalid)."""
        return self.status.is_invalid

    @property
    def ended(self) -> bool:
        """True when the environment reported the end of the episode (won or done) after it."""
        step = self.env_step
        return step is not None and (step.done or step.won)


@dataclass(frozen=True)
class TokenCounts:
    """Token accounting of one trajectory."""

    prompt: int = 0
    """Length of the last prompt sent (the longest)."""
    completion: int = 0
    """Sum of sampled completion tokens."""
    prefill: int = 0
    """Tokens the sampler had to prefill, summed over turns (with cache reuse, fewer than
    the sum of prompt lengths)."""
    total: int = 0
    """Length of the full token sequence (last prompt + last completion)."""


@dataclass(frozen=True)
class Trajectory:
    """One episode of one branch."""

    turns: tuple[Turn, ...]
    stop_reason: StopReason
    won: bool
    group_id: str
    task: TaskInfo
    reward: float = 0.0
    tokens: TokenCounts = field(default_factory=TokenCounts)
    messages: tuple[Message, ...] = ()
    """The conversation as text (system, user, assistant and tool messages)."""
    branch: int = 0
    error: str | None = None
    """Error text when stop_reason is an error."""
    reward_error: str | None = None
    """Why no reward could be computed (a judge failed or gave no score): such a trajectory is
    left out of its group's statistics like an infrastructure error, never scored 0."""
    reward_detail: str | None = None
    """What the reward function said about the trajectory (a judge's reply), kept in the
    record and shown by the viewer."""
    placement: str | None = None
    """Where its env group was played (`node ... host ... pid ...` under the process and Ray
    executors, `agentrl.executors`); None: in the trainer's process."""

    @property
    def usable(self) -> bool:
        """Whether the trajectory is evidence about the policy: it has turns, did not end in an
        infrastructure error and got a reward."""
        return bool(self.turns) and not self.stop_reason.is_error and self.reward_error is None

    @property
    def full_tokens(self) -> tuple[int, ...]:
        """The whole token sequence: the last prompt followed by the last completion (of the
        last segment, when the template could not be extended)."""
        if not self.turns:
            return ()
        last = self.turns[-1]
        return last.prompt_tokens + last.completion_tokens

    @property
    def truncated(self) -> bool:
        """True when a budget, not the environment, ended the episode."""
        return self.stop_reason.truncated

    @property
    def invalid_actions(self) -> int:
        """Turns with an unparseable tool call or an action the environment could not run."""
        return sum(1 for turn in self.turns if turn.invalid)

    @property
    def env_steps(self) -> int:
        """Turns that reached the environment (a parsed action, admissible or not)."""
        return sum(1 for turn in self.turns if turn.env_step is not None)


@dataclass(frozen=True)
class TrajectoryGroup:
    """The K trajectories of one game, all started from the same initial state."""

    group_id: str
    task: TaskInfo
    trajectories: tuple[Trajectory, ...]

    @property
    def rewards(self) -> tuple[float, ...]:
        """Reward of each trajectory, in branch order."""
        return tuple(t.reward for t in self.trajectories)
