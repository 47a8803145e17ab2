"""Chaos tests with real processes: workers killed with SIGKILL, the Temporal server restarted.

Each test runs real worker subprocesses (``worker.py``), real Docker sandboxes,
the real Claude Code binary and a slow scripted policy (so there is time to
strike mid-run), and checks that nothing is lost, duplicated or leaked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.trainer_client.local_services import DevServer, free_port, worker_process
from durable_rollouts.trainer_client.rollout_runs import connect, rollout_input, run_rollouts, start_rollout
from tests.killed_workers import BUDGETS, sampled_runs, wait_for_turns, worker_env
from tests.local_cluster import start_dev_server
from tests.waiting import AFTER_DISRUPTION_TURN_S

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TEMPORAL_CLI = Path(sys.prefix) / "bin" / "temporal"


async def test_kill_9_then_restart_resumes_the_same_rollout(slow_policy, task, tmp_path):
    env = await start_dev_server()
    address = env.client.service_client.config.target_host
    queue, host_id, port = f"chaos-{uuid.uuid4().hex[:6]}", f"chaos-{uuid.uuid4().hex[:6]}", free_port()
    args = ["--host-id", host_id, "--adapter-port", str(port)]
    try:
        async with worker_process(address, args, env=worker_env(slow_policy, queue, tmp_path)) as doomed:
            handle = await start_rollout(
                env.client, rollout_input(task, 0, 0, PolicySpec(), BUDGETS), f"kill{uuid.uuid4().hex[:4]}", queue
            )
            await wait_for_turns(handle, 1)
            os.killpg(doomed.pid, signal.SIGKILL)
        slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
        async with worker_process(address, args, env=worker_env(slow_policy, queue, tmp_path)):
            result = await handle.result()
        assert (result.status, result.reward, result.attempts) == ("completed", 1.0, 1), result
        runs = sampled_runs(unpack_trajectory(result.trajectory))
        records = {
            (tuple(r.output_ids), tuple(r.output_logprobs))
            for r in slow_policy.records_for(result.agent.session_id)
            if r.output_ids
        }
        assert len(runs) == len(set(runs)) == result.agent.turns == 3, "every turn once: none lost, none duplicated"
        assert set(runs) <= records and len(records - set(runs)) <= 1, (
            "at most the reply in flight at the kill is unused"
        )
        executions = [w async for w in env.client.list_workflows(f"WorkflowId='{handle.id}'")]
        assert len(executions) == 1
    finally:
        await env.shutdown()


async def test_kill_9_without_restart_moves_to_another_host_and_reaps_the_orphan(slow_policy, task, tmp_path):
    env = await start_dev_server()
    address = env.client.service_client.config.target_host
    queue = f"chaos-{uuid.uuid4().hex[:6]}"
    rollout = rollout_input(task, 0, 0, PolicySpec(), BUDGETS).model_copy(update={"resume_window_s": 3})
    try:
        async with worker_process(
            address,
            ["--host-id", f"doomed-{uuid.uuid4().hex[:6]}", "--adapter-port", "0"],
            env=worker_env(slow_policy, queue, tmp_path),
        ) as doomed:
            handle = await start_rollout(env.client, rollout, f"move{uuid.uuid4().hex[:4]}", queue)
            await wait_for_turns(handle, 1)
            os.killpg(doomed.pid, signal.SIGKILL)
        slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
        async with worker_process(
            address,
            ["--host-id", f"other-{uuid.uuid4().hex[:6]}", "--adapter-port", "0"],
            env=worker_env(slow_policy, queue, tmp_path),
        ):
            result = await handle.result()
            assert (result.status, result.reward, result.attempts) == ("completed", 1.0, 2), result
            for _ in range(100):
                leftovers = [
                    c
                    for c in await DockerSandboxes().list_managed()
                    if c.labels.get("io.rollouts.workflow_id") == handle.id
                ]
                if not leftovers:
                    break
                await asyncio.sleep(0.2)
            assert leftovers == [], "the dead worker's sandbox must be reaped once its workflow closed"
    finally:
        await env.shutdown()


@asynccontextmanager
async def restartable_cluster(
    policy: ScriptedPolicyServer, tmp_path: Path
) -> AsyncIterator[tuple[DevServer, Client, str]]:
    """A dev server on its own db file (a test may kill and restart it) and one worker; yields (server, client,
    queue)."""
    server = DevServer(free_port(), free_port(), tmp_path / "temporal.db", ui=False)
    await server.start()
    queue = f"chaos-{uuid.uuid4().hex[:6]}"
    try:
        async with worker_process(
            server.address,
            ["--host-id", f"srv-{uuid.uuid4().hex[:6]}", "--adapter-port", "0"],
            env=worker_env(policy, queue, tmp_path),
        ):
            yield server, await connect(server.address), queue
    finally:
        await server.kill()


async def test_a_temporal_server_restart_mid_run_loses_no_rollout(slow_policy, task, tmp_path):
    async with restartable_cluster(slow_policy, tmp_path) as (server, client, queue):
        handles = [
            await start_rollout(
                client, rollout_input(task, i, 0, PolicySpec(), BUDGETS), f"srv{uuid.uuid4().hex[:4]}", queue
            )
            for i in range(2)
        ]
        await wait_for_turns(handles[0], 1)
        await server.kill()
        await asyncio.sleep(2)
        await server.start()
        slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
        results = await asyncio.gather(*(h.result() for h in handles))
    assert [(r.status, r.reward) for r in results] == [("completed", 1.0)] * 2


async def agent_attempts(client, workflow_id: str) -> list[int]:
    """The attempt number of every ``run_claude_code`` activity that started, from the workflow's history."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    scheduled = {
        e.event_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "run_claude_code"
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]


async def test_a_20s_server_restart_under_8_running_agents_loses_no_agent_work(slow_policy, task, tmp_path):
    """Longer than the agent's heartbeat timeout: every agent activity times out and is retried,
    and the retry re-attaches to the Claude Code process that kept running in its sandbox."""
    async with restartable_cluster(slow_policy, tmp_path) as (server, client, queue):
        batch = [rollout_input(task, i, 0, PolicySpec(), BUDGETS) for i in range(8)]
        run = asyncio.create_task(
            run_rollouts(client, batch, run_id=f"r20-{uuid.uuid4().hex[:4]}", concurrency=8, task_queue=queue)
        )
        while (await client.count_workflows("RolloutTurns >= 1 AND ExecutionStatus = 'Running'")).count < 8:
            assert not run.done(), run
            await asyncio.sleep(0.5)
        await server.kill()
        await asyncio.sleep(20)
        await server.start()
        slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
        results = await run
        attempts = {r.workflow_id: await agent_attempts(client, r.workflow_id) for r in results}
    assert [(r.status, r.reward, r.attempts) for r in results] == [("completed", 1.0, 1)] * 8, results
    assert all(r.agent is not None and r.agent.turns == 3 for r in results), [r.agent for r in results]
    assert any(max(a) > 1 for a in attempts.values()), f"the restart must hit running agents: {attempts}"


async def containers_of(workflow_id: str, attempt: int | None = None) -> list[str]:
    return [
        c.name
        for c in await DockerSandboxes().list_managed()
        if c.labels.get("io.rollouts.workflow_id") == workflow_id
        and (attempt is None or c.labels.get("io.rollouts.attempt") == str(attempt))
    ]


async def kill_during_boot(doomed, workflow_id: str) -> list[str]:
    """SIGKILL the worker once its sandbox for ``workflow_id`` exists (its boot then waits in the held pre-command)."""
    while not (names := await containers_of(workflow_id)):
        await asyncio.sleep(0.1)
    os.killpg(doomed.pid, signal.SIGKILL)
    await doomed.wait()
    return names


RELEASE_FILE = "/tmp/rollout-boot-release"


def held_booting(task):
    """``task`` whose boots wait in their last pre-command until ``release_boots`` lets them go."""
    return task.model_copy(
        update={"pre_commands": [*task.pre_commands, f"until [ -e {RELEASE_FILE} ]; do sleep 0.2; done"]}
    )


@contextlib.asynccontextmanager
async def release_boots(workflow_id: str, held: str) -> AsyncIterator[None]:
    """While the block runs, every boot of ``workflow_id`` but the ``held`` sandbox's goes on at once."""
    sandboxes = DockerSandboxes()

    async def release() -> None:
        released: set[str] = set()
        while True:
            for container in await sandboxes.list_managed():
                if container.labels.get("io.rollouts.workflow_id") == workflow_id and container.name not in {
                    held,
                    *released,
                }:
                    with contextlib.suppress(SandboxError):  # gone meanwhile
                        result = await sandboxes.exec_in(
                            container.id, ["touch", RELEASE_FILE], user="root", cwd="/", timeout_s=30
                        )
                        if result.exit_code == 0:
                            released.add(container.name)
            await asyncio.sleep(0.2)

    task = asyncio.create_task(release())
    try:
        yield
    finally:
        task.cancel()


async def test_kill_9_during_boot_moves_on_by_heartbeat_and_reaps_the_half_booted_sandbox(slow_policy, task, tmp_path):
    env = await start_dev_server()
    address = env.client.service_client.config.target_host
    queue = f"chaos-{uuid.uuid4().hex[:6]}"
    rollout = rollout_input(held_booting(task), 0, 0, PolicySpec(), BUDGETS).model_copy(
        update={"host_start_timeout_s": 3}
    )
    try:
        async with worker_process(
            address,
            ["--host-id", f"doomed-{uuid.uuid4().hex[:6]}", "--adapter-port", "0"],
            env=worker_env(slow_policy, queue, tmp_path),
        ) as doomed:
            handle = await start_rollout(env.client, rollout, f"boot{uuid.uuid4().hex[:4]}", queue)
            (half_booted,) = await kill_during_boot(doomed, handle.id)
        slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
        async with (
            release_boots(handle.id, half_booted),
            worker_process(
                address,
                ["--host-id", f"other-{uuid.uuid4().hex[:6]}", "--adapter-port", "0"],
                env=worker_env(slow_policy, queue, tmp_path),
            ),
        ):
            while half_booted in await containers_of(handle.id, attempt=1):
                await asyncio.sleep(0.2)
            status_when_reaped = (await handle.describe()).status
            result = await handle.result()
        assert (result.status, result.reward, result.attempts) == ("completed", 1.0, 2), result
        assert status_when_reaped == WorkflowExecutionStatus.RUNNING, (
            "the abandoned attempt's sandbox goes while the rollout still runs"
        )
        history = await handle.fetch_history()
        boot_timeouts = [
            e.activity_task_timed_out_event_attributes.failure
            for e in history.events
            if e.HasField("activity_task_timed_out_event_attributes")
        ]
        assert any("HEARTBEAT" in str(f) for f in boot_timeouts), (
            "the lost host is noticed by the boot's heartbeat timeout"
        )
    finally:
        await env.shutdown()


async def test_kill_9_during_boot_then_restart_removes_the_half_booted_sandbox_at_start_up(slow_policy, task, tmp_path):
    env = await start_dev_server()
    address = env.client.service_client.config.target_host
    queue, args = (
        f"chaos-{uuid.uuid4().hex[:6]}",
        ["--host-id", f"reboot-{uuid.uuid4().hex[:6]}", "--adapter-port", "0"],
    )
    try:
        async with worker_process(address, args, env=worker_env(slow_policy, queue, tmp_path)) as doomed:
            handle = await start_rollout(
                env.client,
                rollout_input(held_booting(task), 0, 0, PolicySpec(), BUDGETS),
                f"reboot{uuid.uuid4().hex[:4]}",
                queue,
            )
            (half_booted,) = await kill_during_boot(doomed, handle.id)
        slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
        async with (
            release_boots(handle.id, half_booted),
            worker_process(address, args, env=worker_env(slow_policy, queue, tmp_path)),
        ):
            while half_booted in await containers_of(handle.id):
                await asyncio.sleep(0.2)
            status_when_reaped = (await handle.describe()).status
            result = await handle.result()
        assert status_when_reaped == WorkflowExecutionStatus.RUNNING, (
            "the half-booted sandbox goes at start-up, not when the rollout closes"
        )
        assert (result.status, result.reward, result.attempts) == ("completed", 1.0, 1), result
    finally:
        await env.shutdown()
