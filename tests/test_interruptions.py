"""Interruptions are not failures: worker SIGKILLs (restarted under the same host id) and a Temporal server outage
inside one agent run are resumed every time, however many, at no cost of the run's failure budget, with no
trained token lost or duplicated against the policy server's records. Real processes throughout: the dev server,
``worker.py``, Docker sandboxes, Claude Code and the slow scripted policy."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.session import PolicySpec, SessionConfig
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.session_spool import SessionSpool
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.local_services import DevServer, free_port, worker_process
from durable_rollouts.trainer_client.rollout_queries import running_agent_attempt
from durable_rollouts.trainer_client.rollout_runs import connect, rollout_input, start_rollout
from tests.killed_workers import BUDGETS, sampled_runs, wait_for_turns, worker_env
from tests.local_cluster import start_dev_server
from tests.waiting import AFTER_DISRUPTION_TURN_S, HANG_GUARD_S
from worker import release_sessions_of_ended_rollouts
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


# A long session (read-only turns before the oracle's patch) whose turns take about a third of a kill-and-resume
# cycle: the agent is mid-run at every interruption, and a turn completes between two of them, as Claude Code
# expects of a server it retries.
EXPLORE_TURNS = 10
TURN_BETWEEN_KILLS_S = 6.0


@pytest_asyncio.fixture(loop_scope="session")
async def long_policy(renderer) -> AsyncIterator[ScriptedPolicyServer]:
    server = ScriptedPolicyServer(
        renderer,
        default_policy="slow",
        oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)),
        delay_s=TURN_BETWEEN_KILLS_S,
        oracle_explore_turns=EXPLORE_TURNS,
    )
    server.url = await server.start()
    yield server
    await server.stop()


async def wait_for_agent_attempt(client, handle, attempt: int) -> None:
    """Until a worker runs attempt ``attempt`` (or a later one) of the rollout's agent activity."""

    async def poll() -> None:
        while (running := await running_agent_attempt(client, handle.id)) is None or running < attempt:
            assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING, (
                "the rollout ended before the interruptions were over"
            )
            await asyncio.sleep(0.3)

    await asyncio.wait_for(poll(), HANG_GUARD_S)


@dataclass
class RestartableHost:
    """One rollout on a host that a test kills and restarts: the dev server (its own database, so it may be killed
    and started again), the worker's arguments and environment (one host id and adapter port for every restart),
    the client and the rollout's handle (both replaced after the server restarts)."""

    server: DevServer
    args: list[str]
    env: dict[str, str]
    client: Client
    handle: WorkflowHandle

    def worker(self):
        return worker_process(self.server.address, self.args, env=self.env)

    async def last_worker_finishes(self, policy: ScriptedPolicyServer, attempt: int) -> RolloutResult:
        """The last restart: once it runs the agent's ``attempt``, the policy speeds up and the rollout ends."""
        async with self.worker():
            await wait_for_agent_attempt(self.client, self.handle, attempt)
            policy.delay_s = AFTER_DISRUPTION_TURN_S
            return await self.handle.result()


@asynccontextmanager
async def restartable_host(
    policy: ScriptedPolicyServer, task, tmp_path: Path, name: str
) -> AsyncIterator[RestartableHost]:
    server = DevServer(free_port(), free_port(), tmp_path / "temporal.db", ui=False)
    await server.start()
    queue, host_id, port = f"int-{uuid.uuid4().hex[:6]}", f"int-{uuid.uuid4().hex[:6]}", free_port()
    try:
        client = await connect(server.address)
        handle = await start_rollout(
            client, rollout_input(task, 0, 0, PolicySpec(), BUDGETS), f"{name}{uuid.uuid4().hex[:4]}", queue
        )
        args = ["--host-id", host_id, "--adapter-port", str(port)]
        yield RestartableHost(server, args, worker_env(policy, queue, tmp_path), client, handle)
    finally:
        await server.kill()


def check_first_run_resumed(result: RolloutResult, policy: ScriptedPolicyServer, interruptions: int) -> None:
    """Completed on the first agent run, nothing discarded, every interruption counted; every trained turn is one the
    policy sampled, none twice (what was sampled but not trained is at most the replies in flight at the
    interruptions)."""
    assert (result.status, result.reward, result.attempts, result.discarded) == ("completed", 1.0, 1, []), result
    assert result.agent is not None and result.agent.interruptions == interruptions, result.agent
    runs = sampled_runs(unpack_trajectory(result.trajectory))
    records = {
        (tuple(r.output_ids), tuple(r.output_logprobs))
        for r in policy.records_for(result.agent.session_id)
        if r.output_ids
    }
    assert len(runs) == len(set(runs)) == result.agent.turns, "every turn once: none lost, none duplicated"
    assert set(runs) <= records, "every trained token is one the policy server sampled"


async def test_five_worker_kills_inside_one_agent_run_are_resumed_on_its_first_run(long_policy, task, tmp_path: Path):
    async with restartable_host(long_policy, task, tmp_path, "kills") as host:
        for kill in range(5):
            async with host.worker() as doomed:
                await wait_for_agent_attempt(host.client, host.handle, kill + 1)
                if kill == 0:
                    await wait_for_turns(host.handle, 1)
                os.killpg(doomed.pid, signal.SIGKILL)
        result = await host.last_worker_finishes(long_policy, attempt=6)
    check_first_run_resumed(result, long_policy, interruptions=5)


async def test_an_outage_then_two_kills_are_resumed_on_the_first_run(long_policy, task, tmp_path: Path):
    async with restartable_host(long_policy, task, tmp_path, "mix") as host:
        async with host.worker() as doomed:
            await wait_for_turns(host.handle, 1)
            await host.server.kill()  # longer than the heartbeat timeout: the attempt times out on the server's side
            await asyncio.sleep(20)
            await host.server.start()
            host.client = await connect(host.server.address)
            host.handle = host.client.get_workflow_handle(host.handle.id, result_type=RolloutResult)
            await wait_for_agent_attempt(host.client, host.handle, 2)
            os.killpg(doomed.pid, signal.SIGKILL)
        async with host.worker() as doomed:
            await wait_for_agent_attempt(host.client, host.handle, 3)
            os.killpg(doomed.pid, signal.SIGKILL)
        result = await host.last_worker_finishes(long_policy, attempt=4)
    check_first_run_resumed(result, long_policy, interruptions=3)


async def test_a_restart_releases_at_once_the_restored_sessions_whose_rollouts_already_ended(renderer, tmp_path: Path):
    env = await start_dev_server()
    try:
        client, queue = env.client, f"nobody-{uuid.uuid4().hex[:6]}"
        rollout = rollout_input(
            next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task,
            0,
            0,
            PolicySpec(),
            BUDGETS,
        )
        running = await client.start_workflow(
            CodingAgentRollout.run, rollout, id=f"running-{uuid.uuid4().hex[:6]}", task_queue=queue
        )
        ended = await client.start_workflow(
            CodingAgentRollout.run, rollout, id=f"ended-{uuid.uuid4().hex[:6]}", task_queue=queue
        )
        await ended.terminate("the rollout moved on")
        before = AdapterServer(renderer, spool=SessionSpool(tmp_path / "spool"))
        await before.start()
        labels = {"running": f"{running.id}#1", "ended": f"{ended.id}#1", "unknown": "never-started#2"}
        opened = {
            name: before.registry.open_session(SessionConfig(policy_url="http://127.0.0.1:1", label=label))
            for name, label in labels.items()
        }
        await before.stop()
        after = AdapterServer(renderer, spool=SessionSpool(tmp_path / "spool"))
        await after.start()
        try:
            restored = after.registry.restore_spooled()
            released = await release_sessions_of_ended_rollouts(after, client, restored)
            assert sorted(released) == sorted([opened["ended"].session_id, opened["unknown"].session_id])
            assert after.registry.get(opened["running"].session_id) is not None, (
                "a running rollout may still resume its session"
            )
            assert len(list((tmp_path / "spool").glob("*.jsonl"))) == 1
        finally:
            await after.stop()
        await running.terminate("test over")
    finally:
        await env.shutdown()
