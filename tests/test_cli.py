"""The `agentrl` command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl.cli import build_parser, main


def test_parser_requires_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        main(["generate"])  # --out is required
    assert "--out" in capsys.readouterr().err
    args = build_parser().parse_args(["generate", "--out", "x", "--valid-unseen", "3"])
    assert (args.train, args.valid_seen, args.valid_unseen, args.seed) == (0, 0, 3, 0)


def test_generate_writes_verified_games(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("textworld")
    from agentrl.envs.alfworld.data import find_games

    status = main(
        ["generate", "--out", str(tmp_path), "--valid-seen", "1", "--seed", "3", "--quiet"]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "wrote 1 games" in out and "valid_seen (1)" in out
    (game,) = find_games(tmp_path)
    assert game.split == "valid_seen"


def test_generate_fails_when_nothing_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("textworld")
    status = main(
        ["generate", "--out", str(tmp_path), "--train", "1", "--timeout", "0.01", "--quiet"]
    )
    assert status == 1
    assert "only 0 of 1 games" in capsys.readouterr().err
