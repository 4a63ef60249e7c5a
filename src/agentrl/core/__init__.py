"""Layer 0: frozen records (`types`), token buffers (`tokens`), env protocols (`env`), errors.

Everything else in agentrl may import from here; nothing here imports another room.
"""
