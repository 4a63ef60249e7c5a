"""Layer 2: the RL math: rewards, advantage estimators (GiGPO included), datums (the ONLY place
masks and shifts are built), loss settings and reference losses, metrics, sampler mismatch.

Pure: numpy and pydantic only, except `agentrl.algo.losses` (the reference losses, in torch,
for the local backend), which this package does not import.
"""
