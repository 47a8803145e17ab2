"""The README and the pages under docs/ link only to files and headings that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from durable_rollouts.paths import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of ``page`` (code blocks skipped)."""
    found, in_code = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(PROJECT_ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert broken == []


def test_the_readme_stays_a_front_page():
    assert len((PROJECT_ROOT / "README.md").read_text().splitlines()) <= 80, "guides belong in docs/"


CITED_TEST = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(PROJECT_ROOT)))
def test_every_test_a_page_cites_exists(page):
    """A cited ``tests/<file>.py::<name>`` is a test function in that file (a bare ``tests/…`` path may be a task's)."""
    missing = []
    for path, name in CITED_TEST.findall(page.read_text()):
        module = PROJECT_ROOT / path
        if not module.is_file() or not re.search(rf"^(async )?def {name}\(", module.read_text(), re.MULTILINE):
            missing.append(f"{path}::{name}")
    assert missing == []
