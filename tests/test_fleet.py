"""Two rollout hosts and a starter that share no disk: only the Temporal dev server and an S3 bucket (a real SeaweedFS).

Each worker runs from its own results folder with its own host id; the starter runs in a third folder. Every
payload over 1 KiB goes through the bucket, so each process can only read what another wrote through Temporal's
external storage. One host is SIGKILLed while its agents run: its rollouts start again on the other host, the
starter still writes every rollout with its full segments and logs, and the other host reaps the dead one's sandboxes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.trainer_client.local_services import worker_process
from durable_rollouts.trainer_client.payload_storage import data_converter
from testbed.seaweed_s3 import SeaweedS3, seaweed_s3
from tests.local_cluster import start_dev_server, until_no_containers_of
from tests.waiting import AFTER_DISRUPTION_TURN_S
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
PROJECT = Path(__file__).resolve().parent.parent
ROWS = sum(1 for line in EXAMPLE_DATASET.read_text().splitlines() if line.strip())


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[SeaweedS3]:
    with seaweed_s3(tmp_path_factory.mktemp("seaweed")) as running:
        yield running


def process_env(store: SeaweedS3, bucket: str, folder: Path, **extra: str) -> dict[str, str]:
    """One process's environment: the bucket, a threshold of 1 KiB, and a payload folder of its own that must stay
    unused (a process falling back to a folder would write results no other host can read)."""
    return {
        **store.env(bucket),
        "ROLLOUT_PAYLOAD_THRESHOLD_BYTES": "1K",
        "ROLLOUT_PAYLOAD_DIR": str(folder / "payloads"),
        **extra,
    }


async def rollouts_by_host(client: Client, hosts: dict[str, str]) -> dict[str, set[str]]:
    """The running rollouts whose agent has made at least one model turn, by the host (of ``hosts``) they run on."""
    placed: dict[str, set[str]] = {name: set() for name in hosts}
    async for execution in client.list_workflows("WorkflowType='CodingAgentRollout' AND ExecutionStatus='Running'"):
        try:
            progress = await client.get_workflow_handle(execution.id).query(CodingAgentRollout.progress)
        except Exception:
            continue
        for name, host_id in hosts.items():
            if progress.host_queue.endswith(host_id) and progress.stage == "agent" and progress.turns >= 1:
                placed[name].add(execution.id)
    return placed


async def agent_queues(client: Client, workflow_id: str) -> list[str]:
    """The task queues the rollout's agent activities were scheduled on, in order (one per attempt)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.task_queue.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "run_claude_code"
    ]


async def test_two_hosts_and_a_starter_share_only_temporal_and_the_bucket(store, slow_policy, tmp_path):
    bucket = store.new_bucket()
    server = await start_dev_server()
    address = server.client.service_client.config.target_host
    queue, run_id = f"fleet-{uuid.uuid4().hex[:6]}", f"fleet{uuid.uuid4().hex[:4]}"
    hosts = {"a": f"fleet-a-{uuid.uuid4().hex[:4]}", "b": f"fleet-b-{uuid.uuid4().hex[:4]}"}
    folders = {name: tmp_path / f"host-{name}" for name in (*hosts, "starter")}
    for folder in folders.values():
        folder.mkdir()
    client = await Client.connect(address, data_converter=data_converter(store.settings(bucket, threshold_bytes=1024)))

    def worker(name: str, slots: int):
        env = process_env(
            store,
            bucket,
            folders[name],
            ROLLOUT_RESULTS_DIR=str(folders[name] / "results"),
            ROLLOUT_AGENT_SLOTS=str(slots),
            ROLLOUT_REAP_INTERVAL_S="2",
        )
        env.update(ROLLOUT_POLICY_URL=slow_policy.url, ROLLOUT_TASK_QUEUE=queue)
        return worker_process(address, ["--host-id", hosts[name], "--adapter-port", "0"], env=env)

    async def until_placed(name: str) -> None:
        while not (await rollouts_by_host(client, hosts))[name]:
            assert starter.returncode is None, "the starter ended before the kill"
            await asyncio.sleep(0.5)

    out = folders["starter"] / "results.jsonl"
    starter = None
    try:
        async with contextlib.AsyncExitStack() as hosts_up:
            # Host A alone takes the first two rollouts; B, started next with room for all, takes the rest and,
            # once A is killed, A's as well.
            doomed = await hosts_up.enter_async_context(worker("a", slots=2))
            starter = await asyncio.create_subprocess_exec(
                sys.executable,
                str(PROJECT / "starter.py"),
                "run",
                str(EXAMPLE_DATASET),
                "--run-id",
                run_id,
                "--out",
                str(out),
                "--task-queue",
                queue,
                "--concurrency",
                str(ROWS),
                cwd=folders["starter"],
                env={
                    **os.environ,
                    **process_env(store, bucket, folders["starter"]),
                    "TEMPORAL_ADDRESS": address,
                    "SWE_TIME_BUDGET_SEC": "300",
                    "SWE_EVAL_TIMEOUT_SEC": "300",
                    "SWE_GENERATE_GUARD_SEC": "1800",
                    "ROLLOUT_RESUME_WINDOW_S": "3",
                },
            )
            # B starts while A takes its two (a worker's start-up outlasts the starter's), so B is polling long
            # before A could work through the whole dataset, however loaded the machine is.
            await hosts_up.enter_async_context(worker("b", slots=ROWS))
            await until_placed("a")
            await until_placed("b")
            placed = await rollouts_by_host(client, hosts)
            os.killpg(doomed.pid, signal.SIGKILL)
            slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
            exit_code = await asyncio.wait_for(starter.wait(), timeout=1800)
            # A's sandboxes of the attempts that moved are B's to reap once their rollouts closed (every 2 s).
            await asyncio.wait_for(until_no_containers_of(run_id), timeout=120)
        assert exit_code == 0
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        rollouts = [sample["rollout"] for line in lines for sample in line["samples"]]
        assert len(rollouts) == ROWS
        for rollout in rollouts:
            assert (rollout["status"], rollout["reward"]) == ("completed", 1.0), (
                rollout["workflow_id"],
                rollout["abort_reason"],
                rollout["error"],
            )
            assert rollout["segments"] and all(
                s["tokens"] and len(s["tokens"]) == len(s["rollout_log_probs"]) for s in rollout["segments"]
            )
            assert "packed" not in rollout["trajectory"]
            agent_log = Path(rollout["agent"]["log_path"])
            grading_log = Path(rollout["evaluation"]["log_path"])
            assert agent_log.parent == grading_log.parent == out.with_name("results.jsonl.logs")
            assert '"type":"result"' in agent_log.read_text().replace(" ", "")
            assert grading_log.stat().st_size == rollout["evaluation"]["log_bytes"] > 0

        written = {r["workflow_id"] for r in rollouts}
        for workflow_id in placed["a"]:
            queues = await agent_queues(client, workflow_id)
            assert queues[0].endswith(hosts["a"]) and queues[-1].endswith(hosts["b"]), queues
            moved = await client.get_workflow_handle_for(CodingAgentRollout.run, workflow_id).result()
            assert (moved.status, moved.abort_reason, moved.attempts) == ("completed", None, 2), (
                "moved to B as a fresh attempt"
            )
            assert workflow_id in written, "its own result is the sample's, not a refill's"

        assert store.keys(bucket), "results went through the bucket"
        for folder in folders.values():
            assert not (folder / "payloads").exists(), f"{folder}: no process may fall back to a local payload folder"
            assert not [p for p in folder.rglob("*") if p.suffix in (".npz", ".patch")], (
                "no trajectory or patch file on any disk"
            )
    finally:
        if starter is not None and starter.returncode is None:
            starter.kill()
            await starter.wait()
        await server.shutdown()
