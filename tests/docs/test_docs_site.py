"""The docs site and the README landing page.

Every page under docs/ is in the mkdocs nav, every name of `agentrl.__all__` is documented on
exactly one API page (as `::: agentrl.Name`), `mkdocs build --strict` passes (broken links,
anchors and API references fail it), and the README stays a short landing page whose example
runs and whose links resolve.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import agentrl

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "mkdocs.yml").is_file())
DOCS = ROOT / "docs"
README = ROOT / "README.md"

NAV_ENTRY = re.compile(r"^\s*-\s*(?:[^:\n]+:\s*)?([\w./-]+\.md)\s*$", re.MULTILINE)
API_BLOCK = re.compile(r"^:::\s*agentrl\.([\w.]+)\s*$", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def nav_pages() -> list[str]:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config.split("\nnav:\n", 1)[1]
    return NAV_ENTRY.findall(nav)


def test_every_page_is_in_the_nav_once() -> None:
    pages = nav_pages()
    assert [p for p, n in Counter(pages).items() if n > 1] == []
    on_disk = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert set(pages) == on_disk, {
        "missing from the nav": sorted(on_disk - set(pages)),
        "in the nav, no such file": sorted(set(pages) - on_disk),
    }


def test_every_public_name_is_on_exactly_one_api_page() -> None:
    where: dict[str, list[str]] = {}
    for page in sorted(DOCS.rglob("*.md")):
        for name in API_BLOCK.findall(page.read_text(encoding="utf-8")):
            # Modules (`::: agentrl.reporting`) and their members are extra reference pages.
            if "." not in name and importlib.util.find_spec(f"agentrl.{name}") is None:
                where.setdefault(name, []).append(page.relative_to(DOCS).as_posix())
    public = set(agentrl.__all__)
    assert sorted(public - set(where)) == [], "names of agentrl.__all__ on no API page"
    assert sorted(set(where) - public) == [], "API blocks for names not in agentrl.__all__"
    twice = {name: pages for name, pages in where.items() if len(pages) > 1}
    assert twice == {}, "names documented more than once"
    outside = {name: pages for name, pages in where.items() if not pages[0].startswith("api/")}
    assert outside == {}, "API blocks outside docs/api/"
    api_pages = {p for p in nav_pages() if p.startswith("api/")}
    assert {pages[0] for pages in where.values()} <= api_pages


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(module, reason=f"{module} is not installed (the `dev` extra)")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (site / "api" / "training" / "index.html").is_file()
    # The README's anchors into the docs resolve on the built pages.
    for target in LINK.findall(README.read_text(encoding="utf-8")):
        page, _, anchor = target.partition("#")
        if anchor and page.startswith("docs/") and page.endswith(".md"):
            html = site / page.removeprefix("docs/").removesuffix(".md") / "index.html"
            assert f'id="{anchor}"' in html.read_text(encoding="utf-8"), target


def test_readme_is_a_landing_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "make demo" in text and "make test" in text
    for target in LINK.findall(text):
        if "://" in target:
            continue
        path = target.partition("#")[0]
        assert (ROOT / path).exists(), target


def test_readme_example_runs_as_documented() -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert code is not None
    expected = [line[2:] for line in code.group(1).splitlines() if line.startswith("# ")]
    assert expected
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(README), "exec"), {"__name__": "readme_example"})
    assert out.getvalue().splitlines() == expected
