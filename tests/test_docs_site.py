"""The documentation site builds strictly (a broken link, anchor or missing page fails), and the numbers its pages
state about the code are the code's (the settings page: ``tests/config/test_settings_reference.py``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from durable_rollouts.paths import PROJECT_ROOT
from workflows.coding_agent_rollout import HEARTBEAT_TIMEOUT

DOCS = PROJECT_ROOT / "docs"


def test_the_site_builds_in_strict_mode(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    pages = {path.relative_to(tmp_path / "site").as_posix() for path in (tmp_path / "site").rglob("index.html")}
    assert {f"{page.stem}/index.html" for page in DOCS.glob("*.md") if page.stem != "index"} <= pages, (
        "every page is in the site"
    )


def test_every_page_is_in_the_navigation():
    config = (PROJECT_ROOT / "mkdocs.yml").read_text()
    listed = set(re.findall(r":\s*([\w.-]+\.md)\s*$", config, re.MULTILINE))
    assert listed == {page.name for page in DOCS.glob("*.md")}


def test_the_heartbeat_the_pages_state_is_the_codes():
    from activities.rollout_host import HEARTBEAT_INTERVAL_S

    text = (DOCS / "rollouts.md").read_text()
    stated = re.search(
        r"`run_claude_code` heartbeats every (\d+(?:\.\d+)?) s \(.*?; (\d+) s heartbeat timeout\)", text, re.DOTALL
    )
    assert stated, "rollouts.md states the agent's heartbeat"
    assert (float(stated.group(1)), int(stated.group(2))) == (HEARTBEAT_INTERVAL_S, HEARTBEAT_TIMEOUT.total_seconds())


def test_the_search_attributes_an_operator_is_told_to_create_are_the_workflows():
    from workflows.search_attributes import ALL

    stated = re.findall(r"search-attribute create --name (\w+) --type (\w+)", (DOCS / "operations.md").read_text())
    assert stated == [(key.name, key.indexed_value_type.name.capitalize()) for key in ALL]
