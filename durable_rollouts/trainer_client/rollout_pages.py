"""The HTML pages of rollouts and runs, read from Temporal: what ``starter.py show WF --html FILE`` and
``starter.py report --run-id R --html DIR`` write.

A rollout's page is made of its result (or its live progress while it runs), its workflow history (the time
line and the attempts) and its trajectory read with the policy's tokenizer, under the sample contract in force
(``slime_samples.registry.contract_in_force``, the trainer's own environment variables). A run's report holds
its ``RolloutGroup`` s (``GroupResult``) and the rollouts started outside any group, and writes every child run's
page beside the index (``pages/``). Nothing is written for a workflow that cannot be read: it is listed with
why (a group's too), and the other pages are written.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError

from durable_rollouts.contracts.rollout_group import GroupResult
from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult
from durable_rollouts.policy.trajectory_packing import TrajectoryUnreadable, read_trajectory
from durable_rollouts.trainer_client.history_timeline import closing_failure, timeline, with_pending
from durable_rollouts.trainer_client.regrade_runs import belongs_to_run, groups_query, input_and_result, rollouts_query
from durable_rollouts.trainer_client.results_file import file_stem
from durable_rollouts.trajectory_view.rollout_page import PageSettings, RolloutView, render_rollout, with_conversation
from durable_rollouts.trajectory_view.run_report import RunReport, render_run_report
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.rollout_group import RolloutGroup

log = logging.getLogger(__name__)
PAGE_READS = 4
QUERY_TIMEOUT = timedelta(seconds=5)


@dataclass
class ReportFiles:
    index: Path
    pages: dict[str, Path] = field(default_factory=dict)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    running_groups: int = 0


async def read_rollout(client: Client, workflow_id: str) -> tuple[RolloutView, RolloutInput]:
    """The rollout's view without its conversation (``with_conversation`` adds it), and its input, from one read
    of its history (``regrade_runs.input_and_result``). A running rollout's progress is asked of its worker for
    ``QUERY_TIMEOUT`` at most: with none answering (a stopped demo's stored state) the page has its time line
    and says why it has no progress."""
    handle = client.get_workflow_handle(workflow_id)
    history = await handle.fetch_history()
    rollout, result = await input_and_result(client, history)
    line = timeline(history.events)
    if result is not None:
        if result.trajectory is None:
            return RolloutView(
                workflow_id,
                "COMPLETED",
                result,
                timeline=line,
                trajectory_note=result.abort_reason or "no trajectory in the result",
            ), rollout
        try:
            trajectory = read_trajectory(result.trajectory)
        except TrajectoryUnreadable as error:
            return RolloutView(workflow_id, "COMPLETED", result, timeline=line, trajectory_note=str(error)), rollout
        return RolloutView(workflow_id, "COMPLETED", result, timeline=line, trajectory=trajectory), rollout
    description = await handle.describe()
    state = description.status.name if description.status else "UNKNOWN"
    if description.status != WorkflowExecutionStatus.RUNNING:
        return RolloutView(
            workflow_id,
            state,
            timeline=line,
            trajectory_note=f"the workflow closed without a result ({closing_failure(history.events) or state})",
        ), rollout
    line = with_pending(line, description.raw_description.pending_activities, datetime.now(UTC).replace(tzinfo=None))
    try:
        progress = await handle.query(CodingAgentRollout.progress, rpc_timeout=QUERY_TIMEOUT)
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError) as error:
        return RolloutView(
            workflow_id, state, timeline=line, trajectory_note=f"no worker answered for its progress ({error})"
        ), rollout
    return RolloutView(
        workflow_id, state, progress=progress, timeline=line, trajectory_note="the rollout is still running"
    ), rollout


async def write_rollout_page(client: Client, workflow_id: str, path: Path, settings: PageSettings) -> RolloutView:
    view, _ = await read_rollout(client, workflow_id)
    return await _write(view, path, settings)


async def _write(view: RolloutView, path: Path, settings: PageSettings) -> RolloutView:
    """``view``'s page at ``path``, read and rendered in a thread: the event loop goes on reading other pages."""

    def render() -> RolloutView:
        read = with_conversation(view, settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_rollout(read, settings.texts), encoding="utf-8")
        return read

    return await asyncio.to_thread(render)


async def write_run_report(client: Client, run_id: str, folder: Path, settings: PageSettings) -> ReportFiles:
    """The run's index (``folder/index.html``) and every rollout's page (``folder/pages/<workflow id>.html``)."""
    groups, running, unreadable_groups = await _groups_of(client, run_id)
    in_groups = {run.workflow_id for g in groups for s in g.samples for run in s.runs} | {
        s.rollout.workflow_id for g in groups for s in g.samples if s.rollout is not None
    }
    listed = sorted({execution.id async for execution in client.list_workflows(rollouts_query(run_id))})
    files = ReportFiles(folder / "index.html", running_groups=running, unreadable=unreadable_groups)
    gate = asyncio.Semaphore(PAGE_READS)
    ungrouped: list[RolloutResult] = []

    async def page_of(workflow_id: str) -> None:
        path = folder / "pages" / f"{file_stem(workflow_id)}.html"
        try:
            async with gate:
                view, rollout = await read_rollout(client, workflow_id)
                if not belongs_to_run(workflow_id, run_id, rollout):
                    return
                await _write(view, path, settings)
        except Exception as error:
            log.warning("the page of %s was not written", workflow_id, exc_info=True)
            files.unreadable.append((workflow_id, f"{type(error).__name__}: {error}"))
            return
        files.pages[workflow_id] = path
        if workflow_id not in in_groups and view.result is not None:
            ungrouped.append(view.result)

    await asyncio.gather(*(page_of(workflow_id) for workflow_id in listed))
    links = {workflow_id: f"pages/{path.name}" for workflow_id, path in files.pages.items()}
    folder.mkdir(parents=True, exist_ok=True)
    files.index.write_text(render_run_report(RunReport(run_id, groups, ungrouped), links), encoding="utf-8")
    return files


async def _groups_of(client: Client, run_id: str) -> tuple[list[GroupResult], int, list[tuple[str, str]]]:
    """The run's closed groups' results, how many of its groups are still running, and the groups whose result
    could not be read, with why."""
    groups, running, unreadable = [], 0, []
    async for execution in client.list_workflows(groups_query(run_id)):
        if execution.status == WorkflowExecutionStatus.RUNNING:
            running += 1
            continue
        try:
            result = await client.get_workflow_handle_for(
                RolloutGroup.run, execution.id, run_id=execution.run_id
            ).result()
        except Exception as error:
            unreadable.append((execution.id, f"{type(error).__name__}: {error}"))
            continue
        if result.run_id == run_id and result.kind == "rollout":
            groups.append(result)
    return groups, running, unreadable
