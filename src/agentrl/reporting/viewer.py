"""`agentrl view`: one self-contained HTML file to browse an evaluation, game by game.

The page embeds the episodes as JSON and renders them with inline JavaScript (no network, no
external files): a filterable list of games (split, outcome, text search), and for the
selected game its task, outcome, the initial prompt and a table of turns (action, status,
environment feedback, the assistant's raw text). A function-tool turn shows each of its calls
in order: the tool name, every argument (code as preformatted text) and that call's output.
The selected game is kept in the URL hash (`page.html#valid_seen%2F...%230`), so a link opens
a given game. All text is inserted with
`textContent`, never as HTML.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from agentrl.algo.metrics import SplitSummary
from agentrl.core.types import JsonObject, JsonValue
from agentrl.store.eval_records import EvalFile, read_eval_file, summaries_in_order
from agentrl.store.records import TrajectoryRecord

__all__ = ["render_html", "viewer_data", "write_viewer"]


def _episode(episode_id: str, r: TrajectoryRecord) -> JsonObject:
    first_user = next((m.content for m in r.messages if m.role == "user"), "")
    system = next((m.content for m in r.messages if m.role == "system"), "")
    turns: list[JsonValue] = []
    last = len(r.turns) - 1
    for i, turn in enumerate(r.turns):
        error = turn.parse_error
        turns.append(
            {
                "n": i + 1,
                "action": turn.action,
                "error": f"{error.value}: {turn.parse_detail or ''}" if error else None,
                "status": turn.status.value,
                "observation": turn.observation,
                "env_error": r.error if i == last and r.stop_reason == "env_error" else None,
                "text": turn.assistant_text,
                "cut": turn.dropped_turns if turn.new_segment else 0,
                "calls": [
                    {"name": c.name, "arguments": dict(c.arguments), "output": c.output}
                    for c in turn.calls or ()
                ],
            }
        )
    return {
        "id": episode_id,
        "split": r.split,
        "task_id": r.task_id,
        "task_type": r.task_type,
        "description": r.description,
        "won": r.won,
        "reward": r.reward,
        "stop_reason": r.stop_reason.value,
        "error": r.error,
        "reward_error": r.reward_error,
        "reward_detail": r.reward_detail,
        "invalid": r.invalid_actions,
        "env_steps": r.env_steps,
        "tokens": r.tokens.total,
        "system": system,
        "first_user": first_user,
        "turns": turns,
    }


def _summary(s: SplitSummary) -> JsonObject:
    return {
        "split": s.split,
        "episodes": s.stats.episodes,
        "success": s.stats.success_rate,
        "reward": s.stats.reward_mean,
        "steps": s.stats.mean_env_steps,
        "invalid": s.stats.mean_invalid_actions,
        "format": s.stats.tool_format_rate,
        "admissible": s.stats.admissible_action_rate,
    }


def viewer_data(data: EvalFile) -> JsonObject:
    """What the page embeds: label, summaries and one entry per episode."""
    summaries = summaries_in_order(data.effective_summaries().values())
    return {
        "label": data.label,
        "source": data.path.name,
        "summaries": [_summary(s) for s in summaries],
        "episodes": [_episode(e.episode_id, e.record) for e in data.episodes],
    }


def _embed(value: JsonObject) -> str:
    """JSON safe inside a <script> element (no `</script>`, no HTML-significant characters)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def _asset(name: str) -> str:
    return resources.files("agentrl.reporting").joinpath("viewer_assets", name).read_text("utf-8")


def render_html(data: EvalFile) -> str:
    """The complete, self-contained HTML page for an eval file."""
    title = f"agentrl eval: {data.label}".replace("&", "&amp;").replace("<", "&lt;")
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        f"<title>{title}</title>\n<style>\n{_asset('viewer.css')}</style>\n</head>\n<body>\n"
        f"{_asset('viewer.html')}"
        f"<script id='agentrl-data' type='application/json'>{_embed(viewer_data(data))}</script>\n"
        f"<script>\n{_asset('viewer.js')}</script>\n</body>\n</html>\n"
    )


def write_viewer(eval_path: Path, out_path: Path | None = None, *, overwrite: bool = True) -> Path:
    """Write the viewer page for `eval_path` (default: next to it, `.html`); return its path."""
    eval_path = Path(eval_path)
    out = Path(out_path) if out_path is not None else eval_path.with_suffix(".html")
    if out.resolve() == eval_path.resolve():
        raise ValueError(f"{out}: the viewer would overwrite the eval file itself")
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} already exists")
    html = render_html(read_eval_file(eval_path))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return out
