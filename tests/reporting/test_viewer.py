"""`agentrl view`: the HTML page, checked in headless Chromium (skipped when absent)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from agentrl.reporting.records import episode_id, read_eval_file
from agentrl.reporting.viewer import render_html, viewer_data, write_viewer
from agentrl.types import StopReason, TurnStatus
from tests.helpers.reporting_helpers import make_trajectory, standard_set, write_eval_file

HOSTILE = "</script><img src=x onerror=\"document.title='pwned'\"> & \u2028 done"


@pytest.fixture
def eval_path(tmp_path: Path) -> Path:
    games = standard_set([True, False, True, False, True, False])
    special = make_trajectory(
        "hostile",
        split="valid_unseen",
        task_type="pick_cool_then_place_in_recep",
        actions=("go to fridge 1", None, "cool <b>apple</b> 1 with fridge 1", "look"),
        statuses=(
            TurnStatus.EXECUTED,
            TurnStatus.INVALID_FORMAT,
            TurnStatus.NOT_ADMISSIBLE,
            TurnStatus.EXECUTED,
        ),
        stop_reason=StopReason.MAX_STEPS,
        observation_prefix=HOSTILE,
    )
    cut = replace(special.turns[3], new_segment=True, dropped_turns=2)  # a context window
    special = replace(
        special, reward_detail=f"{HOSTILE}\nSCORE: 7", turns=(*special.turns[:3], cut)
    )
    games[1] = replace(games[1], reward_error="no usable judgement after 3 attempts")
    return write_eval_file(tmp_path / "eval.jsonl", "update 80", [*games, special])


def test_viewer_data_and_escaping(eval_path: Path) -> None:
    data = viewer_data(read_eval_file(eval_path))
    episodes = data["episodes"]
    assert isinstance(episodes, list) and len(episodes) == 7
    last = episodes[-1]
    assert isinstance(last, dict)
    assert last["id"] == "valid_unseen/hostile#0"
    turns = last["turns"]
    assert isinstance(turns, list) and isinstance(turns[1], dict)
    assert turns[1]["action"] is None and turns[1]["observation"] is None
    assert turns[1]["error"] == "no_call: no <tool_call> found"
    assert [t["cut"] for t in turns if isinstance(t, dict)] == [0, 0, 0, 2]
    html = render_html(read_eval_file(eval_path))
    assert html.count("</script>") == 2  # only the page's own two script elements
    assert "<img" not in html
    assert "http://" not in html and "https://" not in html and "<link" not in html


def test_write_viewer_paths(eval_path: Path, tmp_path: Path) -> None:
    out = write_viewer(eval_path)
    assert out == eval_path.with_suffix(".html") and out.stat().st_size > 1000
    with pytest.raises(FileExistsError):
        write_viewer(eval_path, out, overwrite=False)
    with pytest.raises(ValueError, match="overwrite the eval file"):
        write_viewer(eval_path, eval_path)


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    content: list[Node | str] = field(default_factory=list)
    """Child elements and text, in document order."""

    @property
    def children(self) -> list[Node]:
        return [c for c in self.content if isinstance(c, Node)]

    def all_text(self) -> str:
        return "".join(c if isinstance(c, str) else c.all_text() for c in self.content)

    def find(self, predicate: Callable[[Node], bool]) -> list[Node]:
        found = [self] if predicate(self) else []
        for child in self.children:
            found.extend(child.find(predicate))
        return found


class TreeBuilder(HTMLParser):
    VOID = frozenset({"meta", "input", "br", "img", "hr", "link"})

    def __init__(self) -> None:
        super().__init__()
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].content.append(node)
        if tag not in self.VOID:
            self.stack.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                break

    def handle_data(self, data: str) -> None:
        self.stack[-1].content.append(data)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _rendered(page: Path, fragment: str) -> Node:
    browser = _chromium()
    assert browser is not None
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=3000",
            "--dump-dom",
            f"{page.as_uri()}#{fragment}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    builder = TreeBuilder()
    builder.feed(result.stdout)
    return builder.root


@pytest.mark.skipif(_chromium() is None, reason="Chromium is not installed")
def test_rendered_page_in_headless_chromium(eval_path: Path) -> None:
    page = write_viewer(eval_path)
    data = read_eval_file(eval_path)
    target = data.episodes[-1]
    dom = _rendered(page, quote(target.episode_id, safe=""))

    def by_id(name: str) -> Node:
        (node,) = dom.find(lambda n: n.attrs.get("id") == name)
        return node

    assert "update 80" in by_id("title").all_text()
    items = by_id("episodes").find(lambda n: n.tag == "li")
    assert [i.attrs["data-id"] for i in items] == [e.episode_id for e in data.episodes]
    assert [i.attrs.get("class") for i in items].count("selected") == 1
    assert items[-1].attrs.get("class") == "selected"
    assert by_id("episode-title").all_text() == episode_id(target.trajectory.task)
    facts = by_id("episode-facts").all_text()
    assert "not won" in facts and "max_steps" in facts and "invalid actions: 2" in facts
    judged = by_id("reward-detail").all_text()  # the judge's reply, as text
    assert "SCORE: 7" in judged and HOSTILE.replace("\u2028", "") in judged.replace("\u2028", "")

    rows = by_id("turns").find(lambda n: n.tag == "tr" and n.attrs.get("class") == "turn")
    assert [r.attrs["data-status"] for r in rows] == [
        t.status.value for t in target.trajectory.turns
    ]
    cells = [[c.all_text() for c in r.children if c.tag == "td"] for r in rows]
    assert cells[0][1] == "go to fridge 1"
    assert cells[2][1] == "cool <b>apple</b> 1 with fridge 1"  # shown as text, not markup
    assert cells[1][1].startswith("(no valid call) no_call")
    assert "(state not advanced)" in cells[1][3]
    assert HOSTILE.replace("\u2028", "") in cells[0][3].replace("\u2028", "")
    (marker,) = by_id("turns").find(lambda n: n.attrs.get("class") == "context-cut")
    assert "context cut: turns 1\u20132 are left out" in marker.all_text()
    table = by_id("turns").find(lambda n: n.tag == "tr")
    assert table.index(marker) == table.index(rows[3]) - 1  # just before the cut turn
    # the hostile observation did not become markup
    assert not dom.find(lambda n: n.tag == "img")
    assert not by_id("turns").find(lambda n: n.tag == "b")
    summary_rows = by_id("summary").find(lambda n: n.tag == "tr" and "data-split" in n.attrs)
    assert [r.attrs["data-split"] for r in summary_rows] == [
        "valid_seen",
        "valid_unseen",
        "overall",
    ]

    # another game through its link
    other = data.episodes[1]
    dom = _rendered(page, quote(other.episode_id, safe=""))
    (title,) = dom.find(lambda n: n.attrs.get("id") == "episode-title")
    assert title.all_text() == other.episode_id
    (facts_node,) = dom.find(lambda n: n.attrs.get("id") == "episode-facts")
    assert "reward error: no usable judgement after 3 attempts" in facts_node.all_text()
    rows = dom.find(lambda n: n.tag == "tr" and n.attrs.get("class") == "turn")
    assert "open fridge 1" in rows[-1].all_text()
