"""A seeded imperfect player of the toy env (learning signal without a model)."""

from __future__ import annotations

from collections.abc import Callable

from agentrl.envs.toy.plain import ACTIONS_HEADING
from agentrl.envs.toy.tools import toy_tool_protocol
from agentrl.testing.signal import noisy_policy

__all__ = ["noisy_toy_policy"]


def noisy_toy_policy(seed: int, *, prompt_seeded: bool = False) -> Callable[[str], str]:
    """A `policy(prompt_text) -> reply` for the toy env's tool protocol: a listed action 70%,
    an impossible one 20%, no call 10% (`agentrl.testing.signal.noisy_policy`)."""
    protocol = toy_tool_protocol()
    return noisy_policy(
        seed,
        call_text=protocol.call_text,
        actions_heading=ACTIONS_HEADING,
        prompt_seeded=prompt_seeded,
    )
