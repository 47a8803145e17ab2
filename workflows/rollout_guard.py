"""The graceful stop shared by the rollout workflows: wall-clock guard, abort signal, Temporal cancel.

Deterministic workflow code (imports only temporalio and the contracts). When any of the three
fires, the body task is cancelled and awaited, so its ``finally`` clean-up
(destroying sandboxes, discarding sessions) runs before the workflow returns
its ``aborted`` result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from durable_rollouts.contracts.aborts import AbortReason


async def stop_reason_after(
    body: asyncio.Future[Any],
    guard: timedelta,
    abort_requested: Callable[[], str | None],
    expected_errors: tuple[type[BaseException], ...] = (),
) -> str | None:
    """Wait for ``body``; return None if it finished, else why it was stopped (after its clean-up ran)."""
    try:
        await workflow.wait_condition(
            lambda: body.done() or abort_requested() is not None, timeout=guard, timeout_summary="wall-clock guard"
        )
        if body.done():
            return None
        reason = abort_requested() or AbortReason.CANCELLED
    except TimeoutError:
        reason = AbortReason.WALL_CLOCK_TIMEOUT
    except asyncio.CancelledError:
        reason = workflow.cancellation_reason() or AbortReason.CANCELLED
    body.cancel()
    tolerated: tuple[type[BaseException], ...] = (asyncio.CancelledError, ActivityError, *expected_errors)
    try:
        await body
    except tolerated:
        pass
    return reason
