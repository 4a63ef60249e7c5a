"""One function run in a process of its own beside the caller's work (the demo's learning phase
beside its ALFWorld phases): its output goes to a log file, so it never interleaves with the
caller's progress bars and tables; its return value comes back through a pipe; it ends with its
parent, whatever ends the parent.

    job = BackgroundJob.start(work, (arg,), log=out / "work.log")
    ...                                    # the caller's own work
    value = job.result()                   # waits; an error names the log
    job.close()                            # in a `finally`: stops it if still running
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Generic, TypeVar

__all__ = ["BackgroundJob", "BackgroundJobError"]

T = TypeVar("T")


class BackgroundJobError(RuntimeError):
    """The background function raised or its process died; the message names the log."""


@dataclass
class BackgroundJob(Generic[T]):
    """A spawned process running one function (see the module docstring)."""

    process: BaseProcess
    results: Connection
    log: Path
    started: float

    @classmethod
    def start(
        cls, function: Callable[..., T], args: tuple[Any, ...], *, log: Path
    ) -> BackgroundJob[T]:
        """Start `function(*args)` in a fresh (spawned) process, its stdout and stderr to `log`.
        `function` and `args` must be picklable (a module-level function)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        context = multiprocessing.get_context("spawn")
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(
            target=_child,
            args=(function, args, log, sender, os.getpid()),
            daemon=True,
            name=f"agentrl-background-{getattr(function, '__name__', 'job')}",
        )
        process.start()
        sender.close()
        return cls(process, receiver, log, time.perf_counter())

    def result(self) -> T:
        """Wait for the function's return value; `BackgroundJobError` when it raised or its
        process died first (the message names the log and the error's last lines)."""
        try:
            kind, value = self.results.recv()
        except EOFError:
            self.process.join()
            raise BackgroundJobError(
                f"the background job died (exit code {self.process.exitcode}); see {self.log}"
            ) from None
        self.process.join()
        if kind == "error":
            raise BackgroundJobError(f"the background job failed; see {self.log}:\n{value}")
        return value  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop the process if it still runs (an interrupt or an error in the caller)."""
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=10)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self.results.close()


def _child(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    log: Path,
    sender: Connection,
    parent: int,
) -> None:
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    with (
        log.open("w", encoding="utf-8", buffering=1) as stream,
        redirect_stdout(stream),
        redirect_stderr(stream),
    ):
        try:
            value = function(*args)
        except BaseException as exc:  # reported to the parent, which raises it
            text = "".join(traceback.format_exception(exc))
            stream.write(text)
            sender.send(("error", text[-2000:]))
            return
    sender.send(("value", value))


def _exit_with_parent(parent: int) -> None:
    """The parent died without stopping this process (e.g. SIGKILL): exit too."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)
