"""RolloutGroup on Temporal's time-skipping test server: real child ``CodingAgentRollout`` workflows over fake
activities."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowHandle
from temporalio.exceptions import ApplicationError

from activities.error_types import ErrorType
from durable_rollouts.contracts.probes import ImpossibleProbe
from durable_rollouts.contracts.rollout_group import PROBE_REASON, GroupFilter, GroupInput
from durable_rollouts.contracts.rollouts import AgentProgress, RolloutInput
from durable_rollouts.contracts.workflow_ids import rollout_workflow_id
from tests.waiting import HANG_GUARD_S, until
from tests.workflows.fake_rollout_activities import SHARED, GroupCluster, rollout, workers
from workflows import search_attributes as attrs
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.rollout_group import RolloutGroup

pytestmark = pytest.mark.asyncio(loop_scope="session")


def group_of(k: int, run_id: str | None = None, template: RolloutInput | None = None, **options) -> GroupInput:
    base = template or rollout()
    samples = [base.model_copy(update={"sample_index": i, "group_index": 3}) for i in range(k)]
    return GroupInput(run_id=run_id or f"g{uuid.uuid4().hex[:6]}", group_index=3, rollouts=samples, **options)


def child_id(group: GroupInput, sample: int) -> str:
    return rollout_workflow_id(group.run_id, group.prompt_key, sample, group.group_index)


@asynccontextmanager
async def started_group(env, cluster: GroupCluster, group: GroupInput) -> AsyncIterator[WorkflowHandle]:
    """The group's workflow started, with the workers on the fakes running until the block ends."""
    shared, host = workers(env, cluster, (RolloutGroup, CodingAgentRollout))
    async with shared, host:
        yield await env.client.start_workflow(RolloutGroup.run, group, id=f"group-{group.run_id}", task_queue=SHARED)


async def run_group(env, cluster: GroupCluster, group: GroupInput):
    async with started_group(env, cluster, group) as handle:
        return await handle.result()


async def test_an_infrastructure_failure_is_refilled_by_a_fresh_child_and_the_group_ends_all_valid(env):
    cluster = GroupCluster()
    cluster.boot_failures = [ApplicationError("docker daemon gone", type=ErrorType.SANDBOX_BOOT_ERROR)]
    group = group_of(4)
    result = await run_group(env, cluster, group)
    assert (result.status, result.valid_mask, result.rewards, result.refilled) == (
        "completed",
        [True] * 4,
        [1.0] * 4,
        1,
    )
    (refilled,) = [s for s in result.samples if len(s.runs) == 2]
    failed, fresh = refilled.runs
    assert (failed.status, failed.abort_reason, failed.outcome) == ("aborted", "sandbox_boot_failed", "infrastructure")
    assert (failed.workflow_id, fresh.workflow_id) == (
        child_id(group, refilled.sample_index),
        f"{child_id(group, refilled.sample_index)}-refill1",
    )
    assert refilled.rollout.workflow_id == fresh.workflow_id and refilled.rollout.reward == 1.0
    assert [s.runs[0].workflow_id for s in result.samples] == [child_id(group, i) for i in range(4)], (
        "children keep the flat run's ids"
    )
    assert result.kept and result.dropped_by is None


async def test_a_groups_samples_hold_no_logs_while_each_childs_own_result_keeps_them(env):
    cluster = GroupCluster()
    group = group_of(2)
    async with started_group(env, cluster, group) as handle:
        result = await handle.result()
        children = [
            await env.client.get_workflow_handle_for(CodingAgentRollout.run, child_id(group, i)).result()
            for i in range(2)
        ]
    for sample, child in zip(result.samples, children, strict=True):
        assert sample.rollout.workflow_id == child.workflow_id
        assert (child.agent.log, child.evaluation.log) == (
            f"agent log of {child.workflow_id}\n",
            f"grading log of {child.workflow_id}\n",
        )
        assert (sample.rollout.agent.log, sample.rollout.evaluation.log) == ("", ""), (
            "K samples' logs never add up in the group's result"
        )
        assert sample.rollout.evaluation.log_bytes == child.evaluation.log_bytes > 0, "the log's size stays"
        assert sample.rollout == child.without_logs() and sample.rollout.trajectory == child.trajectory


async def test_a_sample_that_keeps_failing_uses_up_the_refill_budget_and_the_group_says_it_is_insufficient(env):
    cluster = GroupCluster()
    group = group_of(3, refill_budget=2)
    cluster.failing_boots = {child_id(group, 0), f"{child_id(group, 0)}-refill1", f"{child_id(group, 0)}-refill2"}
    result = await run_group(env, cluster, group)
    assert (result.status, result.valid_mask, result.refilled) == ("insufficient", [False, True, True], 2)
    assert [r.workflow_id for r in result.samples[0].runs] == [
        child_id(group, 0),
        f"{child_id(group, 0)}-refill1",
        f"{child_id(group, 0)}-refill2",
    ]
    assert result.samples[0].invalid_reason == "sandbox_boot_failed" and result.samples[0].reward == 0.0
    assert "2 of 3 valid, 3 needed" in result.note and "sandbox_boot_failed" in result.note


async def test_an_image_no_registry_has_is_the_rows_error_reported_once_and_never_refilled(env):
    cluster = GroupCluster()
    group = group_of(3, refill_budget=2)
    cluster.missing_images = {group.rollouts[0].task.image}
    result = await run_group(env, cluster, group)
    assert (result.status, result.refilled, cluster.calls.count("boot_sandbox")) == ("insufficient", 0, 3), (
        "one boot per sample, no refill"
    )
    assert {(s.outcome, s.invalid_reason) for s in result.samples} == {("task", "image_not_found")}


async def test_a_task_error_is_not_refilled_and_min_valid_decides_the_status(env):
    cluster = GroupCluster()
    broken = rollout()
    broken.task.workdir = ""
    result = await run_group(env, cluster, group_of(2, template=broken, min_valid=0))
    assert (result.status, result.valid_mask, result.refilled) == ("completed", [False, False], 0)
    assert {(s.outcome, s.invalid_reason) for s in result.samples} == {("task", "missing_image_or_workdir")}


async def test_a_probes_samples_are_judged_never_valid_its_infrastructure_failures_refilled_and_the_group_never_kept(
    env,
):
    cluster = GroupCluster()
    probe = rollout()
    probe.task.probe = ImpossibleProbe(source="demo-1", seed=5)
    group = group_of(3, template=probe)
    cluster.failing_boots = {child_id(group, 0)}
    cluster.rewards = {child_id(group, 1): 0.0}
    result = await run_group(env, cluster, group)
    assert (result.status, result.valid_mask, result.refilled) == ("completed", [False] * 3, 1)
    assert {(s.outcome, s.invalid_reason) for s in result.samples} == {("probe", PROBE_REASON)}
    assert result.probe_verdicts == ["cheated", "held", "cheated"] and result.rewards == [0.0] * 3
    assert (result.kept, result.dropped_by) == (False, "probe")


@pytest.mark.parametrize(
    ("group_filter", "rewards", "kept", "dropped_by"),
    [
        (GroupFilter.NONZERO_VARIANCE, [1.0, 1.0], False, "zero_variance"),
        (GroupFilter.NONZERO_VARIANCE, [0.0, 0.0], False, "zero_variance"),
        (GroupFilter.NONZERO_VARIANCE, [1.0, 0.0], True, None),
        (GroupFilter.KEEP_ALL, [0.0, 0.0], True, None),
    ],
)
async def test_the_run_filter_is_judged_on_the_valid_rewards(env, group_filter, rewards, kept, dropped_by):
    cluster = GroupCluster()
    group = group_of(2, filter=group_filter)
    cluster.rewards = {child_id(group, i): reward for i, reward in enumerate(rewards)}
    result = await run_group(env, cluster, group)
    assert (result.status, result.rewards, result.kept, result.dropped_by) == ("completed", rewards, kept, dropped_by)


async def test_the_min_valid_filter_drops_a_group_below_it_and_says_so(env):
    cluster = GroupCluster()
    group = group_of(3, refill_budget=0, min_valid=3, filter=GroupFilter.MIN_VALID)
    cluster.failing_boots = {child_id(group, 1)}
    result = await run_group(env, cluster, group)
    assert (result.status, result.valid_mask, result.kept, result.dropped_by) == (
        "insufficient",
        [True, False, True],
        False,
        "min_valid",
    )


async def test_a_cut_stops_every_running_child_gracefully_and_refills_nothing(env):
    cluster = GroupCluster()
    group = group_of(3)
    cluster.hanging = {child_id(group, 1), child_id(group, 2)}
    async with started_group(env, cluster, group) as handle:
        await until(lambda: cluster.calls.count("run_claude_code") == 3)
        await progress_reaches(handle, done=1)
        await handle.signal(RolloutGroup.cut, "straggler_cut")
        result = await handle.result()
    assert (result.status, result.valid_mask, result.kept, result.dropped_by) == (
        "cut",
        [True, False, False],
        False,
        "not_completed",
    )
    assert [(s.outcome, s.invalid_reason) for s in result.samples[1:]] == [("cut", "straggler_cut")] * 2
    assert sorted(cluster.destroyed) == sorted(child_id(group, i) for i in range(3)), "every sandbox destroyed"
    assert result.refilled == 0


async def test_progress_and_ui_details_follow_the_children(env):
    cluster = GroupCluster()
    group = group_of(2)
    cluster.hanging = {child_id(group, 1)}
    async with started_group(env, cluster, group) as handle:
        await progress_reaches(handle, done=1)
        progress = await handle.query(RolloutGroup.progress)
        details = (await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)).current_details
        description = await handle.describe()
        await handle.signal(RolloutGroup.cut, "")
        result = await handle.result()
        closed = await handle.describe()
    assert (progress.size, progress.done, progress.valid, progress.running) == (2, 1, 1, 1)
    assert progress.children == [child_id(group, 0), child_id(group, 1)]
    assert "**done** 1/2 · **valid** 1 · **running** 1" in details
    assert f"`{child_id(group, 0)}`: completed (model)" in details and f"`{child_id(group, 1)}`: running" in details
    assert (
        description.typed_search_attributes.get(attrs.GROUP_STATUS),
        description.typed_search_attributes.get(attrs.GROUP_VALID),
    ) == ("running", 1)
    assert result.status == "cut" and closed.typed_search_attributes.get(attrs.GROUP_STATUS) == "cut"


async def test_the_guard_stopping_a_working_agent_is_the_models_outcome_and_is_not_refilled(env):
    cluster = GroupCluster()
    group = group_of(1, template=rollout(guard_s=6))
    cluster.hanging = {child_id(group, 0)}
    async with started_group(env, cluster, group) as handle:
        await until(lambda: "run_claude_code" in cluster.calls)
        child = env.client.get_workflow_handle(child_id(group, 0))
        await child.signal(
            CodingAgentRollout.agent_progress, AgentProgress(attempt=1, session_id="s1", turns=4, tokens=500)
        )
        result = await handle.result()
    (sample,) = result.samples
    assert (sample.rollout.abort_reason, sample.rollout.stopped_in, sample.rollout.turns) == (
        "wall_clock_timeout",
        "agent",
        4,
    )
    assert (sample.valid, sample.outcome, sample.reward, result.refilled, result.status) == (
        True,
        "model",
        0.0,
        0,
        "completed",
    )


async def progress_reaches(handle, done: int) -> None:
    """Poll the group's progress query until ``done`` slots have ended."""

    async def poll() -> None:
        while (await handle.query(RolloutGroup.progress)).done < done:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), HANG_GUARD_S)


async def test_a_temporal_cancel_of_the_group_stops_its_children_like_a_cut(env):
    cluster = GroupCluster()
    group = group_of(2)
    cluster.hanging = {child_id(group, 0), child_id(group, 1)}
    async with started_group(env, cluster, group) as handle:
        await until(lambda: cluster.calls.count("run_claude_code") == 2)
        await handle.cancel()
        result = await handle.result()
    assert (result.status, result.note, result.valid_mask) == ("cut", "stopped: cancelled", [False, False])
    assert {(s.outcome, s.invalid_reason) for s in result.samples} == {("cancelled", "cancelled")}
    assert sorted(cluster.destroyed) == sorted(child_id(group, i) for i in range(2))


async def test_a_child_id_another_run_already_used_is_not_run_twice_but_refilled_under_a_fresh_id(env):
    cluster = GroupCluster()
    group = group_of(1)
    shared, host = workers(env, cluster, (RolloutGroup, CodingAgentRollout))
    async with shared, host:
        await env.client.execute_workflow(
            CodingAgentRollout.run, group.rollouts[0], id=child_id(group, 0), task_queue=SHARED
        )
        result = await env.client.execute_workflow(
            RolloutGroup.run, group, id=f"group-{group.run_id}", task_queue=SHARED
        )
    (sample,) = result.samples
    assert [(r.workflow_id, r.abort_reason, r.outcome) for r in sample.runs] == [
        (child_id(group, 0), "child_id_taken", "infrastructure"),
        (f"{child_id(group, 0)}-refill1", None, "model"),
    ]
    assert (result.status, result.valid_mask, result.refilled) == ("completed", [True], 1)
