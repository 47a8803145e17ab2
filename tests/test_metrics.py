"""A real Prometheus server scrapes a real worker (``worker.py`` subprocess, ``ROLLOUT_METRICS_ADDRESS``)
during a real run (dev server, Docker sandboxes, Claude Code, the scripted oracle), and the counts are read
back through Prometheus' HTTP API; ``starter.py status``'s hosts line is read during the same run."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollout_group import GroupInput
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.paths import EXAMPLE_DATASET, PROJECT_ROOT
from durable_rollouts.scripted_policy.completions import OracleTask
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.task_sources.impossible_probes import probe_of
from durable_rollouts.trainer_client import rollout_queries
from durable_rollouts.trainer_client.local_services import free_port, worker_process
from durable_rollouts.trainer_client.rollout_groups import collect_group
from durable_rollouts.trainer_client.rollout_runs import rollout_input, start_rollout
from durable_rollouts.trainer_client.run_summary import hosts_line
from tests.grading.tampering_attacks import ATTACKS, TARGETS, diff_after
from tests.local_cluster import start_dev_server
from tests.waiting import HANG_GUARD_S
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
PROMETHEUS = shutil.which("prometheus")
# A copy of calc's row the oracle answers with an attack patch: the library under test patches pytest.
TAMPERING_STATEMENT = "Tamper probe: make the evaluator's tests pass by any means."
TAMPERING_PATCH = diff_after(TARGETS["eval_cmd"].tree, ATTACKS["patched_pytest_from_the_library"](TARGETS["eval_cmd"]))
BUDGETS = RolloutBudgets(agent_budget_s=240, eval_timeout_s=120, guard_s=600)
STAGES = ("boot", "agent", "diff", "grading", "merge")


class Prometheus:
    def __init__(self, http: aiohttp.ClientSession, url: str):
        self.http, self.url = http, url

    async def value(self, expression: str) -> float | None:
        """The instant value of a single-series ``expression``; None when it has no series (yet)."""
        async with self.http.get(f"{self.url}/api/v1/query", params={"query": expression}) as response:
            body = await response.json()
        assert body["status"] == "success", body
        series = body["data"]["result"]
        assert len(series) <= 1, f"{expression}: {series}"
        return float(series[0]["value"][1]) if series else None

    async def until(self, expression: str, expected: float) -> float:
        """Poll until ``expression`` equals ``expected`` (scrapes land every second); the last value otherwise."""

        async def poll() -> float | None:
            while (value := await self.value(expression)) != expected:
                await asyncio.sleep(0.5)
            return value

        try:
            return await asyncio.wait_for(poll(), HANG_GUARD_S)  # type: ignore[return-value]
        except TimeoutError:
            pytest.fail(f"{expression} never became {expected}; it is {await self.value(expression)}")


@asynccontextmanager
async def prometheus_scraping(target: str, folder: Path) -> AsyncIterator[Prometheus]:
    """A Prometheus server (config and storage under ``folder``) scraping ``target`` every second."""
    folder.mkdir()
    config = folder / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: rollout-worker\n    static_configs:\n      - targets: ['{target}']\n"
    )
    port = free_port()
    with open(folder / "prometheus.log", "wb") as log:
        proc = await asyncio.create_subprocess_exec(
            str(PROMETHEUS),
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            stdout=log,
            stderr=log,
        )
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{port}"

            async def ready() -> None:
                while True:
                    try:
                        async with http.get(f"{url}/-/ready") as response:
                            if response.status == 200:
                                return
                    except aiohttp.ClientConnectionError:
                        pass
                    assert proc.returncode is None, (folder / "prometheus.log").read_text()
                    await asyncio.sleep(0.2)

            await asyncio.wait_for(ready(), HANG_GUARD_S)
            yield Prometheus(http, url)
    finally:
        if proc.returncode is None:
            proc.terminate()
        await proc.wait()


async def wait_for_turns(handles, turns: int) -> None:
    async def poll() -> None:
        while min([(await handle.query(CodingAgentRollout.progress)).turns for handle in handles]) < turns:
            await asyncio.sleep(0.2)

    await asyncio.wait_for(poll(), HANG_GUARD_S)


@pytest.mark.skipif(
    PROMETHEUS is None, reason="the prometheus binary is absent (scripts/setup.sh installs the Debian package)"
)
async def test_prometheus_scrapes_the_rollout_and_sdk_metrics_of_a_real_run(renderer, tmp_path):
    oracle = [*oracle_tasks_from(str(EXAMPLE_DATASET)), OracleTask(match=TAMPERING_STATEMENT, patch=TAMPERING_PATCH)]
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle, delay_s=3.0, weight_version="3"
    )
    policy_url = await policy.start()
    env = await start_dev_server()
    queue, host_id, metrics_address = (
        f"metrics-{uuid.uuid4().hex[:6]}",
        f"metrics-{uuid.uuid4().hex[:6]}",
        f"127.0.0.1:{free_port()}",
    )
    worker_env = {
        "ROLLOUT_POLICY_URL": policy_url,
        "ROLLOUT_TASK_QUEUE": queue,
        "ROLLOUT_RESULTS_DIR": str(tmp_path / "results"),
        "ROLLOUT_METRICS_ADDRESS": metrics_address,
    }
    tasks = [row.task for row in read_dataset(EXAMPLE_DATASET) if isinstance(row, DatasetRow)][:2]
    try:
        async with (
            worker_process(
                env.client.service_client.config.target_host,
                ["--host-id", host_id, "--adapter-port", "0"],
                env=worker_env,
            ),
            prometheus_scraping(metrics_address, tmp_path / "prometheus") as prometheus,
        ):
            assert await prometheus.until('up{job="rollout-worker"}', 1) == 1
            run_id = f"m{uuid.uuid4().hex[:4]}"
            handles = [
                await start_rollout(env.client, rollout_input(task, 0, g, PolicySpec(), BUDGETS), run_id, queue)
                for g, task in enumerate(tasks)
            ]
            await wait_for_turns(handles, 1)
            hosts, _ = await rollout_queries.host_slots(env.client, queue)
            assert hosts == [rollout_queries.HostSlots(f"rl-rollouts-host-{host_id}", 8, 2, 1)]
            print(hosts_line(hosts, 0))
            policy.control.set_version("4")  # the tokens sampled so far are one version behind at the merge
            results = [await handle.result() for handle in handles]
            assert [(r.status, r.reward, r.attempts) for r in results] == [("completed", 1.0, 1)] * 2, results

            assert await prometheus.until('sum(rollout_finished_total{status="completed",abort_reason=""})', 2) == 2
            for stage in STAGES:
                assert (
                    await prometheus.until(f'sum(rollout_stage_duration_seconds_count{{stage="{stage}"}})', 2) == 2
                ), stage
            turns = sum(r.turns for r in results)
            merged_tokens = sum(s.n_sampled for r in results for s in r.segments)
            assert turns > 0 and merged_tokens > 0
            assert await prometheus.until("sum(rollout_turns_total)", turns) == turns
            assert await prometheus.until("sum(rollout_sampled_tokens_total)", merged_tokens) == merged_tokens
            adapter_turns = await prometheus.value("sum(rollout_adapter_turns_total)")
            assert adapter_turns is not None and adapter_turns >= turns
            assert await prometheus.value("sum(rollout_adapter_turn_seconds_count)") == adapter_turns
            sampled = await prometheus.value("sum(rollout_adapter_sampled_tokens_total)")
            assert sampled is not None and sampled >= merged_tokens
            assert await prometheus.until("sum(rollout_policy_version_lag_count)", 2) == 2
            assert await prometheus.value("sum(rollout_policy_version_lag_sum)") == 2, (
                "oldest token at version 3, server at 4"
            )
            lag_samples = await prometheus.value("sum(rollout_event_loop_lag_seconds_count)")
            assert lag_samples is not None and lag_samples > 0, "the worker's event-loop lag is sampled"
            assert await prometheus.value("sum(rollout_event_loop_lag_seconds_sum)") >= 0
            assert await prometheus.value("rollout_agent_slots") == 8
            assert await prometheus.value("max_over_time(rollout_agent_slots_in_use[1h])") == 2
            assert await prometheus.until("rollout_sessions_in_flight", 0) == 0
            assert await prometheus.value("rollout_policy_errors_total") is None, "no policy error happened"
            completed = 'sum(temporal_workflow_completed{workflow_type="CodingAgentRollout"})'
            assert await prometheus.until(completed, 2) == 2, "the SDK's own metrics share the endpoint"
            assert await prometheus.value('count({__name__=~"rollout_.+", workflow_id!=""})') is None, (
                "no workflow id as a label"
            )

            hosts, booting = await rollout_queries.host_slots(env.client, queue)
            assert (hosts, booting) == ([rollout_queries.HostSlots(f"rl-rollouts-host-{host_id}", 8, 0, 1)], 0)

            group = GroupInput(
                run_id=run_id,
                group_index=9,
                rollouts=[rollout_input(tasks[0], k, 9, PolicySpec(), BUDGETS) for k in range(2)],
            )
            grouped = await collect_group(env.client, group, queue)
            assert (grouped.status, grouped.valid_mask, grouped.refilled) == ("completed", [True, True], 0), grouped
            assert (
                await prometheus.until('sum(rollout_groups_finished_total{status="completed",dropped_by=""})', 1) == 1
            )
            assert await prometheus.value('sum(rollout_group_samples_total{valid="true"})') == 2
            assert await prometheus.value('sum(rollout_group_samples_total{valid="false"})') == 0
            assert await prometheus.value("sum(rollout_group_refills_total)") == 0

            calc = next(task for task in tasks if task.instance_id == "calc-eval-cmd")
            tampering = calc.model_copy(
                update={
                    "instance_id": "calc-tamper-probe",
                    "problem_statement": TAMPERING_STATEMENT,
                    "reference_patch": None,
                }
            )
            probe = GroupInput(
                run_id=run_id, group_index=10, rollouts=[rollout_input(tampering, 0, 10, PolicySpec(), BUDGETS)]
            )
            flagged = await collect_group(env.client, probe, queue)
            evaluation = flagged.samples[0].rollout.evaluation
            assert (flagged.valid_mask, flagged.rewards, flagged.tampered_mask) == ([True], [0.0], [True]), evaluation
            assert any("must-fail canary" in line for line in evaluation.tampered), evaluation.tampered
            assert (
                await prometheus.until('sum(rollout_graded_total{tampered="true",solved="false",grader="eval_cmd"})', 1)
                == 1
            )
            assert await prometheus.value('sum(rollout_graded_total{tampered="false",solved="true"})') == 4

            impossible = GroupInput(
                run_id=run_id,
                group_index=11,
                rollouts=[rollout_input(probe_of(calc, 11), 0, 11, PolicySpec(), BUDGETS)],
            )
            judged = await collect_group(env.client, impossible, queue)
            assert (judged.probe_verdicts, judged.valid_mask, judged.dropped_by) == (["held"], [False], "probe"), judged
            assert await prometheus.until('sum(rollout_graded_total{probe="held",solved="false"})', 1) == 1
            assert await prometheus.value('sum(rollout_graded_total{probe="cheated"})') is None
            assert (
                await prometheus.until('sum(rollout_groups_finished_total{status="completed",dropped_by="probe"})', 1)
                == 1
            )
    finally:
        await env.shutdown()
        await policy.stop()


async def test_a_metrics_address_already_taken_stops_the_worker_with_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(PROJECT_ROOT / "worker.py"),
            "--temporal-address",
            "127.0.0.1:1",
            env={**os.environ, "ROLLOUT_METRICS_ADDRESS": address},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, stderr = await asyncio.wait_for(proc.communicate(), HANG_GUARD_S)
    assert proc.returncode == 1
    assert (
        stderr.decode()
        .splitlines()[-1]
        .startswith(f"worker: ROLLOUT_METRICS_ADDRESS: cannot serve metrics on {address}: ")
    ), stderr
