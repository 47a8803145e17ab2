"""Waiting on a condition a test can observe (server state, a recorder), polled, never a fixed sleep.

``HANG_GUARD_S`` only turns a hang into a failure; it is not a performance bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

HANG_GUARD_S = 120


async def until(condition: Callable[[], bool], poll_s: float = 0.01) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(poll_s)

    await asyncio.wait_for(poll(), HANG_GUARD_S)


# The slow scripted policy's pace (``conftest.slow_policy``): a turn takes ``SLOW_TURN_S``, so agents are still
# mid-run when a test kills a worker or the server; once that is done the test sets ``AFTER_DISRUPTION_TURN_S``.
SLOW_TURN_S = 3.0
AFTER_DISRUPTION_TURN_S = 0.3
