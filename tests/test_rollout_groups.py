"""GRPO groups for real: RolloutGroup workflows over real workers, Docker sandboxes, Claude Code and graders.

The scripted oracle stands in for SGLang. One test SIGKILLs the host worker
under one child (its rollout may not move to another host: one agent attempt),
so the group must refill that sample with a fresh child; the others check the
filters on real results.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollout_group import GroupFilter, GroupInput
from durable_rollouts.contracts.rollouts import RolloutInput
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.workflow_ids import rollout_workflow_id
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.scripted_policy.turn_delays import MarkedPromptDelay
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.local_services import worker_process
from durable_rollouts.trainer_client.rollout_groups import fill_batch, group_id, start_group
from durable_rollouts.trainer_client.rollout_runs import rollout_input
from tests.local_cluster import containers_of_runs, local_cluster, start_dev_server
from tests.waiting import AFTER_DISRUPTION_TURN_S, HANG_GUARD_S
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
BUDGETS = RolloutBudgets(agent_budget_s=240, eval_timeout_s=120, guard_s=600)


def example_tasks() -> list[TaskSpec]:
    return [row.task for row in read_dataset(EXAMPLE_DATASET) if isinstance(row, DatasetRow)]


def group_of(
    task: TaskSpec, k: int, run_id: str, group_index: int = 0, template: RolloutInput | None = None, **options
) -> GroupInput:
    base = template or rollout_input(
        task, 0, group_index, PolicySpec(sampling=SamplingParams(max_new_tokens=2048)), BUDGETS
    )
    rollouts = [base.model_copy(update={"task": task, "sample_index": i, "group_index": group_index}) for i in range(k)]
    return GroupInput(run_id=run_id, group_index=group_index, rollouts=rollouts, **options)


async def child_on_host(client: Client, ids: list[str], host_marker: str) -> str:
    """The first of ``ids`` whose agent runs on a host queue containing ``host_marker`` and has made a model call."""

    async def poll() -> str:
        while True:
            for workflow_id in ids:
                try:
                    progress = await client.get_workflow_handle(workflow_id).query(CodingAgentRollout.progress)
                except (RPCError, WorkflowQueryFailedError):
                    continue
                if host_marker in progress.host_queue and progress.turns >= 1:
                    return workflow_id
            await asyncio.sleep(0.3)

    return await asyncio.wait_for(poll(), HANG_GUARD_S)


async def child_ids_in_history(client: Client, workflow_id: str) -> list[str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        event.child_workflow_execution_started_event_attributes.workflow_execution.workflow_id
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED
    ]


async def test_a_child_whose_host_is_killed_is_refilled_and_the_group_ends_all_valid(slow_policy, tmp_path: Path):
    env = await start_dev_server()
    address = env.client.service_client.config.target_host
    queue, run_id = f"grp-{uuid.uuid4().hex[:6]}", f"kg{uuid.uuid4().hex[:6]}"
    doomed_host, other_host = f"doomed-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    worker_env = {
        "ROLLOUT_POLICY_URL": slow_policy.url,
        "ROLLOUT_TASK_QUEUE": queue,
        "ROLLOUT_RESULTS_DIR": str(tmp_path),
        "ROLLOUT_REAP_INTERVAL_S": "2",
    }
    task = example_tasks()[0]
    single_attempt = rollout_input(task, 0, 0, PolicySpec(), BUDGETS).model_copy(
        update={"max_agent_attempts": 1, "resume_window_s": 3}
    )
    group = group_of(task, 4, run_id, template=single_attempt)
    first_ids = [rollout_workflow_id(run_id, task.instance_id, i, 0) for i in range(4)]
    try:
        doomed_args = ["--host-id", doomed_host, "--adapter-port", "0"]
        async with worker_process(address, doomed_args, env={**worker_env, "ROLLOUT_AGENT_SLOTS": "1"}) as doomed:
            async with worker_process(
                address,
                ["--host-id", other_host, "--adapter-port", "0"],
                env={**worker_env, "ROLLOUT_AGENT_SLOTS": "3"},
            ):
                handle = await start_group(env.client, group, queue)
                victim = await child_on_host(env.client, first_ids, doomed_host)
                os.killpg(doomed.pid, signal.SIGKILL)
                slow_policy.delay_s = AFTER_DISRUPTION_TURN_S
                result = await handle.result()
                leftovers = await _containers_after_reaping(run_id)
        history_children = await child_ids_in_history(env.client, handle.id)
    finally:
        await env.shutdown()
    assert (result.status, result.valid_mask, result.rewards, result.refilled) == (
        "completed",
        [True] * 4,
        [1.0] * 4,
        1,
    ), result.note
    (refilled,) = [s for s in result.samples if len(s.runs) == 2]
    assert [(r.workflow_id, r.abort_reason, r.outcome) for r in refilled.runs] == [
        (victim, "no_healthy_host", "infrastructure"),
        (f"{victim}-refill1", None, "model"),
    ]
    assert sorted(history_children) == sorted([*first_ids, f"{victim}-refill1"]), (
        "the failed child is in the group's history"
    )
    assert leftovers == [], "the dead host's sandbox is reaped"


async def _containers_after_reaping(run_id: str) -> list[str]:
    """The run's containers left once the surviving worker's reaper had its turn (polled; [] as soon as none)."""
    for _ in range(100):
        left = await containers_of_runs([run_id])
        if not left:
            return []
        await asyncio.sleep(0.3)
    return left


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def oracle_cluster(renderer, tmp_path_factory):
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET))
    )
    policy_url = await policy.start()
    async with local_cluster(policy_url, tmp_path_factory.mktemp("results"), BUDGETS) as (env, settings):
        yield env, settings, policy
    await policy.stop()


def unknown_to_the_oracle(task: TaskSpec) -> TaskSpec:
    """The task under a problem statement the oracle does not recognise: it answers without a fix (reward 0)."""
    return task.model_copy(
        update={"instance_id": f"{task.instance_id}-unknown", "problem_statement": "Make the code better.\n"}
    )


async def test_zero_variance_groups_and_groups_below_min_valid_are_dropped_and_reported(oracle_cluster, task_images):
    env, settings, _ = oracle_cluster
    task = example_tasks()[0]
    run_id = f"zv{uuid.uuid4().hex[:6]}"
    no_workdir = task.model_copy(update={"instance_id": f"{task.instance_id}-no-workdir", "workdir": ""})
    groups = [
        group_of(task, 2, run_id, 0, filter=GroupFilter.NONZERO_VARIANCE),
        group_of(unknown_to_the_oracle(task), 2, run_id, 1, filter=GroupFilter.NONZERO_VARIANCE),
        group_of(no_workdir, 2, run_id, 2, filter=GroupFilter.NONZERO_VARIANCE, min_valid=1),
    ]
    batch = await fill_batch(env.client, _source(groups), n_groups=3, task_queue=settings.task_queue)
    assert batch.groups == [] and len(batch.dropped) == 3
    by_index = {g.group_index: g for g in batch.dropped}
    assert (by_index[0].status, by_index[0].rewards, by_index[0].dropped_by) == (
        "completed",
        [1.0, 1.0],
        "zero_variance",
    )
    assert (by_index[1].status, by_index[1].rewards, by_index[1].dropped_by) == (
        "completed",
        [0.0, 0.0],
        "zero_variance",
    )
    assert (by_index[2].status, by_index[2].valid_mask, by_index[2].dropped_by) == (
        "insufficient",
        [False, False],
        "min_valid",
    )
    assert {s.invalid_reason for s in by_index[2].samples} == {"missing_image_or_workdir"} and by_index[2].refilled == 0
    metrics = batch.metrics()
    assert (metrics["groups_filtered"], metrics["groups_started"], metrics["samples_refilled"]) == (3, 3, 0)

    again = await fill_batch(env.client, _source(groups), n_groups=3, task_queue=settings.task_queue)
    first = sorted((g.group_index, g.samples[0].rollout and g.samples[0].rollout.elapsed_s) for g in batch.dropped)
    assert (
        sorted((g.group_index, g.samples[0].rollout and g.samples[0].rollout.elapsed_s) for g in again.dropped) == first
    ), "attached: nothing ran twice"
    assert await containers_of_runs([run_id]) == []


STRAGGLER = "STRAGGLER-MARKER: this task is slow to solve."


def straggling(task: TaskSpec, n: int) -> TaskSpec:
    """The task under another instance id whose problem statement carries the marker the scripted delay slows down."""
    return task.model_copy(
        update={
            "instance_id": f"{task.instance_id}-slow{n}",
            "problem_statement": f"{task.problem_statement}\n{STRAGGLER}\n",
        }
    )


@pytest.mark.parametrize("straggler_policy", ["cut", "handover"])
async def test_over_sampling_six_groups_for_four_returns_after_four_and_cuts_or_hands_over_the_stragglers(
    oracle_cluster, task_images, straggler_policy
):
    env, settings, policy = oracle_cluster
    policy.turn_delay = MarkedPromptDelay(STRAGGLER, slow_s=60.0)
    run_id = f"os{uuid.uuid4().hex[:6]}"
    tasks = example_tasks()
    fast = [group_of(task, 1, run_id, g) for g, task in enumerate(tasks[:4])]
    slow = [group_of(straggling(tasks[0], n), 1, run_id, 4 + n) for n in range(2)]
    try:
        batch = await fill_batch(
            env.client,
            _source([*slow, *fast]),
            n_groups=4,
            over_sample=6,
            straggler_policy=straggler_policy,
            task_queue=settings.task_queue,
        )
        assert sorted(g.group_index for g in batch.groups) == [0, 1, 2, 3] and all(
            g.rewards == [1.0] for g in batch.groups
        )
        assert batch.started == 6 and batch.dropped == []
        if straggler_policy == "cut":
            assert sorted(g.group_index for g in batch.cut) == [4, 5] and batch.handed_over == []
            assert {(g.status, g.samples[0].invalid_reason) for g in batch.cut} == {("cut", "straggler_cut")}
            assert await containers_of_runs([run_id]) == [], "a cut straggler's sandboxes are gone with it"
        else:
            assert sorted(g.group_index for g in batch.handed_over) == [4, 5] and batch.cut == []
            running = [await env.client.get_workflow_handle(group_id(g)).describe() for g in batch.handed_over]
            assert {d.status for d in running} == {WorkflowExecutionStatus.RUNNING}, "handed over still running"
            policy.turn_delay = None
            finished = await fill_batch(
                env.client, _source([]), n_groups=2, carried=batch.handed_over, task_queue=settings.task_queue
            )
            assert sorted(g.group_index for g in finished.groups) == [4, 5] and all(
                g.rewards == [1.0] for g in finished.groups
            )
            assert [await env.client.get_workflow_handle(group_id(g)).describe() for g in batch.handed_over][
                0
            ].run_id == running[0].run_id
    finally:
        policy.turn_delay = None
    assert batch.metrics()["groups_cut" if straggler_policy == "cut" else "groups_handed_over"] == 2


def _source(groups: list[GroupInput]):
    queue = list(groups)

    def next_groups(k: int) -> list[GroupInput]:
        taken, queue[:] = queue[:k], queue[k:]
        return taken

    return next_groups
