"""The disk watch's start, apart from Docker: what ``over_at_start`` answers when the watch has no size to give.

The watch against real sandboxes (budgets passed, the first size, Docker asked rarely) is in ``test_sandboxes.py``.
"""

from __future__ import annotations

import asyncio

import pytest

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox import disk_watch
from tests.waiting import HANG_GUARD_S

pytestmark = pytest.mark.asyncio(loop_scope="session")
HANDLE = SandboxHandle(container_id="c0ffee", name="rollout-test", workdir="/testbed", disk_baseline_bytes=0)


async def test_without_a_budget_the_start_is_never_over_and_nothing_is_asked():
    async with disk_watch.DiskWatch(None, HANDLE, budget_bytes=0) as watch:  # type: ignore[arg-type]
        assert await asyncio.wait_for(watch.over_at_start(), HANG_GUARD_S) is False
        assert watch.exact_samples == 0


async def test_a_watch_that_ends_before_its_first_size_does_not_hold_the_start(monkeypatch):
    """An error the watch does not expect ends its task; whoever waits to start the agent is let go, not hung."""

    async def broken_counter(self):
        raise RuntimeError("an error the watch does not handle")

    monkeypatch.setattr(disk_watch.DiskWatch, "_counter", broken_counter)
    async with disk_watch.DiskWatch(None, HANDLE, budget_bytes=1 << 20) as watch:  # type: ignore[arg-type]
        assert await asyncio.wait_for(watch.over_at_start(), HANG_GUARD_S) is False
