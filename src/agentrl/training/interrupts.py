"""SIGINT and SIGTERM for long commands: the first stops cleanly, a second exits at once.

`run_until_signal(main)` runs a coroutine like `asyncio.run`, with SIGINT (Ctrl-C) and SIGTERM
(what `kill`, `timeout`, schedulers and containers send) both cancelling it: the trainer then
finishes or abandons the current step, saves a checkpoint of the last finished update and
re-raises; an evaluation keeps every finished episode. The handlers are installed even where
SIGINT is ignored (a job started in the background by a non-interactive shell), so such a job
can also be stopped with a checkpoint. A second signal while stopping exits immediately with
status 128 + the signal number, without waiting for a running step or save: what was already
written stays valid (checkpoints are renamed into place, a cut JSONL line is dropped on
resume).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any

__all__ = ["HANDLED_SIGNALS", "run_until_signal"]

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Signals that stop a command cleanly."""


def _exit_now(signum: int, _frame: object) -> None:
    """A signal after the first, once the event loop is gone: exit with 128 + its number."""
    print(f"{signal.Signals(signum).name} received again: exiting now", file=sys.stderr, flush=True)
    os._exit(128 + signum)


def run_until_signal(main: Coroutine[Any, Any, int]) -> int:
    """Run `main` to its exit status; a handled signal cancels it (status 128 + signal)."""
    received: list[int] = []

    async def guarded() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(signum: int) -> None:
            received.append(signum)
            name = signal.Signals(signum).name
            if len(received) == 1:
                print(
                    f"\n{name} received: stopping after saving what is finished "
                    f"(send it again to exit at once)",
                    file=sys.stderr,
                    flush=True,
                )
                task.cancel()
            else:
                print(f"{name} received again: exiting now", file=sys.stderr, flush=True)
                os._exit(128 + signum)

        for sig in HANDLED_SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            return await main
        finally:
            for sig in HANDLED_SIGNALS:
                loop.remove_signal_handler(sig)
                if received:  # stopping: a further signal during the shutdown exits at once
                    signal.signal(sig, _exit_now)

    try:
        return asyncio.run(guarded())
    except (KeyboardInterrupt, asyncio.CancelledError):
        if received:
            return 128 + received[0]
        raise
