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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.service import RPCError

from durable_rollouts.contracts.rollout import RolloutInput, RolloutResult
from durable_rollouts.contracts.rollout_group import GroupResult
from durable_rollouts.policy.trajectory_packing import TrajectoryUnreadable, read_trajectory
from durable_rollouts.slime_samples.options import SampleOptions
from durable_rollouts.slime_samples.registry import ContractChoice
from durable_rollouts.trainer_client.history_timeline import timeline, with_pending
from durable_rollouts.trainer_client.regrade_runs import belongs_to_run, rollouts_query
from durable_rollouts.trainer_client.results_file import file_stem
from durable_rollouts.trajectory_view.conversation import conversations
from durable_rollouts.trajectory_view.rollout_page import RolloutView, render_rollout
from durable_rollouts.trajectory_view.run_report import RunReport, render_run_report
from durable_rollouts.trajectory_view.token_text import TokenTexts
from durable_rollouts.trajectory_view.training_samples import sample_plan
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.rollout_group import RolloutGroup

log = logging.getLogger(__name__)
PAGE_READS = 4
QUERY_TIMEOUT = timedelta(seconds=5)


@dataclass(frozen=True)
class PageSettings:
    """How tokens are read (``texts``) and which contract and options turn them into samples."""

    texts: TokenTexts
    contract: ContractChoice
    options: SampleOptions = SampleOptions()


@dataclass
class ReportFiles:
    index: Path
    pages: dict[str, Path] = field(default_factory=dict)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    running_groups: int = 0


async def read_rollout(client: Client, workflow_id: str) -> tuple[RolloutView, RolloutInput]:
    """The rollout's view without its conversation (``with_conversation`` adds it), and its input. A running
    rollout's progress is asked of its worker for ``QUERY_TIMEOUT`` at most: with none answering (a stopped
    demo's stored state) the page has its time line and says why it has no progress."""
    handle = client.get_workflow_handle(workflow_id)
    history = await handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    (rollout,) = await client.data_converter.decode(started.input.payloads, [RolloutInput])
    description = await handle.describe()
    state = description.status.name if description.status else "UNKNOWN"
    line = timeline(history.events)
    if description.status == WorkflowExecutionStatus.RUNNING:
        line = with_pending(line, description.raw_description.pending_activities, datetime.now(UTC).replace(tzinfo=None))
        try:
            progress = await handle.query(CodingAgentRollout.progress, rpc_timeout=QUERY_TIMEOUT)
        except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError) as error:
            return RolloutView(workflow_id, state, timeline=line, trajectory_note=f"no worker answered for its progress ({error})"), rollout
        return RolloutView(workflow_id, state, progress=progress, timeline=line, trajectory_note="the rollout is still running"), rollout
    try:
        result = await client.get_workflow_handle_for(CodingAgentRollout.run, workflow_id).result()
    except WorkflowFailureError as error:
        return RolloutView(workflow_id, state, timeline=line, trajectory_note=f"the workflow failed: {error.cause or error}"), rollout
    if result.trajectory is None:
        return RolloutView(workflow_id, state, result, timeline=line, trajectory_note=result.abort_reason or "no trajectory in the result"), rollout
    try:
        trajectory = read_trajectory(result.trajectory)
    except TrajectoryUnreadable as error:
        return RolloutView(workflow_id, state, result, timeline=line, trajectory_note=str(error)), rollout
    return RolloutView(workflow_id, state, result, timeline=line, trajectory=trajectory), rollout


def with_conversation(view: RolloutView, settings: PageSettings) -> RolloutView:
    if view.trajectory is None:
        return view
    read = conversations(view.trajectory.segments, view.trajectory.turn_log, settings.texts)
    plan = sample_plan(read, view.trajectory.turn_log, settings.contract.name, settings.contract.log_line, settings.options)
    return replace(view, conversations=read, plan=plan)


async def write_rollout_page(client: Client, workflow_id: str, path: Path, settings: PageSettings) -> RolloutView:
    view, _ = await read_rollout(client, workflow_id)
    view = with_conversation(view, settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_rollout(view, settings.texts), encoding="utf-8")
    return view


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
                view = with_conversation(view, settings)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(render_rollout(view, settings.texts), encoding="utf-8")
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
    if "'" in run_id or "\\" in run_id:
        raise ValueError(f"--run-id {run_id!r}: a run id with a quote or backslash cannot be looked up")
    query = f"WorkflowType='RolloutGroup' AND WorkflowId STARTS_WITH 'group-{run_id}-'"
    groups, running, unreadable = [], 0, []
    async for execution in client.list_workflows(query):
        if execution.status == WorkflowExecutionStatus.RUNNING:
            running += 1
            continue
        try:
            result = await client.get_workflow_handle_for(RolloutGroup.run, execution.id, run_id=execution.run_id).result()
        except Exception as error:
            unreadable.append((execution.id, f"{type(error).__name__}: {error}"))
            continue
        if result.run_id == run_id and result.kind == "rollout":
            groups.append(result)
    return groups, running, unreadable
