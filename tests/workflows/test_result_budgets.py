"""A workflow's own result stays within its payload budget (``durable_rollouts.contracts.payload_budget``), so the
worker can always encode it: a rollout leaves out logs that would put it over, a group leaves out its samples'
trajectories, which the trainer side reads back from the children."""

from __future__ import annotations

import random
import uuid

import pytest
from temporalio import activity

from activities import activity_refs as refs
from activities.activity_refs import name_of
from durable_rollouts.contracts.agent_runs import MergeRequest, MergeResult
from durable_rollouts.contracts.payload_budget import GROUP_RESULT_BUDGET_BYTES, ROLLOUT_RESULT_BUDGET_BYTES, json_size
from durable_rollouts.contracts.rollout_group import GroupInput
from durable_rollouts.contracts.tokens import SegmentSummary, TokenSegment
from durable_rollouts.policy.trajectory_packing import pack_trajectory, unpack_trajectory
from durable_rollouts.trainer_client.sample_payloads import with_child_payloads
from tests.workflows.fake_rollout_activities import SHARED, FakeCluster, GroupCluster, rollout, workers
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.rollout_group import RolloutGroup

pytestmark = pytest.mark.asyncio(loop_scope="session")
MIB = 1 << 20


async def run_rollout(env, cluster: FakeCluster):
    shared, host = workers(env, cluster)
    async with shared, host:
        return await env.client.execute_workflow(
            CodingAgentRollout.run, rollout(), id=f"budget-{uuid.uuid4().hex[:6]}", task_queue=SHARED
        )


async def test_a_rollout_keeps_its_whole_logs_within_the_budget(env):
    cluster = FakeCluster()
    cluster.agent_log = '{"type":"assistant"}\n' * (MIB // 21)
    result = await run_rollout(env, cluster)
    assert result.agent.log == cluster.agent_log and result.evaluation.log == cluster.grading_log


async def test_logs_that_would_put_a_rollouts_result_over_its_budget_are_left_out(env):
    cluster = FakeCluster()
    cluster.agent_log = '{"type":"assistant","message":"' + "x" * (9 * MIB) + '"}\n'
    cluster.grading_log = "y" * (9 * MIB)
    result = await run_rollout(env, cluster)

    assert (result.status, result.reward) == ("completed", 1.0)
    assert (result.agent.log, result.evaluation.log) == ("", "")
    assert result.evaluation.log_bytes == 9 * MIB, "the log's size stays"
    assert unpack_trajectory(result.trajectory), "the training sample stays whole"
    assert json_size(result) <= ROLLOUT_RESULT_BUDGET_BYTES


class BigTrajectories(GroupCluster):
    """Each child's merge returns ~10 MiB of packed, incompressible segments (random ids and log-probs)."""

    @activity.defn(name=name_of(refs.merge_segments))
    async def merge_segments(self, request: MergeRequest) -> MergeResult:
        rng = random.Random(request.workflow_id)
        n = 870_000
        segment = TokenSegment(
            kind="main",
            tokens=[rng.randrange(150_000) for _ in range(n)],
            loss_mask=[1] * n,
            rollout_log_probs=[-rng.random() for _ in range(n)],
            prompt_length=0,
            turns=1,
            finish_reason="stop",
        )
        return MergeResult(trajectory=pack_trajectory([segment]), segments=[SegmentSummary.of(segment)], turns=1)


async def test_a_group_over_its_budget_leaves_trajectories_to_its_children_and_the_trainer_reads_them_back(env):
    template = rollout()
    group = GroupInput(
        run_id=f"g{uuid.uuid4().hex[:6]}",
        group_index=0,
        rollouts=[template.model_copy(update={"sample_index": i}) for i in range(3)],
    )
    shared, host = workers(env, BigTrajectories(), (RolloutGroup, CodingAgentRollout))
    async with shared, host:
        result = await env.client.execute_workflow(
            RolloutGroup.run, group, id=f"group-{group.run_id}", task_queue=SHARED
        )
        assert result.status == "completed" and result.trajectories_in_children
        assert all(sample.rollout.trajectory is None and sample.rollout.segments for sample in result.samples)
        assert json_size(result) <= GROUP_RESULT_BUDGET_BYTES

        whole = await with_child_payloads(env.client, result, logs=False)
    assert not whole.trajectories_in_children
    for sample in whole.samples:
        child = await env.client.get_workflow_handle_for(CodingAgentRollout.run, sample.rollout.workflow_id).result()
        assert sample.rollout.trajectory == child.trajectory and child.trajectory.n_tokens == 870_000
