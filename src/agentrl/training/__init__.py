"""Layer 7: training: the `Trainer` (the update loop), where an update's groups come from
(`pipeline`: off-policy, dynamic sampling), streaming within an update, checkpoints, resume,
the preflight budget check, clean interrupts, and the parts a config builds (`build`, `recipe`).
"""
