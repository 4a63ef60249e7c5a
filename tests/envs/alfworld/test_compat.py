"""The TextWorld fix for CPython 3.13+: same text as stock TextWorld, applied in workers.

Set `AGENTRL_EXTRA_PYTHONS` (paths separated by `os.pathsep`) to interpreters that have the
`alfworld` extra installed, e.g. a Python 3.13 venv, to also play a game under each of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.paths import SRC

pytest.importorskip("textworld")

from agentrl.envs.alfworld.compat import (
    apply_textworld_compat,
    derive_eval_symbol,
    textworld_compat_applied,
)
from agentrl.envs.alfworld.workers import CallWorker


def test_eval_symbol_sees_context_variables() -> None:
    from textworld.envs.pddl.textgen import EvalSymbol

    symbol = EvalSymbol("o.indefinite + ' ' + o.name")
    context = {"variables": {"o": SimpleNamespace(name="mug 1", indefinite="a")}}
    (value,) = derive_eval_symbol(symbol, context)
    assert value.symbol == "a mug 1"
    symbol.context = {"variables": {"o": SimpleNamespace(name="cup 2", indefinite="a")}}
    assert derive_eval_symbol(symbol)[0].symbol == "a cup 2"


def test_patch_is_idempotent() -> None:
    apply_textworld_compat()
    assert textworld_compat_applied()
    assert apply_textworld_compat() is False


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="stock TextWorld only works before 3.13")
def test_patched_text_equals_stock_text(alfworld_games, monkeypatch: pytest.MonkeyPatch) -> None:
    from textworld.envs.pddl import textgen

    from agentrl.envs.alfworld.engine import TextWorldEngine

    game = str(min(alfworld_games.games, key=lambda g: g.path.stat().st_size).path)
    plan = __import__("json").loads(Path(game).read_text())["walkthrough"]

    def play() -> list[tuple[str, tuple[str, ...]]]:
        engine = TextWorldEngine(game)
        steps = [engine.reset()] + [engine.step(c) for c in plan[:3]]
        return [(s.observation, s.admissible_commands) for s in steps]

    apply_textworld_compat()
    patched = play()

    def stock(self, context=None):  # TextWorld 1.7.0's own body
        context = context or self.context
        locals().update(context["variables"])
        value = eval(self.expression)
        return [textgen.TerminalSymbol(value)]

    monkeypatch.setattr(textgen.EvalSymbol, "derive", stock)
    monkeypatch.setattr(TextWorldEngine, "__init__", _init_without_patch(TextWorldEngine))
    assert play() == patched


def _init_without_patch(cls):  # TextWorldEngine.__init__ minus the patch call
    import textworld
    from alfworld.agents.environment import alfred_tw_env

    def init(self, game_file: str) -> None:
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        wrappers = [alfred_tw_env.AlfredDemangler(shuffle=False), alfred_tw_env.AlfredInfos]
        self._env = textworld.start(game_file, infos, wrappers=wrappers)
        self._game_file = game_file

    return init


async def test_patch_is_applied_inside_workers(alfworld_games) -> None:
    game = str(alfworld_games.games[0].path)
    worker = CallWorker()
    try:
        target = "agentrl.envs.alfworld.compat:textworld_compat_applied"
        assert await worker.call(target, (), 60) is False  # a fresh process is unpatched
        result = await worker.call("agentrl.envs.alfworld.generate:verify_game", (game,), 120)
        assert result.won
        assert await worker.call(target, (), 60) is True
    finally:
        await worker.close()


def _extra_pythons() -> list[str]:
    raw = os.environ.get("AGENTRL_EXTRA_PYTHONS", "")
    return [p for p in raw.split(os.pathsep) if p]


@pytest.mark.slow
@pytest.mark.parametrize("python", _extra_pythons() or [pytest.param("", marks=pytest.mark.skip)])
def test_group_plays_under_other_pythons(alfworld_games, python: str) -> None:
    """Under e.g. CPython 3.13: stock TextWorld fails, our group (workers included) plays."""
    game = alfworld_games.games[0]
    script = textwrap.dedent(
        f"""
        import asyncio, json, sys
        from agentrl.envs.alfworld.group import AlfworldEnvGroup
        from agentrl.envs.alfworld.planner import PlannerPolicy, play_group
        task = {game.to_task()!r}

        async def main():
            group = AlfworldEnvGroup(task, 2)
            try:
                results = await play_group(group, PlannerPolicy())
            finally:
                await group.close()
            print(json.dumps([r.won for r in results]), sys.version_info[:2])

        asyncio.run(main())
        """
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    run = subprocess.run(
        [python, "-c", "from agentrl.types import TaskInfo\n" + script],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.startswith("[true, true]"), run.stdout
