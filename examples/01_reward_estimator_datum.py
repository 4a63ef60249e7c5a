"""Assemble a reward, an advantage estimator and datums from one group of trajectories.

Run: python examples/01_reward_estimator_datum.py
"""

from dataclasses import replace

from agentrl import GroupMean, TrajectoryGroup, WinMinusInvalid, build_datums
from agentrl.core.types import TurnStatus
from agentrl.testing import synthetic_trajectory

S = TurnStatus
reward = WinMinusInvalid(win_reward=1.0, invalid_penalty=0.1)
branches = [
    synthetic_trajectory(completion_lens=(5, 4), statuses=[S.EXECUTED, S.WON], won=True),
    synthetic_trajectory(completion_lens=(6, 3), statuses=[S.NOT_ADMISSIBLE, S.ENDED], seed=1),
    synthetic_trajectory(completion_lens=(2,), statuses=[S.INVALID_FORMAT], seed=2),
]
scored = tuple(replace(t, reward=reward(t), branch=i) for i, t in enumerate(branches))
group = TrajectoryGroup(group_id="game-0", task=scored[0].task, trajectories=scored)
advantages = GroupMean().estimate([group])
datums = build_datums([group], advantages)

print("rewards:", [round(r, 3) for r in group.rewards])
print("advantages per turn:", advantages.groups[0].per_turn)
for datum in datums:
    print(
        f"datum: {len(datum)} positions, {datum.num_assistant_tokens} assistant tokens, "
        f"advantage on them: {sorted(set(datum.advantages[datum.mask > 0].round(3).tolist()))}"
    )
