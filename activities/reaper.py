"""Remove sandboxes nobody will clean up: the worker sweeps at start-up and then periodically.

A labelled sandbox is removed when
* its lifetime (``io.rollouts.expires_at``) has passed, or
* its workflow is closed (completed, failed, terminated, ...): e.g. the
  container of an attempt whose worker was SIGKILLed while another worker
  finished the rollout, or
* its workflow is unknown to this cluster *and* it was booted by this very
  host queue (a sandbox of another cluster sharing the Docker engine is never
  touched on that ground).
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities import sandbox

log = logging.getLogger(__name__)
PREFIX = sandbox.LABEL_PREFIX


async def sweep(client: Client, host_queue: str, now: float | None = None) -> list[str]:
    """One pass; returns the names of the containers it removed."""
    expired = await sandbox.reap_expired(now)
    statuses: dict[str, WorkflowExecutionStatus | None] = {}
    doomed = []
    for container in await sandbox.list_managed():
        labels = container.labels
        workflow_id = labels.get(f"{PREFIX}.workflow_id", "")
        if workflow_id not in statuses:
            statuses[workflow_id] = await _status(client, workflow_id)
        status = statuses[workflow_id]
        closed = status is not None and status != WorkflowExecutionStatus.RUNNING
        unknown_here = status is None and labels.get(f"{PREFIX}.host_queue") == host_queue
        if closed or unknown_here:
            doomed.append(container)
    names = {c.name for c in doomed}
    return expired + (await sandbox.reap(lambda c: c.name in names) if names else [])


async def reap_forever(client: Client, host_queue: str, interval_s: float) -> None:
    while True:
        try:
            removed = await sweep(client, host_queue)
            if removed:
                log.info("reaper: removed %s", ", ".join(removed))
        except (RPCError, OSError, RuntimeError) as error:
            log.warning("reaper: sweep failed: %s", error)
        await asyncio.sleep(interval_s)


async def _status(client: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    if not workflow_id:
        return None
    try:
        return (await client.get_workflow_handle(workflow_id).describe()).status
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
