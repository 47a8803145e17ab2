"""A directory of Harbor tasks end to end: ``starter.py demo --dataset examples/harbor_tasks`` with its embedded
worker (the scripted oracle applying each task's reference patch through the real Claude Code), graded by each
task's own tests/test.sh in a fresh sandbox, every group in the results file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

import pytest

from durable_rollouts.paths import PROJECT_ROOT
from testbed.headless_chromium import HeadlessChromium
from tests.local_cluster import containers_of_runs, start_dev_server

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def check_the_runs_report(address: str, run_id: str, folder) -> None:
    """``starter.py report --run-id R --html DIR``: an index of the run's two groups linking to both rollouts'
    pages, checked in headless Chromium."""
    report = await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROJECT_ROOT / "starter.py"),
        "report",
        "--run-id",
        run_id,
        "--html",
        str(folder),
        cwd=PROJECT_ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": address},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    printed = (await report.communicate())[0].decode()
    assert report.returncode == 0 and f"run {run_id}: {folder / 'index.html'} and 2 rollout pages" in printed, printed
    async with HeadlessChromium() as browser:
        await browser.open(folder / "index.html")
        rows = await browser.evaluate(
            "[...document.querySelectorAll('tr[id^=group-]')].map(r => [r.children[1].textContent, "
            "r.querySelector('a').getAttribute('href')])"
        )
        assert sorted(prompt for prompt, _ in rows) == [
            "rollouts/median-reward-json",
            "rollouts/temperature-reward-txt",
        ]
        assert await browser.evaluate("document.querySelectorAll('svg.chart').length") == 3, (
            "reward, valid share, time to finish"
        )
        for _, link in rows:
            await browser.open(folder / link)
            assert await browser.evaluate("document.querySelectorAll('.reply').length") == 3
            assert "harbor" in await browser.evaluate("document.getElementById('grading').textContent")
        assert browser.network_requests == []


async def test_the_oracle_solves_both_example_harbor_tasks(task_images, tmp_path):
    env = await start_dev_server()
    run_id, out = f"hb{uuid.uuid4().hex[:6]}", tmp_path / "results.jsonl"
    try:
        starter = await asyncio.create_subprocess_exec(
            sys.executable,
            str(PROJECT_ROOT / "starter.py"),
            "demo",
            "--dataset",
            str(PROJECT_ROOT / "examples" / "harbor_tasks"),
            "--run-id",
            run_id,
            "--out",
            str(out),
            cwd=PROJECT_ROOT,
            env={
                **os.environ,
                "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
                "ROLLOUT_TASK_QUEUE": f"pytest-{run_id}",
                "ROLLOUT_HOST_ID": f"pytest-{run_id}",
                "ROLLOUT_RESULTS_DIR": str(tmp_path / "worker-results"),
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output = (await starter.communicate())[0].decode()
        assert starter.returncode == 0, output
        assert f"starter.py report --run-id {run_id} --html" in output, "the demo says how to see its run"
        assert await containers_of_runs([run_id]) == [], "every sandbox of the run is gone"
        await check_the_runs_report(env.client.service_client.config.target_host, run_id, tmp_path / "report")
    finally:
        await env.shutdown()
    groups = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(g["prompt_key"] for g in groups) == [
        "rollouts/median-reward-json",
        "rollouts/temperature-reward-txt",
    ], output
    lines = {g["prompt_key"]: g["line"] for g in groups}
    assert lines["rollouts/median-reward-json"] == str(
        PROJECT_ROOT / "examples" / "harbor_tasks" / "median-reward-json"
    )
    for group in groups:
        assert (group["status"], group["rewards"], group["valid_mask"]) == ("completed", [1.0], [True]), group
        (sample,) = group["samples"]
        rollout = sample["rollout"]
        assert (rollout["status"], rollout["reward"], rollout["solved"], rollout["applied_cleanly"]) == (
            "completed",
            1.0,
            True,
            True,
        )
        assert rollout["evaluation"]["grader"] == "harbor" and rollout["agent"]["turns"] == 3
    metrics = {g["prompt_key"]: g["samples"][0]["rollout"]["evaluation"]["rewards"] for g in groups}
    assert metrics == {
        "rollouts/temperature-reward-txt": {"reward": 1.0},
        "rollouts/median-reward-json": {"reward": 1.0, "checks_passed": 4.0, "checks_total": 4.0},
    }
