"""PrefetchImages: hosts pull the task images of groups about to start, while they run the current ones.

One ``prefetch_image`` activity per image on the shared queue, at most ``PrefetchInput.parallel`` at once, in
the order given (the groups that start first, first). Whichever host polls takes an image, refusing it a few
times when it lacks the image so a host that holds it can answer, and refusing while it already pulls its
share (``activities.rollout_host.RolloutHost.prefetch_image``); a rollout's placement then prefers the host
that holds or is pulling its image.

Invariants:
* a prefetch only ever helps: the result lists every image with what became of it (``failed`` with the
  reason: not in the registry, credentials refused, unreachable, or out of time); the workflow itself never
  fails on an image;
* each image is waited for at most ``PrefetchInput.pull_timeout_s`` once a host pulls it, and twice that plus
  ``QUEUE_WAIT`` in all, refusals included;
* activities are scheduled through ``activities.activity_refs``; the module imports only temporalio, the
  contracts and the references.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from activities import activity_refs as refs
    from activities.error_types import ErrorType
    from durable_rollouts.contracts.image_prefetch import Prefetched, PrefetchInput, PrefetchRequest, PrefetchResult

# Refusals come back quickly (a host that lacks the image, or pulls its share already): retry soon, then
# every few seconds while every host is busy pulling.
PREFETCH_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=5),
    non_retryable_error_types=[ErrorType.SANDBOX_IMAGE_MISSING, ErrorType.REGISTRY_AUTH_FAILED],
)
PREFETCH_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
QUEUE_WAIT = timedelta(seconds=120)


@workflow.defn
class PrefetchImages:
    @workflow.run
    async def run(self, prefetch: PrefetchInput) -> PrefetchResult:
        slots = asyncio.Semaphore(prefetch.parallel)
        images = list(dict.fromkeys(prefetch.images))
        outcomes = await asyncio.gather(*(self._one(image, prefetch.pull_timeout_s, slots) for image in images))
        return PrefetchResult(images=list(outcomes))

    async def _one(self, image: str, pull_timeout_s: float, slots: asyncio.Semaphore) -> Prefetched:
        pull = timedelta(seconds=pull_timeout_s)
        async with slots:
            try:
                return await workflow.execute_activity(
                    refs.prefetch_image,
                    PrefetchRequest(image=image, pull_timeout_s=pull_timeout_s),
                    start_to_close_timeout=pull + timedelta(seconds=30),
                    schedule_to_close_timeout=pull * 2 + QUEUE_WAIT,
                    heartbeat_timeout=PREFETCH_HEARTBEAT_TIMEOUT,
                    retry_policy=PREFETCH_RETRY,
                    summary=f"pull {image} ahead",
                )
            except ActivityError as error:
                return Prefetched(image=image, outcome="failed", error=_why(error))


def _why(error: ActivityError) -> str:
    """``SandboxImageMissing: image ... is not in registry ...``, or the timeout or failure that ended it."""
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type:
        return f"{cause.type}: {cause.message}"
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(error)
