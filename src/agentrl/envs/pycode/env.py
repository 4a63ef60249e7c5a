"""The Python-interpreter environment: `run_python(code)` and `submit(answer)` as function tools.

Each branch owns a private working directory. Every `run_python` call is a fresh sandboxed
interpreter (variables do not persist between calls; files written in the working directory
do), and its tool message is what the program printed, its errors and which limit stopped it.
`submit` ends the episode: won when the answer is exactly right. The reward is
`1[correct] - invalid_penalty * invalid turns - call_penalty * run_python calls` (`PycodeReward`).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from agentrl.config.names import SandboxMode
from agentrl.core.types import TaskInfo, Trajectory
from agentrl.envs.pycode.families import Problem, check_answer
from agentrl.envs.pycode.isolation import require_strict
from agentrl.envs.pycode.sandbox import SandboxLimits, run_sandboxed_async
from agentrl.envs.pycode.tasks import problem_for
from agentrl.tools import FunctionEnv, FunctionEnvGroup, FunctionTools, tool

__all__ = [
    "SYSTEM_PROMPT",
    "PycodeEnv",
    "PycodeOptions",
    "PycodeReward",
    "pycode_group_factory",
    "pycode_tool_protocol",
]

SYSTEM_PROMPT = (
    "You solve math and algorithmic problems with a Python interpreter.\n"
    "Tools:\n"
    "- run_python(code): runs a complete Python 3 program in a fresh sandboxed process "
    "(standard library only, no network, a few seconds of CPU) and returns what it printed. "
    "Variables do not persist between calls; print what you need.\n"
    "- submit(answer): submits your final answer, exactly (digits only for numbers), and ends "
    "the episode.\n"
    "Make exactly one tool call per turn."
)


@dataclass(frozen=True)
class PycodeOptions:
    """Sandbox limits, isolation and output sizes of the environment."""

    limits: SandboxLimits = field(default_factory=SandboxLimits)
    sandbox: SandboxMode = SandboxMode.STRICT
    """`STRICT` (kernel-enforced; refuses to start where the host cannot give it) or, asked
    for by name, `UNSAFE_PROCESSES` (see docs/pycode.md)."""
    packages: tuple[str, ...] = ()
    """Installed packages the code may import (strict mode), e.g. `("numpy", "sympy")`."""
    output_chars: int = 2000
    """Characters of stdout (and of stderr) a tool message keeps."""


class PycodeEnv(FunctionEnv):
    """One branch: a task, its working directory and the two tools."""

    def __init__(self, task: TaskInfo, options: PycodeOptions | None = None) -> None:
        self.task = task
        self.problem: Problem = problem_for(task.task_id)
        self.options = options or PycodeOptions()
        self.workdir = Path(tempfile.mkdtemp(prefix="agentrl-pycode-"))
        self.history: list[str] = []
        self.submitted: str | None = None

    def observation(self) -> str:
        """The question."""
        return self.problem.question

    def state_key(self) -> str:
        """A hash of the task and every call so far (equal histories, equal keys)."""
        digest = hashlib.sha256(self.task.task_id.encode())
        for item in self.history:
            digest.update(b"\0" + item.encode())
        return digest.hexdigest()[:16]

    @tool
    async def run_python(self, code: str) -> str:
        """Run a Python program in a fresh sandboxed interpreter and return its output.

        Args:
            code: A complete Python 3 program; print the values you need.
        """
        options = self.options
        result = await run_sandboxed_async(
            code, options.limits, workdir=self.workdir, mode=options.sandbox,
            packages=options.packages,
        )  # fmt: skip
        self.history.append(f"run:{code}\0{result.stdout}")
        return result.describe(self.options.output_chars)

    @tool
    def submit(self, answer: str) -> str:
        """Submit the final answer and end the episode.

        Args:
            answer: The exact answer (for a number, its digits only).
        """
        self.submitted = answer
        self.history.append(f"submit:{answer}")
        self.done = True
        self.won = check_answer(answer, self.problem.answer)
        self.score = 1.0 if self.won else 0.0
        return "Correct." if self.won else "Incorrect."

    async def close(self) -> None:
        """Remove the working directory."""
        shutil.rmtree(self.workdir, ignore_errors=True)


def pycode_tool_protocol(max_calls: int = 1) -> FunctionTools:
    """The environment's `FunctionTools` protocol (`max_calls` calls per turn)."""
    return PycodeEnv.protocol(SYSTEM_PROMPT, max_calls=max_calls)


def pycode_group_factory(options: PycodeOptions | None = None) -> _Factory:
    """An `EnvGroupFactory` of pycode groups. In strict mode it checks the host first and
    raises `SandboxUnavailable` (naming what is missing) rather than fail mid-rollout."""
    options = options or PycodeOptions()
    if options.sandbox is SandboxMode.STRICT:
        require_strict()
    return _Factory(options)


@dataclass(frozen=True)
class _Factory:
    options: PycodeOptions

    def __call__(self, task: TaskInfo, group_size: int) -> FunctionEnvGroup:
        return FunctionEnvGroup(task, group_size, lambda t: PycodeEnv(t, self.options))


@dataclass(frozen=True)
class PycodeReward:
    """`win_reward * 1[correct] - invalid_penalty * invalid turns - call_penalty * run_python
    calls` (defaults: 1, 0.1 and 0, i.e. the recipe's reward)."""

    win_reward: float = 1.0
    invalid_penalty: float = 0.1
    call_penalty: float = 0.0

    def __call__(self, trajectory: Trajectory) -> float:
        """The reward of one trajectory."""
        return sum(self.turn_rewards(trajectory))

    def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
        """Penalties on the turns that made them, the win bonus on the last turn."""
        rewards = []
        for turn in trajectory.turns:
            ran = turn.env_step is not None
            calls = sum(1 for c in turn.parsed.calls if ran and c.name == "run_python")
            invalid = self.invalid_penalty if turn.invalid else 0.0
            rewards.append(-invalid - self.call_penalty * calls)
        if trajectory.won and rewards:
            rewards[-1] += self.win_reward
        return tuple(rewards)
