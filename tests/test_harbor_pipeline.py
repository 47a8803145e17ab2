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
from tests.local_cluster import containers_of_runs, start_dev_server

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


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
        assert await containers_of_runs([run_id]) == [], "every sandbox of the run is gone"
    finally:
        await env.shutdown()
    groups = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(g["prompt_key"] for g in groups) == ["rollouts/median-reward-json", "rollouts/temperature-reward-txt"], output
    lines = {g["prompt_key"]: g["line"] for g in groups}
    assert lines["rollouts/median-reward-json"] == str(PROJECT_ROOT / "examples" / "harbor_tasks" / "median-reward-json")
    for group in groups:
        assert (group["status"], group["rewards"], group["valid_mask"]) == ("completed", [1.0], [True]), group
        (sample,) = group["samples"]
        rollout = sample["rollout"]
        assert (rollout["status"], rollout["reward"], rollout["solved"], rollout["applied_cleanly"]) == ("completed", 1.0, True, True)
        assert rollout["evaluation"]["grader"] == "harbor" and rollout["agent"]["turns"] == 3
    metrics = {g["prompt_key"]: g["samples"][0]["rollout"]["evaluation"]["rewards"] for g in groups}
    assert metrics == {
        "rollouts/temperature-reward-txt": {"reward": 1.0},
        "rollouts/median-reward-json": {"reward": 1.0, "checks_passed": 4.0, "checks_total": 4.0},
    }
