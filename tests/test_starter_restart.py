"""The starter waits out a Temporal server restart, and a longer outage fails its rollouts cleanly for a re-run to
collect.

Real processes: a dev server SIGKILLed and restarted on its SQLite file
(``DevServer``), a worker subprocess, Docker sandboxes, Claude Code and a slow
scripted policy so the outage lands while the agents run.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.local_services import DevServer, free_port, worker_process
from durable_rollouts.trainer_client.rollout_runs import connect, rollout_input, run_rollouts, workflow_id_for
from tests.local_cluster import until_no_containers_of
from tests.waiting import AFTER_DISRUPTION_TURN_S
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
# The SDK retries a failed call for up to 10 s on its own; an outage longer than that must go through run_rollouts' own
# wait.
SDK_RETRY_S = 10
BUDGETS = RolloutBudgets(agent_budget_s=240, eval_timeout_s=120, guard_s=600)


async def first_turn(client, workflow_id: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    while True:
        try:
            if (await handle.query(CodingAgentRollout.progress)).turns >= 1:
                return
        except (RPCError, WorkflowQueryFailedError):  # not started yet, or no worker has taken the query yet
            pass
        await asyncio.sleep(0.3)


async def test_a_restart_is_waited_out_and_a_longer_outage_fails_cleanly_then_a_rerun_collects(slow_policy, tmp_path):
    task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task
    server = DevServer(free_port(), free_port(), tmp_path / "temporal.db", ui=False)
    queue, run_id = f"restart-{uuid.uuid4().hex[:6]}", f"rs{uuid.uuid4().hex[:6]}"
    # The reaper sweeps every 2 s: a sandbox orphaned by the outage (a boot whose completion the dead server never
    # heard, booted again on retry) is removed once its rollout closed, before the worker stops.
    env = {
        "ROLLOUT_POLICY_URL": slow_policy.url,
        "ROLLOUT_TASK_QUEUE": queue,
        "ROLLOUT_RESULTS_DIR": str(tmp_path / "results"),
        "ROLLOUT_REAP_INTERVAL_S": "2",
    }
    batch = [rollout_input(task, sample, 0, PolicySpec(), BUDGETS) for sample in range(3)]
    await server.start()
    try:
        async with worker_process(
            server.address, ["--host-id", f"rs-{uuid.uuid4().hex[:6]}", "--adapter-port", "0"], env=env
        ):
            client = await connect(server.address)
            run = asyncio.create_task(run_rollouts(client, batch[:2], run_id, task_queue=queue, server_wait_s=120))
            await first_turn(client, workflow_id_for(run_id, task, 0, 0))
            await server.kill()
            await asyncio.sleep(SDK_RETRY_S + 5)
            await server.start()
            slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
            assert [(r.status, r.reward) for r in await run] == [("completed", 1.0)] * 2

            run = asyncio.create_task(run_rollouts(client, batch[2:], run_id, task_queue=queue, server_wait_s=2))
            await first_turn(client, workflow_id_for(run_id, task, 2, 0))
            await server.kill()
            (failed,) = await run
            assert (failed.status, failed.abort_reason) == ("failed", "server_unavailable")
            assert "did not answer for 2 s" in failed.error
            await server.start()
            (collected,) = await run_rollouts(client, batch[2:], run_id, task_queue=queue)
            assert (collected.status, collected.reward, collected.workflow_id) == ("completed", 1.0, failed.workflow_id)
            await asyncio.wait_for(until_no_containers_of(run_id), timeout=120)
    finally:
        await server.stop()
