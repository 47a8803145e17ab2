"""``fill_batch`` and ``stream_groups`` against real RolloutGroup workflows on the time-skipping server (fake
activities)."""

from __future__ import annotations

import uuid

import pytest

from durable_rollouts.contracts.rollout_group import GroupInput
from durable_rollouts.contracts.workflow_ids import rollout_workflow_id
from durable_rollouts.trainer_client.rollout_groups import fill_batch, stream_groups
from tests.waiting import until
from tests.workflows.fake_rollout_activities import SHARED, GroupCluster, one_sample_groups, workers
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.rollout_group import RolloutGroup

pytestmark = pytest.mark.asyncio(loop_scope="session")


def child(run_id: str, g: int) -> str:
    return rollout_workflow_id(run_id, f"p{g}", 0, g)


class Source:
    """``next_groups`` over a list; remembers how much it was asked for."""

    def __init__(self, items: list[GroupInput]):
        self.items, self.asked = list(items), []

    def __call__(self, k: int) -> list[GroupInput]:
        self.asked.append(k)
        taken, self.items = self.items[:k], self.items[k:]
        return taken


async def test_over_sampling_returns_once_enough_groups_finished_and_cuts_the_stragglers(env):
    cluster, run_id = GroupCluster(), f"os{uuid.uuid4().hex[:6]}"
    cluster.hanging = {child(run_id, 1), child(run_id, 3)}
    source = Source(one_sample_groups(6, run_id))
    shared, host = workers(env, cluster, (RolloutGroup, CodingAgentRollout))
    async with shared, host:
        batch = await fill_batch(env.client, source, n_groups=2, over_sample=4, task_queue=SHARED)
    assert sorted(g.group_index for g in batch.groups) == [0, 2] and sorted(g.group_index for g in batch.cut) == [1, 3]
    assert [(g.status, g.samples[0].invalid_reason) for g in batch.cut] == [("cut", "straggler_cut")] * 2
    assert batch.started == 4 and source.asked == [4], (
        "kept groups hold their place: nothing beyond over_sample is started"
    )
    assert sorted(cluster.destroyed) == sorted(child(run_id, g) for g in range(4)), (
        "every straggler's sandbox destroyed"
    )
    metrics = batch.metrics()
    assert (metrics["groups"], metrics["groups_cut"], metrics["samples_valid"], metrics["groups_started"]) == (
        2,
        2,
        2,
        4,
    )


async def test_handed_over_stragglers_keep_running_and_the_next_batch_attaches_to_them(env):
    cluster, run_id = GroupCluster(), f"ho{uuid.uuid4().hex[:6]}"
    cluster.hanging = {child(run_id, 1)}
    shared, host = workers(env, cluster, (RolloutGroup, CodingAgentRollout))
    async with shared, host:
        first = await fill_batch(
            env.client,
            Source(one_sample_groups(3, run_id)),
            n_groups=2,
            over_sample=3,
            straggler_policy="handover",
            task_queue=SHARED,
        )
        assert [g.group_index for g in first.handed_over] == [1] and first.cut == []
        agent_runs = cluster.calls.count("run_claude_code")
        cluster.hanging.clear()
        second = await fill_batch(env.client, Source([]), n_groups=1, carried=first.handed_over, task_queue=SHARED)
    assert [g.group_index for g in second.groups] == [1] and second.groups[0].valid_mask == [True]
    assert cluster.calls.count("run_claude_code") == agent_runs, (
        "attached to the running workflow: its agent did not start again"
    )


async def test_a_group_the_trainer_rejects_is_replaced_and_reported(env):
    cluster, run_id = GroupCluster(), f"tr{uuid.uuid4().hex[:6]}"
    shared, host = workers(env, cluster, (RolloutGroup, CodingAgentRollout))
    async with shared, host:
        batch = await fill_batch(
            env.client,
            Source(one_sample_groups(3, run_id)),
            n_groups=2,
            task_queue=SHARED,
            accept=lambda result, remaining: result.group_index != 0,
        )
    assert sorted(g.group_index for g in batch.groups) == [1, 2]
    assert [(g.group_index, g.kept, g.dropped_by) for g in batch.dropped] == [(0, False, "trainer_filter")]
    assert batch.started == 3 and batch.metrics()["groups_filtered"] == 1


async def test_slimes_over_sampling_refetches_a_whole_chunk_once_too_few_started_groups_are_left(env):
    """slime's ``over_sampling_batch_size`` is a refetch chunk: 3 started for a batch of 2; two dropped leave 1
    undropped, under 2, so 3 more are drawn and started; ``remaining`` is what slime's filter rule reads."""
    cluster, run_id = GroupCluster(), f"rf{uuid.uuid4().hex[:6]}"
    source, seen = Source(one_sample_groups(9, run_id)), []

    def accept(result, remaining):
        seen.append((result.group_index, remaining))
        return result.group_index not in (0, 1)

    shared, host = workers(env, cluster, (RolloutGroup, CodingAgentRollout))
    async with shared, host:
        batch = await fill_batch(
            env.client,
            source,
            n_groups=2,
            straggler_policy="handover",
            task_queue=SHARED,
            accept=accept,
            refetch_chunk=3,
        )
    assert source.asked[:2] == [3, 3] and batch.started == 6, "a second chunk of 3 once two of the first were dropped"
    assert len(batch.groups) == 2 and all(g.group_index >= 2 for g in batch.groups)
    assert all(remaining <= batch.started for _, remaining in seen)


async def test_stream_groups_yields_each_group_as_it_finishes(env):
    cluster, run_id = GroupCluster(), f"st{uuid.uuid4().hex[:6]}"
    cluster.hanging = {child(run_id, 0)}
    shared, host = workers(env, cluster, (RolloutGroup, CodingAgentRollout))
    seen: list[int] = []
    async with shared, host:
        async for result in stream_groups(env.client, one_sample_groups(3, run_id), SHARED, concurrency=3):
            seen.append(result.group_index)
            if len(seen) == 2:
                await until(lambda: cluster.calls.count("run_claude_code") == 3)
                cluster.hanging.clear()
    assert sorted(seen[:2]) == [1, 2] and seen[2] == 0, "finish order, not input order"
