"""The per-sandbox disk budget: what an agent sandbox has written since its boot, watched while the agent runs.

Docker can cap a container's writable layer only on overlay2 over xfs with ``pquota`` (``--storage-opt size=``); on
the usual ext4 host it refuses, so the budget is watched instead (docs/rollouts.md, "Disk budget": how often, and
how far a writer can overshoot). Invariants:
* usage is the writable layer's size (``DockerSandboxes.layer_bytes``: apparent sizes, so a sparse file counts in
  full) minus its size when boot finished (``SandboxHandle.disk_baseline_bytes``); the workdir, ``/tmp`` and the
  agent's home all count, and what was written before the watch started counts from its first exact size;
* Docker's exact size walks the layer's files, so between two of them the usage is bounded by the last one plus the
  bytes written since (``write_counter``, which never under-counts a ``write``), and Docker is asked again only when
  that bound passes the budget or ``EXACT_INTERVAL_S`` has gone by.

A failed sample (a Docker hiccup) is logged and retried, never raised: a container that is really gone shows up in
the agent's own wait. A budget of 0 is no budget: nothing is sampled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.commands import ContainerCommands
from durable_rollouts.docker_sandbox.write_counter import WriteCounter

log = logging.getLogger(__name__)
# Without the write counter (the engine on another host, say) Docker is sampled this often, and a writer can
# overshoot by what it writes in one interval.
POLL_INTERVAL_S = 5.0
# An exact size at least this often: ``fallocate`` and sparse files do not show in the counter.
EXACT_INTERVAL_S = 300.0
# The bound is read every TICK_S, sooner as it nears the budget (the time a FAST_WRITER_BPS writer takes to fill the
# headroom, at least MIN_TICK_S), so a writer overshoots by about what it writes in MIN_TICK_S plus one exact size.
TICK_S = 2.0
MIN_TICK_S = 0.05
FAST_WRITER_BPS = 1 << 30
# The first time the bound passes the budget the exact size is taken at once; after that, exact sizes the bound asks
# for (a process rewriting one file keeps raising the bound without growing the layer), and the polls without the
# counter, take at most this share of the watch's time.
MAX_BUSY_SHARE = 0.05
T = TypeVar("T")


async def used_bytes(sandboxes: ContainerCommands, handle: SandboxHandle) -> int:
    """Bytes the sandbox has written since its boot."""
    return max(0, await sandboxes.layer_bytes(handle.container_id) - handle.disk_baseline_bytes)


class DiskWatch:
    """Watches one sandbox's usage while entered; ``first`` races an awaitable against the budget.
    ``use_write_counter=False`` samples Docker alone (as where the counter is unavailable)."""

    def __init__(
        self, sandboxes: ContainerCommands, handle: SandboxHandle, budget_bytes: int, *, use_write_counter: bool = True
    ):
        self.sandboxes = sandboxes
        self.handle = handle
        self.budget_bytes = budget_bytes
        self.use_write_counter = use_write_counter
        self.used = 0
        self.exact_samples = 0
        self._over = asyncio.Event()
        self._sized = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def exceeded(self) -> bool:
        return self._over.is_set()

    async def __aenter__(self) -> DiskWatch:
        if self.budget_bytes > 0:
            self._task = asyncio.create_task(self._watch())
        else:
            self._sized.set()
        return self

    async def over_at_start(self) -> bool:
        """Whether the first exact size, which the watch takes as it starts, is over the budget (waits for it;
        False at once without a budget, after a failed first sample, and once the watch ended without one)."""
        if self._task is not None and not self._sized.is_set():
            sized = asyncio.ensure_future(self._sized.wait())
            await asyncio.wait({sized, self._task}, return_when=asyncio.FIRST_COMPLETED)
            sized.cancel()
        return self.exceeded

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
        """Take one exact size now; whether the budget is exceeded."""
        if self.budget_bytes > 0 and not self.exceeded:
            await self._sample()
        return self.exceeded

    async def _sample(self) -> float:
        """One exact size; the seconds it took."""
        started = time.monotonic()
        self.exact_samples += 1
        try:
            self.used = await used_bytes(self.sandboxes, self.handle)
        except Exception as error:  # noqa: BLE001 - a hiccup must not stop the agent
            log.warning("disk usage of %s unavailable: %s", self.handle.name, error)
            return time.monotonic() - started
        finally:
            self._sized.set()
        if self.used > self.budget_bytes:
            log.info("%s wrote %d bytes, over its disk budget of %d", self.handle.name, self.used, self.budget_bytes)
            self._over.set()
        return time.monotonic() - started

    async def _counter(self) -> WriteCounter | None:
        if not self.use_write_counter:
            return None
        try:
            init_pid = await self.sandboxes.init_pid(self.handle.container_id)
        except Exception as error:  # noqa: BLE001 - without the counter the watch polls Docker
            log.warning("no write counter for %s: %s", self.handle.name, error)
            return None
        counter = WriteCounter.for_container(self.handle.container_id, init_pid)
        if counter is None:
            log.info(
                "no write counter for %s (engine not on this host's /proc): polling its layer size", self.handle.name
            )
        return counter

    async def _watch(self) -> None:
        counter = await self._counter()
        if counter is None:
            await self._poll()
            return
        written = counter.read()
        await self._sample()
        exact_at = calm_until = time.monotonic()
        while not self.exceeded:
            now = time.monotonic()
            headroom = self.budget_bytes - self.used - (counter.read() - written)
            triggered = headroom < 0 and now >= calm_until
            if triggered or now >= exact_at + EXACT_INTERVAL_S:
                written = counter.read()
                exact_at = now
                took = await self._sample()
                if triggered:
                    calm_until = now + took / MAX_BUSY_SHARE
                continue
            tick = calm_until - now if headroom < 0 else min(TICK_S, headroom / FAST_WRITER_BPS)
            await asyncio.sleep(max(MIN_TICK_S, tick))

    async def _poll(self) -> None:
        while not self.exceeded:
            took = await self._sample()
            await asyncio.sleep(max(POLL_INTERVAL_S, took / MAX_BUSY_SHARE))
