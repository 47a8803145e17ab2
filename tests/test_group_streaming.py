"""A starter SIGKILLed mid-run and started again writes every group exactly once: real processes throughout.

A dev server on its own SQLite file (``DevServer``), a worker subprocess with
the slow scripted oracle (3 s per turn, so groups are still running when the
starter dies), Docker sandboxes, Claude Code, and ``starter.py run`` itself as
a subprocess: killed once the first group line is in the results file while
another group runs, then run again with the same ``--run-id``. The second run
skips the group with a line, attaches to the others and writes each once.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from durable_rollouts.contracts.workflow_ids import group_workflow_id, rollout_workflow_id
from durable_rollouts.paths import EXAMPLE_DATASET, PROJECT_ROOT
from durable_rollouts.trainer_client import rollout_queries
from durable_rollouts.trainer_client.batch_runs import read_rows
from durable_rollouts.trainer_client.local_services import DevServer, free_port, worker_process
from durable_rollouts.trainer_client.rollout_runs import connect
from tests.local_cluster import containers_of_runs
from tests.waiting import AFTER_DISRUPTION_TURN_S, until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
K = 2
ROWS = 3
BUDGETS = {"SWE_TIME_BUDGET_SEC": "240", "SWE_EVAL_TIMEOUT_SEC": "120", "SWE_GENERATE_GUARD_SEC": "600"}


def complete_lines(path: Path) -> list[dict]:
    """The results file's whole lines (a line the starter is writing, or was killed writing, is not one yet)."""
    if not path.exists():
        return []
    return [json.loads(text) for text in path.read_text().splitlines(keepends=True) if text.endswith("\n")]


async def until_probed(probe: Callable[[], Awaitable[bool]]) -> None:
    """``until`` over an async probe (server state): its latest answer, refreshed in the background; a probe
    that raises ends the wait with its error."""
    latest = False

    async def refresh() -> None:
        nonlocal latest
        while not latest:
            latest = await probe()
            await asyncio.sleep(0.2)

    task = asyncio.create_task(refresh())
    try:
        await until(lambda: task.done())
        task.result()
    finally:
        task.cancel()


async def run_starter(args: list[str], env: dict[str, str], log: Path) -> asyncio.subprocess.Process:
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            str(PROJECT_ROOT / "starter.py"),
            *args,
            stdout=out,
            stderr=out,
            start_new_session=True,
            env=env,
        )


async def test_a_killed_starter_started_again_writes_every_group_exactly_once(slow_policy, task_images, tmp_path):
    rows = read_rows(EXAMPLE_DATASET)[0][:ROWS]
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("\n".join(EXAMPLE_DATASET.read_text().splitlines()[:ROWS]) + "\n")
    server = DevServer(free_port(), free_port(), tmp_path / "temporal.db", ui=False)
    queue, run_id, out = f"gs-{uuid.uuid4().hex[:6]}", f"gs{uuid.uuid4().hex[:6]}", tmp_path / "results.jsonl"
    worker_env = {
        "ROLLOUT_POLICY_URL": slow_policy.url,
        "ROLLOUT_TASK_QUEUE": queue,
        "ROLLOUT_RESULTS_DIR": str(tmp_path / "results"),
    }
    starter_env = {**os.environ, **BUDGETS, "TEMPORAL_ADDRESS": server.address, "ROLLOUT_TASK_QUEUE": queue}
    # 4 samples in flight: 2 groups of K=2 at a time, so the third starts only once one has finished.
    run_args = [
        "run",
        str(dataset),
        "--run-id",
        run_id,
        "--out",
        str(out),
        "--n-samples-per-prompt",
        str(K),
        "--concurrency",
        "4",
    ]
    starters: list[asyncio.subprocess.Process] = []
    await server.start()
    try:
        async with worker_process(
            server.address, ["--host-id", f"gs-{uuid.uuid4().hex[:6]}", "--adapter-port", "0"], env=worker_env
        ):
            client = await connect(server.address)
            starters.append(await run_starter(run_args, starter_env, tmp_path / "starter-1.log"))
            seen: list[rollout_queries.GroupCounts] = []

            async def first_line_and_a_group_running() -> bool:
                assert starters[0].returncode is None, (tmp_path / "starter-1.log").read_text()
                if not complete_lines(out):
                    return False
                seen.append(await rollout_queries.group_counts(client))
                return seen[-1].running >= 1 and seen[-1].answered >= 1

            await until_probed(first_line_and_a_group_running)
            os.killpg(starters[0].pid, signal.SIGKILL)
            await starters[0].wait()
            at_kill = complete_lines(out)
            assert 1 <= len(at_kill) < ROWS, "killed mid-run"
            assert seen[-1].done <= K * seen[-1].answered, f"the running groups' progress sums: {seen[-1]}"

            slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
            starters.append(await run_starter(run_args, starter_env, tmp_path / "starter-2.log"))
            assert await starters[1].wait() == 0, (tmp_path / "starter-2.log").read_text()

            async def every_group_closed_completed() -> bool:
                counts = await rollout_queries.group_counts(client)
                return counts.running == 0 and counts.closed["completed"] == ROWS

            await until_probed(every_group_closed_completed)
            status = await run_starter(["status"], starter_env, tmp_path / "status.log")
            assert await status.wait() == 0
            leftovers = await containers_of_runs([run_id])
    finally:
        for proc in starters:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        await server.stop()

    lines = complete_lines(out)
    assert out.read_text().endswith("\n") and lines[: len(at_kill)] == at_kill, (
        "the lines written before the kill stay as they were"
    )
    expected = {group_workflow_id(run_id, row.task.instance_id, index): index for index, row in enumerate(rows)}
    assert sorted(line["workflow_id"] for line in lines) == sorted(expected), (
        "every group exactly once: none missing, none twice"
    )
    for line in lines:
        index = expected[line["workflow_id"]]
        assert (line["status"], line["valid_mask"], line["rewards"], line["refilled"], line["line"]) == (
            "completed",
            [True] * K,
            [1.0] * K,
            0,
            index + 1,
        )
        instance = rows[index].task.instance_id
        assert [s["rollout"]["workflow_id"] for s in line["samples"]] == [
            rollout_workflow_id(run_id, instance, i, index) for i in range(K)
        ]
        assert all(s["rollout"]["segments"] and len(s["runs"]) == 1 for s in line["samples"]), (
            "complete samples, none re-run"
        )
    rerun_output = (tmp_path / "starter-2.log").read_text()
    assert (
        f"{len(at_kill)} of {ROWS} groups of run {run_id} already there; running the other {ROWS - len(at_kill)}"
        in rerun_output
    )
    assert (
        f"groups: running 0 (samples done 0, valid 0, refilled 0; 0 answered)  closed: completed {ROWS}"
        in (tmp_path / "status.log").read_text()
    )
    assert leftovers == []
