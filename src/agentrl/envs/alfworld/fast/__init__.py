"""Fast ALFWorld engine: TextWorld's `PddlEnv` behaviour, byte for byte, at a fraction of the cost.

`FastAlfworldEngine` loads a game once (one PDDL translation, one fast-downward library whose
state registry serves every branch) and hands out `FastBranch` objects: `reset()`,
`step(command)`, `copy()`, `plan()`, `state_key()`. `TextWorldBranch` is the reference: the stock
engine built as ALFWorld's official text environment builds it.
"""

from agentrl.envs.alfworld.fast.branch import NOTHING_HAPPENS, FastBranch
from agentrl.envs.alfworld.fast.engine import FastAlfworldEngine
from agentrl.envs.alfworld.fast.fd import GameLoadError
from agentrl.envs.alfworld.fast.game import FastGame
from agentrl.envs.alfworld.fast.grammar import GrammarError
from agentrl.envs.alfworld.fast.records import Branch, BranchStep, facts_state_key
from agentrl.envs.alfworld.fast.reference import TextWorldBranch

__all__ = [
    "NOTHING_HAPPENS",
    "Branch",
    "BranchStep",
    "FastAlfworldEngine",
    "FastBranch",
    "FastGame",
    "GameLoadError",
    "GrammarError",
    "TextWorldBranch",
    "facts_state_key",
]
