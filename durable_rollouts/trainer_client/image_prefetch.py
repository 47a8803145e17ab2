"""The trainer side's word to the fleet about task images its next groups need (``workflows.image_prefetch``).

Invariants:

* ``ImagePrefetch.announce`` (and ``announce_groups``) never blocks and never raises: it starts one ``PrefetchImages``
  workflow for the images it has not announced before (in a background task) and reports a start that fails on stderr; a
  prefetch is a hint, and each rollout's boot still pulls what its host lacks;
* an image is announced once per ``ImagePrefetch`` (per run), however many groups name it;
* the workflow id is fixed per run and set of images (``prefetch_workflow_id``), so a re-run that announces
  the same images attaches to the prefetch it started before.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable

from temporalio.client import Client
from temporalio.service import RPCError

from durable_rollouts.contracts.image_prefetch import DEFAULT_PREFETCH_PARALLEL, PrefetchInput, PrefetchResult
from durable_rollouts.contracts.rollout_group import GroupInput
from durable_rollouts.contracts.workflow_ids import prefetch_workflow_id
from durable_rollouts.trainer_client.workflow_runs import start_or_attach
from workflows.image_prefetch import PrefetchImages

# How long ``settle`` waits for announcements still being started.
SETTLE_TIMEOUT_S = 10.0


class ImagePrefetch:
    def __init__(self, client: Client, run_id: str, task_queue: str, parallel: int = DEFAULT_PREFETCH_PARALLEL):
        self.client = client
        self.run_id = run_id
        self.task_queue = task_queue
        self.parallel = parallel
        self.announced: set[str] = set()
        self._starting: set[asyncio.Task[None]] = set()

    def announce_groups(self, groups: Iterable[GroupInput]) -> None:
        """``announce`` the images of ``groups`` (which start soon, earliest first) with their rollouts' pull
        timeout."""
        timeouts: dict[str, float] = {}
        for group in groups:
            for rollout in group.rollouts:
                timeouts[rollout.task.image] = max(timeouts.get(rollout.task.image, 0.0), rollout.pull_timeout_s)
        if timeouts:
            self.announce(timeouts, max(timeouts.values()))

    def announce(self, images: Iterable[str], pull_timeout_s: float) -> None:
        """Ask the fleet to pull ``images`` (needed soon, earliest first) that were not announced yet."""
        fresh = [image for image in dict.fromkeys(images) if image not in self.announced]
        if not fresh:
            return
        self.announced.update(fresh)
        prefetch = PrefetchInput(
            run_id=self.run_id, images=fresh, pull_timeout_s=pull_timeout_s, parallel=self.parallel
        )
        task = asyncio.create_task(self._start(prefetch))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _start(self, prefetch: PrefetchInput) -> None:
        workflow_id = prefetch_workflow_id(prefetch.run_id, prefetch.images)
        summary = (
            f"pull {len(prefetch.images)} image(s) ahead: "
            f"{', '.join(prefetch.images[:3])}{' ...' if len(prefetch.images) > 3 else ''}"
        )
        try:
            await start_or_attach(
                self.client, PrefetchImages.run, prefetch, workflow_id, self.task_queue, PrefetchResult, summary
            )
        except (RPCError, RuntimeError) as error:
            print(
                f"prefetch of {', '.join(prefetch.images)} not started ({type(error).__name__}: {error}); boots will "
                f"pull them",
                file=sys.stderr,
                flush=True,
            )

    async def settle(self, timeout_s: float = SETTLE_TIMEOUT_S) -> None:
        """Wait for the prefetches announced so far to be started (or reported as not started), at most
        ``timeout_s``: a server slow to answer delays the caller no longer, and those starts go on meanwhile."""
        if self._starting:
            await asyncio.wait(set(self._starting), timeout=timeout_s)
