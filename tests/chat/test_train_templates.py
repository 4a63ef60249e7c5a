"""`agentrl train --base-model tiny --chat-template ...` on the toy env, per family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrl.cli import main
from tests.helpers.paths import SHARED

FOLDER = SHARED / "chat_templates"
RUNS = [
    ("qwen3-0.6b.jinja", [], "qwen_json", "safe_rewrite"),
    ("llama-3.1-8b-instruct.jinja", ["--tool-dialect", "llama3_json"], "llama3_json", "extends"),
    ("gpt-oss-120b.jinja", ["--tool-dialect", "harmony"], "harmony", "segments"),
]


@pytest.mark.parametrize(("template", "flags", "dialect", "extension"), RUNS, ids=lambda v: v)
def test_two_updates_with_a_family_template(
    template: str, flags: list[str], dialect: str, extension: str, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    if not (FOLDER / template).is_file():
        pytest.skip(f"{FOLDER / template} not found")
    run_dir = tmp_path / "run"
    argv = ["train", "--env", "toy", "--backend", "local", "--base-model", "tiny"]
    argv += ["--device", "cpu", "--max-assistant-tokens", "8", "--max-trajectory-tokens", "1500"]
    argv += ["--max-steps", "2", "--games-per-batch", "1", "--group-size", "2", "--lora-rank", "4"]
    argv += ["--run-dir", str(run_dir), "--chat-template", str(FOLDER / template), *flags]
    assert main(argv) == 0
    chat = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["chat"]
    assert (chat["dialect"], chat["extension"]) == (dialect, extension)
    assert (run_dir / "checkpoints" / "update-0002.json").is_file()


def test_bad_flags_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flag, value in (("--tool-dialect", "nope"), ("--chat-template", "missing.jinja")):
        with pytest.raises(SystemExit) as exc:
            main(["train", flag, value, "--run-dir", str(tmp_path)])
        assert exc.value.code == 2
        assert flag in capsys.readouterr().err
