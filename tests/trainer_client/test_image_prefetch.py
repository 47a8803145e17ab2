"""The trainer side's prefetch on the time-skipping server: ``stream_groups`` announces the groups that start
next, ``ImagePrefetch`` starts one ``PrefetchImages`` per set of images it has not announced, under a fixed id."""

from __future__ import annotations

import uuid

import pytest
from temporalio.worker import Worker

from durable_rollouts.contracts.image_prefetch import PrefetchResult
from durable_rollouts.contracts.rollout_group import GroupInput
from durable_rollouts.contracts.workflow_ids import prefetch_workflow_id
from durable_rollouts.trainer_client.image_prefetch import ImagePrefetch
from durable_rollouts.trainer_client.rollout_groups import stream_groups
from tests.workflows.fake_rollout_activities import SHARED, FakePrefetchHost, GroupCluster, one_sample_groups, workers
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.image_prefetch import PrefetchImages
from workflows.rollout_group import RolloutGroup

pytestmark = pytest.mark.asyncio(loop_scope="session")


def with_image(group: GroupInput, image: str) -> GroupInput:
    rollouts = [r.model_copy(update={"task": r.task.model_copy(update={"image": image})}) for r in group.rollouts]
    return group.model_copy(update={"rollouts": rollouts})


async def test_streaming_announces_the_groups_that_start_next(env):
    cluster, run_id = GroupCluster(), f"up{uuid.uuid4().hex[:6]}"
    shared, host = workers(env, cluster, (RolloutGroup, CodingAgentRollout))
    heard: list[list[int]] = []
    async with shared, host:
        async for _ in stream_groups(
            env.client,
            one_sample_groups(4, run_id),
            SHARED,
            concurrency=2,
            upcoming=lambda g: heard.append([x.group_index for x in g]),
        ):
            pass
    assert heard[0] == [2, 3], "at the start: the two groups after the two in flight"
    assert all(h == [2, 3][-len(h) :] for h in heard), (
        "then the groups still to start, in order, as groups finish and others start"
    )


async def test_each_image_is_announced_once_per_run_under_a_fixed_id(env):
    fake = FakePrefetchHost(busy=set(), missing=set())
    queue, run_id = f"ann-{uuid.uuid4().hex[:6]}", f"ann{uuid.uuid4().hex[:6]}"
    made = [
        with_image(group, image)
        for group, image in zip(one_sample_groups(3, run_id), ["img-a", "img-b", "img-a"], strict=True)
    ]
    prefetch = ImagePrefetch(env.client, run_id, queue)
    async with Worker(env.client, task_queue=queue, workflows=[PrefetchImages], activities=[fake.prefetch_image]):
        prefetch.announce_groups(made[:2])
        prefetch.announce_groups(made[1:])
        prefetch.announce(["img-c", "img-b"], 60)
        await prefetch.settle()
        first = await env.client.get_workflow_handle(
            prefetch_workflow_id(run_id, ["img-a", "img-b"]), result_type=PrefetchResult
        ).result()
        then = await env.client.get_workflow_handle(
            prefetch_workflow_id(run_id, ["img-c"]), result_type=PrefetchResult
        ).result()
    assert [p.image for p in first.images] == ["img-a", "img-b"] and [p.image for p in then.images] == ["img-c"]
    assert sorted(fake.attempts) == ["img-a", "img-b", "img-c"], "announcing an image again starts nothing"
