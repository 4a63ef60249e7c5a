"""Environment plug-ins: `agentrl.envs.alfworld` (ALFWorld / TextWorld) and `agentrl.envs.toy`."""
