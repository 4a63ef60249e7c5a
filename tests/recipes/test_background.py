"""`agentrl.recipes.background.BackgroundJob`: a function in a spawned process, its output in a
log, its value (or its error, naming the log) back in the parent, stopped by `close()`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentrl.recipes.background import BackgroundJob, BackgroundJobError


def square_loudly(x: int) -> int:
    print(f"squaring {x}")
    return x * x


def fail(message: str) -> None:
    raise ValueError(message)


def sleep_forever() -> None:
    print("sleeping", flush=True)
    time.sleep(600)


def test_the_value_comes_back_and_the_output_goes_to_the_log(tmp_path: Path) -> None:
    job = BackgroundJob.start(square_loudly, (7,), log=tmp_path / "logs" / "job.log")
    try:
        assert job.result() == 49
    finally:
        job.close()
    assert job.log.read_text().strip() == "squaring 7"
    assert not job.process.is_alive()


def test_an_error_is_raised_in_the_parent_naming_the_log(tmp_path: Path) -> None:
    job = BackgroundJob.start(fail, ("the disk is full",), log=tmp_path / "job.log")
    try:
        with pytest.raises(BackgroundJobError) as raised:
            job.result()
    finally:
        job.close()
    assert str(tmp_path / "job.log") in str(raised.value)
    assert "ValueError: the disk is full" in str(raised.value)
    assert "ValueError: the disk is full" in job.log.read_text()


def test_close_stops_a_job_that_still_runs(tmp_path: Path) -> None:
    job = BackgroundJob.start(sleep_forever, (), log=tmp_path / "job.log")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
        job.log.is_file() and "sleeping" in job.log.read_text()
    ):
        time.sleep(0.1)
    assert job.process.is_alive()
    job.close()
    assert not job.process.is_alive()
