"""Learning signal without a model: a seeded imperfect policy and a hash reward.

The random-initialised tiny model never writes a tool call, so every group it plays is
degenerate (all rewards equal). Tests and benchmarks that need updates which really train
play `noisy_policy` through a `PolicySampler` (a listed action 70%, an impossible one 20%,
no call 10%; the toy env's: `agentrl.envs.toy.policies.noisy_toy_policy`), or score any replies with
`HashReward` (groups are almost never degenerate). No env is imported here: the policy is
given how to write a call and where the prompt lists the actions.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

from agentrl.core.types import Trajectory

__all__ = ["HashReward", "noisy_policy"]


def noisy_policy(
    seed: int,
    *,
    call_text: Callable[[str], str],
    actions_heading: str,
    prompt_seeded: bool = False,
) -> Callable[[str], str]:
    """A `policy(prompt_text) -> reply` that writes its calls with `call_text(action)` and reads
    the listed actions from the lines after the last `actions_heading` of the prompt.

    With `prompt_seeded=True` each reply is drawn from a generator seeded by the prompt text
    and how often it was asked, so the same trajectories are played whatever order concurrent
    rollouts ask in; otherwise one generator seeded by `seed` serves the calls in order."""
    shared = random.Random(seed)
    asked: dict[str, int] = {}

    def policy(prompt: str) -> str:
        rng = shared
        if prompt_seeded:
            count = asked.get(prompt, 0)
            asked[prompt] = count + 1
            rng = random.Random(zlib.crc32(prompt.encode()) * 1009 + count * 31 + seed)
        block = prompt.rsplit(actions_heading, 1)[-1].split("<|im_end|>", 1)[0]
        listed = block.strip().splitlines()
        roll = rng.random()
        if roll < 0.7 and listed:
            return call_text(rng.choice(listed).strip())
        if roll < 0.9:
            return call_text("fly to the moon")
        return "I think I am done."

    return policy


class HashReward:
    """A reward in [0, 1) from a hash of the reply tokens (a `RewardFn`): groups are (almost)
    never degenerate, so every group trains."""

    def __call__(self, trajectory: Trajectory) -> float:
        """The hash of the trajectory's completion tokens, scaled to [0, 1)."""
        data = b"".join(bytes(str(t.completion_tokens), "ascii") for t in trajectory.turns)
        return (zlib.crc32(data) % 1000) / 1000.0

    def turn_rewards(self, trajectory: Trajectory) -> tuple[float, ...]:
        """The reward, all on the last turn."""
        n = len(trajectory.turns)
        return tuple(self(trajectory) if i == n - 1 else 0.0 for i in range(n))
