"""PrefetchImages on Temporal's time-skipping test server, with a fake ``prefetch_image``: each image once, in
the order given, at most ``parallel`` at once; a refusal is retried (another host may take it); an image the
registry lacks is reported ``failed`` with its type, not retried, and the others still complete."""

from __future__ import annotations

import uuid

import pytest
from temporalio.worker import Worker

from durable_rollouts.contracts.image_prefetch import PrefetchInput
from tests.workflows.fake_rollout_activities import FakePrefetchHost
from workflows.image_prefetch import PrefetchImages

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_each_image_is_pulled_once_in_order_at_most_parallel_at_once_and_a_missing_one_is_reported(env):
    host = FakePrefetchHost(busy={"img-2"}, missing={"img-gone"})
    queue = f"prefetch-{uuid.uuid4().hex[:6]}"
    images = ["img-0", "img-1", "img-0", "img-2", "img-gone", "img-3", "img-4"]
    async with Worker(env.client, task_queue=queue, workflows=[PrefetchImages], activities=[host.prefetch_image]):
        result = await env.client.execute_workflow(
            PrefetchImages.run,
            PrefetchInput(run_id="r", images=images, pull_timeout_s=60, parallel=2),
            id=f"wf-{queue}",
            task_queue=queue,
        )
    assert [(p.image, p.outcome) for p in result.images] == [
        ("img-0", "pulled"),
        ("img-1", "pulled"),
        ("img-2", "pulled"),
        ("img-gone", "failed"),
        ("img-3", "pulled"),
        ("img-4", "pulled"),
    ]
    (gone,) = [p for p in result.images if p.outcome == "failed"]
    assert gone.error == "SandboxImageMissing: image img-gone is not in registry r:5000"
    assert sorted(host.attempts) == sorted(["img-0", "img-1", "img-2", "img-2", "img-gone", "img-3", "img-4"]), (
        "a refusal is retried, a missing image is not"
    )
    assert host.most_at_once <= 2
