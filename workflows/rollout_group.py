"""RolloutGroup: one GRPO group (K samples of one prompt) as one durable unit.

Its children are the K sample workflows (``CodingAgentRollout`` or ``DriftRepairEpisode``) under the ids a flat run
gives the same samples (``durable_rollouts.contracts.workflow_ids``), started with ``REJECT_DUPLICATE``, so a sample
still runs at most once per id: an id some other run already used is ``child_id_taken`` (an infrastructure failure,
refilled under a fresh id).

Invariants:
* an infrastructure failure is never a reward: each child's end is classified
  (``durable_rollouts.contracts.rollout_group.classify``), and a sample whose child failed for an infrastructure
  reason is re-run as a fresh child (``refill_workflow_id``) while the group's refill budget lasts;
* the result always comes back (never a workflow failure) with K samples, a ``valid_mask`` and why each invalid
  sample is invalid.

The outcomes, the filters, ``cut`` and what the UI shows: docs/groups.md.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ChildWorkflowError, TerminatedError, TimeoutError, WorkflowAlreadyStartedError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from workflows import rollout_metrics
from workflows import search_attributes as attrs
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.drift_repair_episode import DriftRepairEpisode

with workflow.unsafe.imports_passed_through():
    from durable_rollouts.contracts.aborts import AbortReason
    from durable_rollouts.contracts.drift_repair import EpisodeResult
    from durable_rollouts.contracts.payload_budget import GROUP_RESULT_BUDGET_BYTES, json_size
    from durable_rollouts.contracts.rollout_group import (
        PROBE_REASON,
        ChildRun,
        GroupInput,
        GroupProgress,
        GroupResult,
        GroupSample,
        GroupStatus,
        Outcome,
        child_closed_reason,
        classify,
        filter_verdict,
        outcome_of,
    )
    from durable_rollouts.contracts.rollouts import RolloutResult
    from durable_rollouts.contracts.workflow_ids import episode_workflow_id, refill_workflow_id, rollout_workflow_id


# Per kind of sample: the child workflow's run method and its graceful-stop signal.
CHILDREN: dict[str, tuple[Any, Any]] = {
    "rollout": (CodingAgentRollout.run, CodingAgentRollout.abort),
    "episode": (DriftRepairEpisode.run, DriftRepairEpisode.abort),
}


@workflow.defn
class RolloutGroup:
    def __init__(self) -> None:
        self._group: GroupInput | None = None
        self._cut_reason: str | None = None
        self._running: dict[str, ChildWorkflowHandle[Any, Any]] = {}
        self._finished: list[ChildRun] = []
        self._ended_slots: list[GroupSample] = []
        self._refilled = 0

    @workflow.query
    def progress(self) -> GroupProgress:
        return GroupProgress(
            size=self._group.size if self._group else 0,
            done=len(self._ended_slots),
            valid=sum(sample.valid for sample in self._ended_slots),
            running=len(self._running),
            refilled=self._refilled,
            infrastructure_failures=sum(run.outcome == "infrastructure" for run in self._finished),
            cut=sum(run.outcome == "cut" for run in self._finished),
            children=[*[run.workflow_id for run in self._finished], *self._running],
        )

    @workflow.signal
    def cut(self, reason: str) -> None:
        """Stop the group: running children are aborted with ``reason`` (default ``straggler_cut``), none is
        refilled."""
        if self._cut_reason is None:
            self._cut_reason = reason or AbortReason.STRAGGLER_CUT

    @workflow.run
    async def run(self, group: GroupInput) -> GroupResult:
        self._group = group
        started = workflow.now()
        workflow.upsert_search_attributes(
            [
                attrs.INSTANCE.value_set(group.prompt_key),
                attrs.GROUP_STATUS.value_set("running"),
                attrs.GROUP_VALID.value_set(0),
            ]
        )
        self._show()
        slots = [asyncio.ensure_future(self._slot(group, index)) for index in range(group.size)]
        try:
            await workflow.wait_condition(lambda: self._cut_reason is not None or all(slot.done() for slot in slots))
        except asyncio.CancelledError:
            self.cut(workflow.cancellation_reason() or AbortReason.CANCELLED)
        if self._cut_reason is not None:
            await asyncio.gather(*(self._abort(handle) for handle in list(self._running.values())))
        samples = list(await asyncio.gather(*slots))
        return self._result(group, samples, started)

    async def _slot(self, group: GroupInput, index: int) -> GroupSample:
        """Run sample ``index`` until it ends for a reason other than the infrastructure, or refills run out."""
        first_id = self._first_id(group, index)
        runs: list[ChildRun] = []
        result: RolloutResult | EpisodeResult | None = None
        while self._cut_reason is None:
            result, run = await self._child(group, index, refill_workflow_id(first_id, len(runs) + 1), len(runs))
            runs.append(run)
            if (
                run.outcome != "infrastructure"
                or self._cut_reason is not None
                or self._refilled >= group.refills_allowed
            ):
                break
            self._refilled += 1
        final = (
            runs[-1]
            if runs
            else ChildRun(workflow_id=first_id, status="aborted", abort_reason=self._cut_reason, outcome="cut")
        )
        invalid_reason = PROBE_REASON if final.outcome == "probe" else final.abort_reason or final.status
        sample = GroupSample(
            sample_index=group.samples[index].sample_index,
            valid=final.outcome == "model",
            outcome=final.outcome,
            invalid_reason=None if final.outcome == "model" else invalid_reason,
            rollout=result.without_logs() if isinstance(result, RolloutResult) else None,
            episode=result if isinstance(result, EpisodeResult) else None,
            runs=runs,
        )
        self._ended_slots.append(sample)
        workflow.upsert_search_attributes([attrs.GROUP_VALID.value_set(self.progress().valid)])
        self._show()
        return sample

    async def _child(
        self, group: GroupInput, index: int, child_id: str, refill: int
    ) -> tuple[RolloutResult | EpisodeResult | None, ChildRun]:
        """Start one child, wait for its end, classify it; a child that closed without a result is ``child_<how>``."""
        run_child, _ = CHILDREN[group.kind]
        summary = f"{group.prompt_key} sample {group.samples[index].sample_index} group {group.group_index}" + (
            f" refill {refill}" if refill else ""
        )
        try:
            handle: ChildWorkflowHandle[Any, Any] = await workflow.start_child_workflow(
                run_child,
                group.samples[index],
                id=child_id,
                task_queue=group.children_task_queue or workflow.info().task_queue,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                static_summary=summary,
            )
        except WorkflowAlreadyStartedError:
            return None, self._ended(child_id, "failed", child_closed_reason("id_taken"))
        self._running[child_id] = handle
        self._show()
        if self._cut_reason is not None:
            await self._abort(handle)
        try:
            result = await handle
        except ChildWorkflowError as error:
            return None, self._ended(child_id, "failed", child_closed_reason(_closed_how(error)))
        finally:
            self._running.pop(child_id, None)
        probe = isinstance(result, RolloutResult) and group.rollouts[index].task.probe is not None
        return result, self._ended(child_id, result.status, result.abort_reason, outcome_of(result, probe))

    def _ended(self, child_id: str, status: str, reason: str | None, outcome: Outcome | None = None) -> ChildRun:
        """Record a child's end; ``outcome`` defaults to the table's for a child without a result."""
        run = ChildRun(
            workflow_id=child_id,
            status=status,
            abort_reason=reason,
            outcome=outcome or classify(status, reason, agent_worked=False),
        )
        self._finished.append(run)
        self._show()
        return run

    async def _abort(self, handle: ChildWorkflowHandle[Any, Any]) -> None:
        """Ask one child to stop gracefully; a child that already closed ignores it."""
        _, abort = CHILDREN[self._group.kind if self._group else "rollout"]
        try:
            await handle.signal(abort, self._cut_reason or AbortReason.STRAGGLER_CUT)
        except Exception:  # the child closed between the check and the signal: its own result stands
            workflow.logger.info("child %s had closed before its abort signal", handle.id)

    @staticmethod
    def _first_id(group: GroupInput, index: int) -> str:
        if group.rollouts:
            rollout = group.rollouts[index]
            return rollout_workflow_id(
                group.run_id, rollout.task.instance_id, rollout.sample_index, rollout.group_index
            )
        return episode_workflow_id(group.run_id, group.episodes[index])

    def _result(self, group: GroupInput, samples: list[GroupSample], started: datetime) -> GroupResult:
        valid = sum(sample.valid for sample in samples)
        status: GroupStatus
        note = ""
        if self._cut_reason is not None:
            status, note = "cut", f"stopped: {self._cut_reason}"
        elif valid + sum(sample.outcome == "probe" for sample in samples) >= group.valid_needed:
            status = "completed"
        else:
            status = "insufficient"
            reasons = sorted({sample.invalid_reason or "" for sample in samples if not sample.valid})
            note = (
                f"{valid} of {group.size} valid, {group.valid_needed} needed; refills used "
                f"{self._refilled}/{group.refills_allowed}; invalid: {', '.join(reasons)}"
            )
        dropped_by = filter_verdict(group.filter, status, samples, group.valid_needed, group.probe)
        workflow.upsert_search_attributes([attrs.GROUP_STATUS.value_set(status), attrs.GROUP_VALID.value_set(valid)])
        rollout_metrics.group_finished(status, dropped_by, valid, len(samples), self._refilled)
        self._show(status)
        result = GroupResult.for_group(
            group,
            workflow.info().workflow_id,
            status=status,
            note=note,
            samples=samples,
            refilled=self._refilled,
            kept=dropped_by is None,
            dropped_by=dropped_by,
            elapsed_s=(workflow.now() - started).total_seconds(),
        )
        return result if json_size(result) <= GROUP_RESULT_BUDGET_BYTES else result.without_trajectories()

    def _show(self, status: str = "running") -> None:
        p = self.progress()
        lines = [
            f"**group** `{self._group.prompt_key if self._group else '-'}` · **{status}** · **done** {p.done}/{p.size} "
            f"· **valid** {p.valid}"
            f" · **running** {p.running} · **refilled** {p.refilled} · **infrastructure failures** "
            f"{p.infrastructure_failures} · **cut** {p.cut}"
        ]
        lines += [f"- `{run.workflow_id}`: {run.abort_reason or run.status} ({run.outcome})" for run in self._finished]
        lines += [f"- `{child}`: running" for child in self._running]
        workflow.set_current_details("\n".join(lines))


def _closed_how(error: ChildWorkflowError) -> str:
    if isinstance(error.cause, TerminatedError):
        return "terminated"
    if isinstance(error.cause, TimeoutError):
        return "timed_out"
    return "failed"
