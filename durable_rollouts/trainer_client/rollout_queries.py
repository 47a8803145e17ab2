"""Operator questions answered from Temporal visibility and workflow queries.

"Which rollouts are stuck, where, and why?": counts by stage, the oldest
running ones, the ones whose agent has not had a model turn for a while, and
one rollout's live progress with the tail of its agent's stream-json log;
"how far are the groups?": ``RolloutGroup`` counts by status and the summed
``progress`` of the running ones; "which hosts are there, how full?": ``host_slots``. Everything here reads;
``request_abort`` is the one write (a graceful stop).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import PendingActivityState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus

from durable_rollouts.contracts.host_identity import parse_worker_identity
from durable_rollouts.contracts.rollout_group import GroupProgress
from durable_rollouts.contracts.rollouts import RolloutProgress, RolloutResult
from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.git_workspace import AGENT_LOG
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.rollout_group import RolloutGroup
from workflows.search_attributes import GROUP_STATUS, HOST, STAGE

if TYPE_CHECKING:
    from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes

STAGES = ("queued", "booting", "agent", "diff", "grading", "merging")
# The stages in which a rollout's agent slot is held on the host its ``RolloutHost`` attribute names.
PLACED_STAGES = ("agent", "diff", "grading", "merging")
# A closed group's RolloutGroupStatus; one still "running" closed without a result (terminated, timed out).
CLOSED_GROUP_STATUSES = ("completed", "insufficient", "cut")
RUNNING_GROUPS = "WorkflowType='RolloutGroup' AND ExecutionStatus='Running'"


@dataclass(frozen=True)
class RunningRollout:
    workflow_id: str
    started: datetime
    stage: str
    progress: RolloutProgress | None

    def idle_minutes(self, now: datetime) -> float | None:
        last = self.progress.last_turn_at or self.progress.stage_since if self.progress else None
        return (now - last).total_seconds() / 60 if last else None


async def stage_counts(client: Client) -> dict[str, int]:
    counts = {}
    for stage in STAGES:
        found = await client.count_workflows(
            f"WorkflowType='CodingAgentRollout' AND ExecutionStatus='Running' AND RolloutStage='{stage}'"
        )
        counts[stage] = found.count
    return counts


async def running_rollouts(client: Client, limit: int = 200) -> list[RunningRollout]:
    """Running rollouts, oldest first, each with its live progress (None if it could not be queried)."""
    found = []
    async for execution in client.list_workflows(
        "WorkflowType='CodingAgentRollout' AND ExecutionStatus='Running'", limit=limit
    ):
        stage = execution.typed_search_attributes.get(STAGE) or "queued"
        found.append((execution.id, execution.start_time, stage))
    found.sort(key=lambda item: item[1])
    rollouts = []
    for workflow_id, started, stage in found:
        try:
            progress = await client.get_workflow_handle(workflow_id).query(CodingAgentRollout.progress)
        except Exception:
            progress = None
        rollouts.append(RunningRollout(workflow_id, started, stage, progress))
    return rollouts


@dataclass(frozen=True)
class GroupCounts:
    """Groups running and closed (by ``RolloutGroupStatus``; ``no_result``: closed without one), and the sums of
    the running groups' ``progress`` answers (``answered`` of them answered; at most the listing limit asked)."""

    running: int
    closed: dict[str, int]
    no_result: int
    answered: int
    done: int
    valid: int
    refilled: int


async def group_counts(client: Client, limit: int = 200) -> GroupCounts:
    queries = [
        RUNNING_GROUPS,
        f"WorkflowType='RolloutGroup' AND ExecutionStatus!='Running' AND {GROUP_STATUS.name}='running'",
        *(f"WorkflowType='RolloutGroup' AND {GROUP_STATUS.name}='{status}'" for status in CLOSED_GROUP_STATUSES),
    ]
    running, no_result, *closed = [
        count.count for count in await asyncio.gather(*(client.count_workflows(query) for query in queries))
    ]
    ids = [execution.id async for execution in client.list_workflows(RUNNING_GROUPS, limit=limit)]
    answers = [p for p in await asyncio.gather(*(_group_progress(client, workflow_id) for workflow_id in ids)) if p]
    return GroupCounts(
        running=running,
        closed=dict(zip(CLOSED_GROUP_STATUSES, closed, strict=True)),
        no_result=no_result,
        answered=len(answers),
        done=sum(p.done for p in answers),
        valid=sum(p.valid for p in answers),
        refilled=sum(p.refilled for p in answers),
    )


async def _group_progress(client: Client, workflow_id: str) -> GroupProgress | None:
    """The group's ``progress`` answer; None when it gave none (closed meanwhile, no worker took the query)."""
    try:
        return await client.get_workflow_handle(workflow_id).query(RolloutGroup.progress)
    except Exception:
        return None


def stale(rollouts: list[RunningRollout], minutes: float, now: datetime | None = None) -> list[RunningRollout]:
    """Rollouts in the agent stage whose last model turn (or stage entry) is older than ``minutes``."""
    now = now or datetime.now(UTC)
    return [r for r in rollouts if r.stage == "agent" and (r.idle_minutes(now) or 0) > minutes]


async def rollout_details(
    client: Client, workflow_id: str, log_lines: int = 20, sandboxes: DockerSandboxes | None = None
) -> tuple[str, RolloutProgress | RolloutResult, list[str]]:
    """(status, progress or final result, last lines of the agent log: read from the running sandbox through
    ``sandboxes``, by default this machine's Docker engine, or from the result's own log)."""
    handle = client.get_workflow_handle(workflow_id)
    description = await handle.describe()
    if description.status == WorkflowExecutionStatus.RUNNING:
        progress = await handle.query(CodingAgentRollout.progress)
        if sandboxes is None:
            from durable_rollouts.docker_sandbox.sandboxes import (
                DockerSandboxes,
            )  # docker: read only when a sandbox is live here

            sandboxes = DockerSandboxes()
        lines = await _live_log_tail(sandboxes, progress, log_lines)
        return "RUNNING", progress, lines
    result = await client.get_workflow_handle_for(CodingAgentRollout.run, workflow_id).result()
    lines = result.agent.log.splitlines()[-log_lines:] if result.agent else []
    return description.status.name if description.status else "UNKNOWN", result, lines


async def running_agent_attempt(client: Client, workflow_id: str) -> int | None:
    """The attempt of the rollout's agent activity a worker runs now (a retry after an interruption counts up), None
    when none runs: not yet, between attempts, or past the agent."""
    description = await client.get_workflow_handle(workflow_id).describe()
    running = [
        pending.attempt
        for pending in description.raw_description.pending_activities
        if pending.activity_type.name == "run_claude_code"
        and pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    ]
    return max(running, default=None)


async def request_abort(client: Client, workflow_id: str, reason: str = "cancelled") -> None:
    await client.get_workflow_handle(workflow_id).signal(CodingAgentRollout.abort, reason)


async def _live_log_tail(sandboxes: DockerSandboxes, progress: RolloutProgress, log_lines: int) -> list[str]:
    if progress.stage != "agent" or not progress.sandbox:
        return []
    handle = SandboxHandle(container_id=progress.sandbox, name=progress.sandbox, workdir="/")
    try:
        data = await sandboxes.read_file(handle, AGENT_LOG, 256 * 1024, tail=True)
    except Exception as error:
        return [f"(agent log not readable from this machine: {type(error).__name__}: {error})"]
    return data.decode(errors="replace").splitlines()[-log_lines:]


@dataclass(frozen=True)
class HostSlots:
    """One host queue: its agent slots as its worker's identity states them (None: no worker of it polls the
    shared queue), the slots its running rollouts hold there, and how many of its workers poll."""

    host_queue: str
    agent_slots: int | None
    in_use: int
    pollers: int


async def host_slots(client: Client, task_queue: str) -> tuple[list[HostSlots], int]:
    """The hosts seen (rollout workers polling ``task_queue``, and host queues running rollouts are pinned to),
    by queue name, and the number of rollouts booting, which hold a slot on a host not recorded yet.

    Slots in use are counted from visibility: running rollouts whose ``RolloutHost`` is the queue and whose
    stage holds a slot (``PLACED_STAGES``); a worker's own count also holds ``pick_host`` reservations of
    rollouts still booting (its ``rollout_agent_slots_in_use`` gauge has the exact figure).
    """
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    slots: dict[str, int] = {}
    pollers: dict[str, int] = {}
    for poller in described.pollers:
        identity = parse_worker_identity(poller.identity)
        if identity is not None:
            slots[identity.host_queue] = identity.agent_slots
            pollers[identity.host_queue] = pollers.get(identity.host_queue, 0) + 1
    running = "WorkflowType='CodingAgentRollout' AND ExecutionStatus='Running'"
    placed = f"{running} AND {STAGE.name} IN ({', '.join(repr(stage) for stage in PLACED_STAGES)})"
    in_use: dict[str, int] = {}
    async for execution in client.list_workflows(placed):
        host = execution.typed_search_attributes.get(HOST)
        if host:
            in_use[host] = in_use.get(host, 0) + 1
    booting = (await client.count_workflows(f"{running} AND {STAGE.name}='booting'")).count
    hosts = [
        HostSlots(queue, slots.get(queue), in_use.get(queue, 0), pollers.get(queue, 0))
        for queue in sorted(slots.keys() | in_use.keys())
    ]
    return hosts, booting
