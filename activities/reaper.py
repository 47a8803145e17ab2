"""Remove sandboxes nobody will clean up: the worker sweeps at start-up and then periodically.

A labelled sandbox is removed once nothing can still use it: its lifetime has passed, its workflow is closed or has
moved past its attempt, or (start-up sweep only) this host queue's previous process left it; ``_orphaned`` gives
each rule at its line. Invariants:
* a sandbox whose workflow this cluster does not know is removed only if this very host queue booted it, so a sandbox
  of another cluster sharing the Docker engine is never touched on that ground;
* an agent sandbox of its workflow's current attempt that finished booting is kept, so a restarted worker can resume
  its agent.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from durable_rollouts.contracts.telemetry_names import ATTEMPT_ATTRIBUTE
from durable_rollouts.docker_sandbox.container_layout import LABEL_PREFIX
from durable_rollouts.docker_sandbox.lifecycle import ManagedContainer
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes

_ATTEMPT = SearchAttributeKey.for_int(ATTEMPT_ATTRIBUTE)

log = logging.getLogger(__name__)
PREFIX = LABEL_PREFIX


async def sweep(
    sandboxes: DockerSandboxes, client: Client, host_queue: str, now: float | None = None, at_start: bool = False
) -> list[str]:
    """One pass; returns the names of the containers it removed. ``at_start``: no activity of this
    host queue runs yet (the worker sweeps before it polls), so its unfinished boots are orphans."""
    expired = await sandboxes.reap_expired(now)  # lifetime (``io.rollouts.expires_at``) passed
    containers = await sandboxes.list_managed()
    workflow_ids = sorted({c.labels.get(f"{PREFIX}.workflow_id", "") for c in containers})
    descriptions = dict(
        zip(workflow_ids, await asyncio.gather(*(_describe(client, w) for w in workflow_ids)), strict=True)
    )
    names = {
        c.name
        for c in containers
        if _orphaned(c, descriptions[c.labels.get(f"{PREFIX}.workflow_id", "")], host_queue, at_start)
    }
    return expired + (await sandboxes.reap(lambda c: c.name in names) if names else [])


def _orphaned(
    container: ManagedContainer, description: WorkflowExecutionDescription | None, host_queue: str, at_start: bool
) -> bool:
    labels = container.labels
    mine = labels.get(f"{PREFIX}.host_queue") == host_queue
    if description is None:  # unknown to this cluster: only if this host queue booted it
        return mine
    if description.status != WorkflowExecutionStatus.RUNNING:
        # Closed (completed, failed, terminated, ...): e.g. the container of an attempt whose worker was SIGKILLed
        # while another worker finished the rollout.
        return True
    if labels.get(f"{PREFIX}.purpose", "agent") != "agent":
        # A grading sandbox lives inside one activity of the process that booted it, so at this queue's start-up
        # (before it polls) it is the dead process's.
        return at_start and mine
    label = labels.get(f"{PREFIX}.attempt", "")
    current = description.typed_search_attributes.get(_ATTEMPT)
    if not label.isdigit() or current is None:
        return False
    if current > int(label):
        # An attempt its workflow has given up (``RolloutAttempt`` past the label): e.g. its worker died while
        # booting it and the workflow moved to a fresh attempt.
        return True
    # At start-up, the current attempt's sandbox while its ``boot_sandbox`` is still pending is one the previous
    # process of this host never finished booting (the boot's retry creates a fresh one); once booted it is kept.
    booting = any(a.activity_type.name == "boot_sandbox" for a in description.raw_description.pending_activities)
    return at_start and mine and current == int(label) and booting


async def reap_forever(sandboxes: DockerSandboxes, client: Client, host_queue: str, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        await sweep_logged(sandboxes, client, host_queue)


async def sweep_logged(sandboxes: DockerSandboxes, client: Client, host_queue: str, at_start: bool = False) -> None:
    """``sweep``, logging what it removed; a failed sweep is logged and left to the next one."""
    try:
        removed = await sweep(sandboxes, client, host_queue, at_start=at_start)
        if removed:
            log.info("reaper: removed %s", ", ".join(removed))
    except (RPCError, OSError, RuntimeError) as error:
        log.warning("reaper: sweep failed: %s", error)


async def _describe(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    if not workflow_id:
        return None
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
