"""Re-grade a finished run: every kept patch of run R graded again in a fresh sandbox, no agent run again.

``rollouts_of_run`` finds the run's ``CodingAgentRollout`` workflows (flat
ones and group children, refills included) by visibility query and reads
each one's input and result from its history; ``skip_reason`` says why one
cannot be re-graded (not finished, aborted before a diff, over the cap,
rolled out before patches were kept, not in ``--dataset``; a history that
cannot be read is skipped too, and the others go on). ``regrade_run``
starts one ``RegradeRollout`` per kept patch (at most ``concurrency`` at a
time) and appends one ``RegradeRow`` per re-graded rollout to the results
file, keyed by the re-grade's id: a re-run with the same regrade id and file
attaches to the re-grades and adds only the missing lines.

With ``--dataset`` the grader spec comes from the dataset's row of the same
instance id (``regrade_task``: the row's task in the environment the patch
was captured in); without it the original task is graded by the worker's
current grading code.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus, WorkflowHistory

from durable_rollouts.contracts.regrade import RegradeInput, RegradeResult, RegradeRow, Verdict
from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.workflow_ids import regrade_workflow_id, rollout_workflow_id
from durable_rollouts.trainer_client.results_file import ResultSink
from durable_rollouts.trainer_client.workflow_runs import RunFailure, collect, run_limited, start_or_attach
from workflows.regrade_rollout import RegradeRollout

# What a re-grade keeps from the original task whatever ``--dataset`` says: the environment its patch was captured in.
CAPTURE_ENVIRONMENT = ("image", "workdir", "pre_commands")
HISTORY_READS = 16
_REFILL = re.compile(r"-refill[1-9][0-9]*")


class UnknownRun(Exception):
    """No rollout workflow of the run id exists on the server."""


@dataclass(frozen=True)
class StoredRollout:
    """One rollout of the run as its history has it: its input, its result (None unless it completed) and its
    execution status (``COMPLETED``, ``RUNNING``, ``TERMINATED``, ...)."""

    workflow_id: str
    rollout: RolloutInput
    result: RolloutResult | None
    status: str


def rollouts_query(run_id: str) -> str:
    """The visibility query for the run's rollout workflows (ids ``rollout-<run id>-...``; ``belongs_to_run``
    sorts out other runs whose id starts the same way)."""
    return _run_query("CodingAgentRollout", "rollout", run_id)


def groups_query(run_id: str) -> str:
    """The visibility query for the run's group workflows (ids ``group-<run id>-...``; a group's ``run_id``
    sorts out other runs whose id starts the same way)."""
    return _run_query("RolloutGroup", "group", run_id)


def _run_query(workflow_type: str, prefix: str, run_id: str) -> str:
    if "'" in run_id or "\\" in run_id:
        raise ValueError(f"--run-id {run_id!r}: a run id with a quote or backslash cannot be looked up")
    return f"WorkflowType='{workflow_type}' AND WorkflowId STARTS_WITH '{prefix}-{run_id}-'"


def belongs_to_run(workflow_id: str, run_id: str, rollout: RolloutInput) -> bool:
    """The id is the one the run gives this rollout's sample, or one of its refills."""
    first = rollout_workflow_id(run_id, rollout.task.instance_id, rollout.sample_index, rollout.group_index)
    return workflow_id == first or (
        workflow_id.startswith(first) and _REFILL.fullmatch(workflow_id[len(first) :]) is not None
    )


@dataclass(frozen=True)
class RunRollouts:
    """The run's rollouts by workflow id (one run each: the completed one when a reset left several), and the
    ids whose history could not be read, with why (listed under the run's prefix, so perhaps another run's)."""

    stored: list[StoredRollout]
    unreadable: list[tuple[str, str]]


async def rollouts_of_run(client: Client, run_id: str) -> RunRollouts:
    """The run's rollouts; ``UnknownRun`` when the server has none under its id."""
    latest: dict[str, WorkflowExecution] = {}
    async for execution in client.list_workflows(rollouts_query(run_id)):
        if execution.id not in latest or execution.status == WorkflowExecutionStatus.COMPLETED:
            latest[execution.id] = execution
    gate = asyncio.Semaphore(HISTORY_READS)

    async def read(execution: WorkflowExecution) -> StoredRollout | tuple[str, str]:
        try:
            async with gate:
                history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
            rollout, result = await input_and_result(client, history)
        except Exception as error:
            return execution.id, f"history unreadable ({type(error).__name__}: {error})"
        return StoredRollout(execution.id, rollout, result, execution.status.name if execution.status else "UNKNOWN")

    found = await asyncio.gather(*(read(execution) for execution in latest.values()))
    stored = sorted(
        (r for r in found if isinstance(r, StoredRollout) and belongs_to_run(r.workflow_id, run_id, r.rollout)),
        key=lambda r: r.workflow_id,
    )
    unreadable = sorted(r for r in found if isinstance(r, tuple))
    if not stored and not unreadable:
        raise UnknownRun(f"no rollouts of run {run_id!r} on this Temporal server (query: {rollouts_query(run_id)})")
    return RunRollouts(stored, unreadable)


async def input_and_result(client: Client, history: WorkflowHistory) -> tuple[RolloutInput, RolloutResult | None]:
    """A rollout's input and, when its history ends in completion, its result, both decoded from the history."""
    started = history.events[0].workflow_execution_started_event_attributes
    (rollout,) = await client.data_converter.decode(started.input.payloads, [RolloutInput])
    last = history.events[-1]
    if not last.HasField("workflow_execution_completed_event_attributes"):
        return rollout, None
    (result,) = await client.data_converter.decode(
        last.workflow_execution_completed_event_attributes.result.payloads, [RolloutResult]
    )
    return rollout, result


def skip_reason(stored: StoredRollout, current_tasks: Mapping[str, TaskSpec] | None) -> str | None:
    """Why this rollout cannot be re-graded, or None when it can."""
    result = stored.result
    if result is None:
        return (
            f"not finished ({stored.status.lower()})"
            if stored.status == "RUNNING"
            else f"closed without a result ({stored.status.lower()})"
        )
    if result.diff is None:
        return f"no diff was taken ({result.status}: {result.abort_reason})"
    if result.diff.over_cap:
        return f"patch over the cap, nothing kept ({result.diff.note})"
    if result.diff.kept_patch is None:
        return "no patch kept (rolled out before patches travelled in the result)"
    if current_tasks is not None and result.instance_id not in current_tasks:
        return f"instance {result.instance_id!r} is not in --dataset"
    return None


def regrade_task(original: TaskSpec, current: TaskSpec | None) -> TaskSpec:
    """The task a re-grade grades with: ``current`` (a dataset's row) in the original's capture environment
    (``CAPTURE_ENVIRONMENT``), or the original when there is no current row."""
    if current is None:
        return original
    return current.model_copy(update={field: getattr(original, field) for field in CAPTURE_ENVIRONMENT})


def regrade_input(stored: StoredRollout, current: TaskSpec | None) -> RegradeInput:
    assert stored.result is not None and stored.result.diff is not None and stored.result.diff.kept_patch is not None
    return RegradeInput(
        original_workflow_id=stored.workflow_id,
        task=regrade_task(stored.rollout.task, current),
        patch=stored.result.diff.kept_patch,
        eval_timeout_s=stored.rollout.eval_timeout_s,
    )


def regrade_row(
    stored: StoredRollout, workflow_id: str, outcome: RegradeResult | RunFailure, from_dataset: bool
) -> RegradeRow:
    """The results line of one re-graded rollout: the original's grading, the new one, and whether they differ."""
    assert stored.result is not None and stored.result.diff is not None and stored.result.diff.kept_patch is not None
    original = Verdict.of(stored.result.evaluation) if stored.result.evaluation else None
    common = {
        "workflow_id": workflow_id,
        "original_workflow_id": stored.workflow_id,
        "instance_id": stored.result.instance_id,
        "sample_index": stored.rollout.sample_index,
        "group_index": stored.rollout.group_index,
        "original": original,
        "patch_bytes": len(stored.result.diff.kept_patch.encode("utf-8", errors="surrogatepass")),
        "grader_from": "dataset" if from_dataset else "rollout",
    }
    if isinstance(outcome, RunFailure):
        return RegradeRow(**common, status="failed", abort_reason=outcome.reason, error=outcome.message)
    evaluation = outcome.evaluation
    changed = Verdict.of(evaluation).differs_from(original) if evaluation and original else None
    return RegradeRow(
        **common, status=outcome.status, abort_reason=outcome.abort_reason, evaluation=evaluation, changed=changed
    )


@dataclass
class RegradeSummary:
    rows: list[RegradeRow]
    skipped: list[tuple[str, str]]
    already_there: int

    @property
    def changed(self) -> int:
        return sum(row.changed is True for row in self.rows)

    @property
    def not_graded(self) -> int:
        return sum(row.status != "completed" for row in self.rows)


async def regrade_run(
    client: Client,
    run_id: str,
    regrade_id: str,
    out: Path,
    task_queue: str,
    current_tasks: Mapping[str, TaskSpec] | None = None,
    concurrency: int = 8,
    server_wait_s: float = 300.0,
) -> RegradeSummary:
    """Re-grade every kept patch of the run; each skipped rollout is printed with its reason and each row is
    appended to ``out`` as its re-grade ends. ``UnknownRun`` when the run has no rollouts."""
    found = await rollouts_of_run(client, run_id)
    reasons = {r.workflow_id: skip_reason(r, current_tasks) for r in found.stored}
    skipped = [
        *found.unreadable,
        *((workflow_id, reason) for workflow_id, reason in reasons.items() if reason is not None),
    ]
    for workflow_id, reason in skipped:
        print(f"skipped {workflow_id}: {reason}", flush=True)
    gradable = [r for r in found.stored if reasons[r.workflow_id] is None]
    with ResultSink(out, lambda row: row.model_dump(mode="json")) as sink:
        todo = sink.pending(gradable, lambda r: regrade_workflow_id(regrade_id, r.workflow_id), "re-grades")

        async def one(rollout: StoredRollout) -> RegradeRow:
            workflow_id = regrade_workflow_id(regrade_id, rollout.workflow_id)
            current = current_tasks.get(rollout.rollout.task.instance_id) if current_tasks is not None else None
            regrade = regrade_input(rollout, current)

            def start():
                return start_or_attach(
                    client,
                    RegradeRollout.run,
                    regrade,
                    workflow_id,
                    task_queue,
                    RegradeResult,
                    f"re-grade {rollout.workflow_id}",
                )

            outcome = await collect(client, workflow_id, start, RegradeResult, server_wait_s)
            return regrade_row(rollout, workflow_id, outcome, current is not None)

        def write(row: RegradeRow) -> None:
            sink.write_record(row.model_dump(mode="json"))
            print(_row_line(row), flush=True)

        rows = await run_limited(todo, one, concurrency, write)
    return RegradeSummary(rows=rows, skipped=skipped, already_there=len(gradable) - len(todo))


def _row_line(row: RegradeRow) -> str:
    before = f"{row.original.reward:.2f}" if row.original else "-"
    after = f"{row.evaluation.reward:.2f}" if row.evaluation else "-"
    verdict = {True: "changed", False: "same", None: "-"}[row.changed]
    why = f"  ({row.abort_reason})" if row.abort_reason else ""
    return f"{row.original_workflow_id}: {row.status} reward {before} -> {after} {verdict}{why}"
