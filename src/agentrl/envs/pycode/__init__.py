"""A Python-interpreter agent environment: exact math and algorithmic tasks, a real sandbox.

`pycode_tasks(split, n)` gives seeded tasks (six families, disjoint splits),
`pycode_tool_protocol()` the `run_python(code)` / `submit(answer)` tools,
`pycode_group_factory()` the `EnvGroupFactory`,
`run_sandboxed(code)` the sandbox on its own (kernel-enforced; `SandboxMode`), and
`solver_player` the scripted baseline. See docs/pycode.md.
"""

from agentrl.envs.pycode.env import (
    SYSTEM_PROMPT,
    PycodeEnv,
    PycodeOptions,
    PycodeReward,
    pycode_group_factory,
    pycode_tool_protocol,
)
from agentrl.envs.pycode.families import FAMILIES, Problem, canonical_answer, check_answer
from agentrl.envs.pycode.sandbox import (
    SandboxLimit,
    SandboxLimits,
    SandboxMode,
    SandboxResult,
    SandboxUnavailable,
    run_sandboxed,
    run_sandboxed_async,
)
from agentrl.envs.pycode.tasks import (
    SPLIT_FAMILIES,
    TRAIN_FAMILIES,
    UNSEEN_FAMILIES,
    problem_for,
    pycode_tasks,
    write_tasks,
)

__all__ = [
    "FAMILIES",
    "SPLIT_FAMILIES",
    "SYSTEM_PROMPT",
    "TRAIN_FAMILIES",
    "UNSEEN_FAMILIES",
    "Problem",
    "PycodeEnv",
    "PycodeOptions",
    "PycodeReward",
    "SandboxLimit",
    "SandboxLimits",
    "SandboxMode",
    "SandboxResult",
    "SandboxUnavailable",
    "canonical_answer",
    "check_answer",
    "problem_for",
    "pycode_group_factory",
    "pycode_tasks",
    "pycode_tool_protocol",
    "run_sandboxed",
    "run_sandboxed_async",
    "write_tasks",
]
