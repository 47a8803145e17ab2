"""The per-sandbox disk budget: what an agent sandbox has written since its boot, watched while the agent runs.

Docker can cap a container's writable layer only on overlay2 over xfs with
``pquota`` (``--storage-opt size=``); on the usual ext4 host it refuses, so
the budget is watched instead.

Invariants:

* usage is the writable layer's size (``DockerSandboxes.layer_bytes``: apparent
  sizes, so a sparse file counts in full) minus its size when boot finished
  (``SandboxHandle.disk_baseline_bytes``); files in the workdir, ``/tmp`` and
  the agent's home all count;
* the watch samples at once and then every ``CHECK_INTERVAL_S``, or less
  often when one sample is slow (Docker walks the layer's files): sampling
  never takes more than ``MAX_BUSY_SHARE`` of the time. A fast writer can
  therefore overshoot the budget by what it writes in one interval;
* a failed sample (a Docker hiccup) is logged and retried, never raised: a
  container that is really gone shows up in the agent's own wait;
* a budget of 0 is no budget: nothing is sampled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

from durable_rollouts.contracts.rollout import SandboxHandle
from durable_rollouts.docker_sandbox.commands import ContainerCommands

log = logging.getLogger(__name__)
CHECK_INTERVAL_S = 5.0
MAX_BUSY_SHARE = 0.05
T = TypeVar("T")


async def used_bytes(sandboxes: ContainerCommands, handle: SandboxHandle) -> int:
    """Bytes the sandbox has written since its boot."""
    return max(0, await sandboxes.layer_bytes(handle.container_id) - handle.disk_baseline_bytes)


class DiskWatch:
    """Samples one sandbox's usage while entered; ``first`` races an awaitable against the budget."""

    def __init__(self, sandboxes: ContainerCommands, handle: SandboxHandle, budget_bytes: int):
        self.sandboxes = sandboxes
        self.handle = handle
        self.budget_bytes = budget_bytes
        self.used = 0
        self._over = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def exceeded(self) -> bool:
        return self._over.is_set()

    async def __aenter__(self) -> DiskWatch:
        if self.budget_bytes > 0:
            self._task = asyncio.create_task(self._sample_until_over())
        return self

    async def __aexit__(self, *exc_info) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})

    async def first(self, awaitable: Awaitable[T]) -> T | None:
        """``awaitable``'s result, or None (and ``awaitable`` cancelled) once the budget is exceeded."""
        work = asyncio.ensure_future(awaitable)
        over = asyncio.ensure_future(self._over.wait())
        try:
            await asyncio.wait({work, over}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            over.cancel()
            if not work.done():
                work.cancel()
                await asyncio.wait({work})
        return None if work.cancelled() else work.result()

    async def check(self) -> bool:
        """Sample once now; whether the budget is exceeded."""
        if self.budget_bytes > 0 and not self.exceeded:
            await self._sample()
        return self.exceeded

    async def _sample(self) -> None:
        try:
            self.used = await used_bytes(self.sandboxes, self.handle)
        except Exception as error:  # noqa: BLE001 - a hiccup must not stop the agent
            log.warning("disk usage of %s unavailable: %s", self.handle.name, error)
            return
        if self.used > self.budget_bytes:
            log.info("%s wrote %d bytes, over its disk budget of %d", self.handle.name, self.used, self.budget_bytes)
            self._over.set()

    async def _sample_until_over(self) -> None:
        while not self.exceeded:
            started = time.monotonic()
            await self._sample()
            await asyncio.sleep(max(CHECK_INTERVAL_S, (time.monotonic() - started) / MAX_BUSY_SHARE))
