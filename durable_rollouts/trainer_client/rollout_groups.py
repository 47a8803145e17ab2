"""The trainer's side of GRPO groups: start or attach ``RolloutGroup`` workflows, stream them, fill batches.

Invariants:
* **Streaming.** ``stream_groups`` yields each group's ``GroupResult`` as soon as it finishes (finish order, not input
  order), with at most ``concurrency`` groups in flight; a group that cannot be started or collected is yielded
  ``failed`` (``workflow_runs``: reason and message), and a Temporal outage is waited out. Group ids are deterministic
  (``group_workflow_id``), so a restarted trainer re-attaches and each group runs once.
* **Batches.** ``fill_batch`` returns once ``n_groups`` groups passed their filter (and the trainer's ``accept``), in
  finish order, drawing another group from its source for each that is dropped; the groups still running then are
  cut or handed over unfinished (``straggler_policy``). Dropped, cut and handed-over groups are reported in the
  ``Batch`` (``dropped``, ``cut``, ``handed_over``), never lost.

How many groups ``fill_batch`` keeps in flight (``over_sample``, or slime's ``refetch_chunk``): its docstring; the
API in use: docs/groups.md.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from durable_rollouts.config.settings import SHARED_TASK_QUEUE
from durable_rollouts.contracts.aborts import AbortReason
from durable_rollouts.contracts.rollout_group import GroupInput, GroupResult, ProbeTally
from durable_rollouts.contracts.workflow_ids import group_workflow_id
from durable_rollouts.trainer_client.sample_payloads import with_child_payloads
from durable_rollouts.trainer_client.workflow_runs import DEFAULT_SERVER_WAIT_S, RunFailure, collect, start_or_attach
from workflows.rollout_group import RolloutGroup

StragglerPolicy = Literal["cut", "handover"]
# The trainer's own filter: a finished group its filter kept, and how many started groups are not dropped
# (that one included: slime's ``remaining_batch_size``); True keeps it. May be a coroutine function.
Accept = Callable[[GroupResult, int], bool | Awaitable[bool]]


def group_id(group: GroupInput) -> str:
    return group_workflow_id(group.run_id, group.prompt_key, group.group_index)


async def start_group(client: Client, group: GroupInput, task_queue: str = SHARED_TASK_QUEUE) -> WorkflowHandle:
    """Start the group's workflow, or attach to it if that id already ran or is running."""
    summary = f"group {group.group_index}: {group.prompt_key} x{group.size}"
    return await start_or_attach(client, RolloutGroup.run, group, group_id(group), task_queue, GroupResult, summary)


async def collect_group(
    client: Client,
    group: GroupInput,
    task_queue: str = SHARED_TASK_QUEUE,
    server_wait_s: float = DEFAULT_SERVER_WAIT_S,
    child_logs: bool = False,
) -> GroupResult:
    """Start (or attach to) one group and wait for its result, with the trajectories it left to its children (and
    with ``child_logs`` their logs too, ``sample_payloads``); a start or collection failure is its ``failed`` result."""
    outcome = await collect(
        client, group_id(group), lambda: start_group(client, group, task_queue), GroupResult, server_wait_s
    )
    return (
        failed_group(group, outcome)
        if isinstance(outcome, RunFailure)
        else await with_child_payloads(client, outcome, logs=child_logs)
    )


def failed_group(group: GroupInput, failure: RunFailure) -> GroupResult:
    return GroupResult.for_group(
        group,
        group_id(group),
        status="failed",
        abort_reason=failure.reason,
        error=failure.message,
        dropped_by="not_completed",
    )


async def stream_groups(
    client: Client,
    groups: Iterable[GroupInput],
    task_queue: str = SHARED_TASK_QUEUE,
    concurrency: int = 4,
    *,
    server_wait_s: float = DEFAULT_SERVER_WAIT_S,
    child_logs: bool = False,
    upcoming: Callable[[list[GroupInput]], None] | None = None,
) -> AsyncIterator[GroupResult]:
    """Each group's result as soon as it finishes (``collect_group``), at most ``concurrency`` groups in flight.
    After each round of starts, ``upcoming`` hears the next ``concurrency`` groups to start (e.g.
    ``ImagePrefetch.announce_groups``)."""
    pending = deque(groups)
    running: set[asyncio.Task[GroupResult]] = set()
    try:
        while True:
            while len(running) < concurrency and pending:
                running.add(
                    asyncio.create_task(collect_group(client, pending.popleft(), task_queue, server_wait_s, child_logs))
                )
            if upcoming is not None and pending:
                upcoming(list(itertools.islice(pending, concurrency)))
            if not running:
                return
            done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                yield task.result()
    finally:
        for task in running:
            task.cancel()


@dataclass
class Batch:
    """One filled batch: ``groups`` passed their filter (``n_groups`` of them unless the source ran dry), in finish
    order; ``dropped`` ended but their filter (or a failure) kept them out; ``cut`` were stopped as stragglers;
    ``handed_over`` are groups for the next batch, still running or finished beyond ``n_groups`` (starting them
    again attaches to their workflows)."""

    groups: list[GroupResult] = field(default_factory=list)
    dropped: list[GroupResult] = field(default_factory=list)
    cut: list[GroupResult] = field(default_factory=list)
    handed_over: list[GroupInput] = field(default_factory=list)
    started: int = 0
    time_to_batch_s: float = 0.0

    def metrics(self) -> dict[str, float]:
        """What a trainer logs per batch: samples valid / refilled / flagged tampered (and that share of the graded
        ones: alert when it rises) / hit by the static screen (its share: a trend, not a verdict), groups filtered /
        failed / cut / handed over, impossible-task probes (their groups, never in the batch, and how their graded
        samples were judged: the cheating rate), the time to the batch."""
        ended = [*self.groups, *self.dropped, *self.cut]
        graded = [sample for g in self.groups for sample in g.samples if sample.graded]
        tampered = sum(sample.tampered for sample in graded)
        screened = sum(sample.screened for sample in graded)
        probes = ProbeTally.of(ended)
        return {
            "groups": len(self.groups),
            "groups_started": self.started,
            "samples": sum(len(g.samples) for g in self.groups),
            "samples_valid": sum(g.n_valid for g in self.groups),
            "samples_refilled": sum(g.refilled for g in ended),
            "samples_tampered": tampered,
            "tampered_share": tampered / len(graded) if graded else 0.0,
            "samples_screened": screened,
            "screened_share": screened / len(graded) if graded else 0.0,
            "groups_filtered": sum(g.status != "failed" and g.dropped_by != "probe" for g in self.dropped),
            "groups_probe": sum(g.dropped_by == "probe" for g in self.dropped),
            "probes_cheated": probes.cheated,
            "probes_held": probes.held,
            "probes_void": probes.void,
            "cheating_rate": probes.cheating_rate,
            "groups_failed": sum(g.status == "failed" for g in self.dropped),
            "groups_cut": len(self.cut),
            "groups_handed_over": len(self.handed_over),
            "time_to_batch_s": self.time_to_batch_s,
        }


async def fill_batch(
    client: Client,
    next_groups: Callable[[int], list[GroupInput]],
    n_groups: int,
    over_sample: int | None = None,
    straggler_policy: StragglerPolicy = "cut",
    task_queue: str = SHARED_TASK_QUEUE,
    *,
    carried: Iterable[GroupInput] = (),
    accept: Accept | None = None,
    server_wait_s: float = DEFAULT_SERVER_WAIT_S,
    refetch_chunk: int | None = None,
) -> Batch:
    """Fill a batch of ``n_groups`` kept groups from at most ``over_sample`` (at least ``n_groups``) started ones.

    ``next_groups(k)`` gives up to ``k`` more groups (fewer, or none, once the
    source is dry); ``carried`` (a previous batch's ``handed_over``) are
    started, i.e. attached to, first. Groups running plus groups kept never
    exceed ``over_sample``: a group that is dropped (by its filter, by
    ``accept``, the trainer's own filter on a group its filter kept, or
    because it failed) frees its place for a new one, a kept one does not.
    With ``refetch_chunk`` there is no such cap: ``next_groups(refetch_chunk)`` is drawn, and every group
    drawn started, whenever fewer than ``n_groups`` started groups are left undropped.
    """
    if n_groups < 1:
        raise ValueError(f"n_groups: {n_groups} must be at least 1")
    capacity = max(over_sample or n_groups, n_groups)
    began = time.monotonic()
    batch = Batch()
    queued, dry = list(carried), False
    running: dict[asyncio.Task[GroupResult], GroupInput] = {}

    def draw(k: int) -> None:
        nonlocal dry
        more = next_groups(k)
        dry = len(more) < k
        queued.extend(more)

    while len(batch.groups) < n_groups:
        if refetch_chunk:
            while not dry and batch.started + len(queued) - len(batch.dropped) < n_groups:
                draw(refetch_chunk)
        elif not dry and len(queued) < (room := capacity - len(running) - len(batch.groups)):
            draw(room - len(queued))
        while queued and (refetch_chunk or len(running) + len(batch.groups) < capacity):
            group = queued.pop(0)
            running[asyncio.create_task(collect_group(client, group, task_queue, server_wait_s))] = group
            batch.started += 1
        if not running:
            break
        done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            await _place(batch, running.pop(task), task.result(), n_groups, accept)
    batch.time_to_batch_s = time.monotonic() - began
    if straggler_policy == "cut":
        await asyncio.gather(*(_cut(client, group) for group in running.values()))
        for task, group in running.items():
            result = await task
            if result.status == "cut":
                batch.cut.append(result)
            else:
                await _place(batch, group, result, n_groups, accept)
    else:
        for task, group in running.items():
            task.cancel()
            batch.handed_over.append(group)
    batch.handed_over.extend(queued)
    return batch


async def _place(batch: Batch, group: GroupInput, result: GroupResult, n_groups: int, accept: Accept | None) -> None:
    """A finished group goes into the batch, among the dropped, or (kept, the batch full) to the next batch."""
    if result.kept and len(batch.groups) >= n_groups:
        batch.handed_over.append(group)
        return
    if result.kept and accept is not None:
        verdict = accept(result, batch.started - len(batch.dropped))
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if not verdict:
            result = result.model_copy(update={"kept": False, "dropped_by": "trainer_filter"})
    (batch.groups if result.kept else batch.dropped).append(result)


async def _cut(client: Client, group: GroupInput) -> None:
    """Ask a straggler group to stop; one that closed meanwhile keeps its own result."""
    try:
        await client.get_workflow_handle(group_id(group)).signal(RolloutGroup.cut, AbortReason.STRAGGLER_CUT)
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise
