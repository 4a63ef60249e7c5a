"""`agentrl learn --env NAME`: the learning recipe from the command line (short runs)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentrl.cli import build_parser, main

pytest.importorskip("torch")
pytest.importorskip("transformers")

SUMMARY = (
    r"env=toy-fetch random_success=[\d.]+ success_before=[\d.]+ success_after=[\d.]+ "
    r"updates=2 minutes=[\d.]+"
)


def test_learn_toy_fetch_short_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fetch"
    status = main(["learn", "--env", "toy-fetch", "--short", "--seed", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    lines = printed.strip().splitlines()
    assert re.fullmatch(SUMMARY, lines[-1]), lines[-1]
    assert sum("update" in line and "%" in line for line in lines) == 3  # before RL, 1, 2
    result = json.loads((out / "result.json").read_text())
    assert result["env"] == "toy-fetch" and result["setup"]["seed"] == 1
    assert [p["update"] for p in result["curve"]] == [0, 1, 2]
    assert result["extra"]["random_success_exact"] == pytest.approx(0.25)
    assert (out / "learning.png").stat().st_size > 0
    assert main(["learn", "--env", "toy-fetch", "--short", "--out", str(out)]) == 1
    assert "--overwrite" in capsys.readouterr().err  # an earlier run is not replaced silently


def test_learn_refuses_what_it_cannot_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["learn", "--env", "no-such-env", "--short", "--out", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    assert "unknown env 'no-such-env'" in err and "toy-fetch, toy-vault" in err
    assert main(["learn", "--env", "pycode", "--short", "--out", str(tmp_path / "b")]) == 1
    assert "lists no admissible actions" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["learn", "--env", "toy-fetch", "--updates", "0"])
    args = build_parser().parse_args(["learn", "--env", "toy-vault", "--updates", "3"])
    assert (args.env, args.updates, args.short, args.seed, args.out) == (
        "toy-vault",
        3,
        False,
        0,
        None,
    )
