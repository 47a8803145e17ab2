"""DriftRepairEpisode: one drift → repair self-play episode, from task to two role segments.

Sequence (all on the shared queue; each sandbox lives inside one activity): ``sample_drift_task`` -> ``propose_drift``
(policy role call, baseline or noop; an unusable model answer falls back to the seeded baseline) -> ``run_breakage``
(the broken script on the visible input, in a sandbox: validity and error trace) -> ``propose_repair`` (policy role
call, oracle or noop) -> ``grade_repair`` (diff applied, visible + held-out inputs run in a *fresh* sandbox) ->
``collect_role_segments`` (when the model played a role: one trajectory, the drift segment then the repair segment).

Invariants:
* it always returns an ``EpisodeResult``: ``completed`` with the rewards and breakdowns
  (``durable_rollouts.drift_repair.scoring``), or ``aborted`` with a machine-readable reason and zero rewards;
* the wall-clock guard (``guard_s``) is a workflow timer: when it fires, or on ``abort(reason)`` or a cancel, the
  in-flight activity is cancelled and awaited (its sandbox destroyed, its adapter session finished) and the result
  is ``aborted``.

Scoring, roles and abort reasons: docs/drift_repair.md; progress (query, search attributes, UI): docs/operations.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

from workflows import search_attributes as attrs
from workflows.activity_errors import Aborted, abort_reason
from workflows.rollout_guard import stop_reason_after

# Only temporalio and pure contract/scoring modules (the typed activity references, never an activity by a string
# name, and the error type names among them): tests/activities/test_activity_refs.py.
with workflow.unsafe.imports_passed_through():
    from activities import activity_refs as refs
    from activities.error_types import ErrorType
    from durable_rollouts.contracts.aborts import AbortReason
    from durable_rollouts.contracts.agent_runs import MergeResult
    from durable_rollouts.contracts.drift_repair import (
        BreakageRequest,
        BreakageRun,
        CollectRequest,
        DriftProposal,
        DriftRequest,
        DriftTask,
        EpisodeInput,
        EpisodeProgress,
        EpisodeResult,
        EpisodeStage,
        GradeRequest,
        HeldOutBreakdown,
        RepairGrade,
        RepairProposal,
        RepairRequest,
        RoleRewards,
        SampleRequest,
        VisibleBreakdown,
    )
    from durable_rollouts.contracts.sandboxes import DEFAULT_PULL_TIMEOUT_S
    from durable_rollouts.drift_repair.scoring import DRIFT_REWARDS, DriftOutcome, role_rewards

# Activities heartbeat every 2 s; the SDK sends at most one heartbeat per 0.8 x this timeout, and a cancel
# (guard, abort) reaches an activity only with a heartbeat's answer, so this also bounds how fast one stops.
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
SANDBOX_BOOT_BUDGET_S = 300  # plus the pull of a task image the host lacks (``DEFAULT_PULL_TIMEOUT_S``)
HARNESS_SLACK_S = 60
NON_RETRYABLE = [
    ErrorType.UNKNOWN_TASK,
    ErrorType.NO_DRIFT,
    ErrorType.NO_POLICY_SERVER,
    ErrorType.SANDBOX_IMAGE_MISSING,
    ErrorType.SANDBOX_ERROR,
]
RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3, non_retryable_error_types=NON_RETRYABLE)
# The error types reported by their reason in ``workflows.activity_errors.ABORT_REASONS``; others are
# ``exception:<type>``.
CLASSIFIED_ERRORS = (
    ErrorType.UNKNOWN_TASK,
    ErrorType.NO_DRIFT,
    ErrorType.NO_POLICY_SERVER,
    ErrorType.POLICY_SERVER_ERROR,
    ErrorType.SANDBOX_IMAGE_MISSING,
    ErrorType.SANDBOX_ERROR,
    ErrorType.SANDBOX_GONE,
)
A = TypeVar("A")
R = TypeVar("R")


@workflow.defn
class DriftRepairEpisode:
    def __init__(self) -> None:
        self._progress = EpisodeProgress()
        self._abort_requested: str | None = None
        self._task: DriftTask | None = None
        self._drift: DriftProposal | None = None
        self._breakage: BreakageRun | None = None
        self._repair: RepairProposal | None = None
        self._grade: RepairGrade | None = None
        self._merged: MergeResult | None = None

    @workflow.query
    def progress(self) -> EpisodeProgress:
        return self._progress

    @workflow.signal
    def abort(self, reason: str) -> None:
        """Stop this episode gracefully; the result is ``aborted`` with ``reason`` (default ``cancelled``)."""
        self._abort_requested = reason or AbortReason.CANCELLED

    @workflow.run
    async def run(self, episode: EpisodeInput) -> EpisodeResult:
        started = workflow.now()
        workflow.upsert_search_attributes(
            [
                attrs.INSTANCE.value_set(episode.task_id or f"{episode.difficulty or 'any'}#{episode.seed}"),
                attrs.POLICY.value_set(f"drift={episode.drift_policy},repair={episode.repair_policy}"),
            ]
        )
        if episode.drift_reward not in DRIFT_REWARDS:
            return self._result(episode, started, abort_reason=AbortReason.UNKNOWN_DRIFT_REWARD)
        body = asyncio.ensure_future(self._episode(episode))
        stop_reason = await stop_reason_after(
            body, timedelta(seconds=episode.guard_s), lambda: self._abort_requested, (Aborted,)
        )
        if stop_reason is not None:
            return self._result(episode, started, abort_reason=stop_reason)
        try:
            body.result()
        except Aborted as aborted:
            return self._result(episode, started, abort_reason=aborted.reason)
        return self._result(episode, started)

    async def _episode(self, episode: EpisodeInput) -> None:
        workflow_id = workflow.info().workflow_id
        role_budget = timedelta(seconds=episode.role_timeout_s)
        self._enter("sampling")
        self._task = task = await self._call(
            refs.sample_drift_task,
            SampleRequest(task_id=episode.task_id, difficulty=episode.difficulty, seed=episode.seed),
            timedelta(seconds=30),
            "sample a task",
        )
        workflow.upsert_search_attributes([attrs.INSTANCE.value_set(task.task_id)])
        self._enter("drift", task_id=task.task_id)
        self._drift = drift = await self._call(
            refs.propose_drift,
            DriftRequest(
                task=task, policy=episode.drift_policy, seed=episode.seed, workflow_id=workflow_id, model=episode.model
            ),
            role_budget,
            f"drift role ({episode.drift_policy})",
        )
        self._enter("breaking", primitive=drift.spec.primitive_type if drift.spec else "none")
        self._breakage = breakage = await self._call(
            refs.run_breakage,
            BreakageRequest(
                task=task,
                broken_script=drift.broken_script,
                workflow_id=workflow_id,
                run_timeout_s=episode.run_timeout_s,
                image=episode.image,
            ),
            self._sandbox_budget(1, episode.run_timeout_s),
            "run the broken script in a sandbox",
        )
        self._enter("repair")
        self._repair = repair = await self._call(
            refs.propose_repair,
            RepairRequest(
                task=task,
                broken_script=drift.broken_script,
                error_trace=breakage.error_trace,
                policy=episode.repair_policy,
                workflow_id=workflow_id,
                model=episode.model,
            ),
            role_budget,
            f"repair role ({episode.repair_policy})",
        )
        self._enter("grading")
        self._grade = await self._call(
            refs.grade_repair,
            GradeRequest(
                task=task,
                broken_script=drift.broken_script,
                diff=repair.diff,
                workflow_id=workflow_id,
                run_timeout_s=episode.run_timeout_s,
                image=episode.image,
            ),
            self._sandbox_budget(1 + len(task.held_out), episode.run_timeout_s),
            "grade the repair in a fresh sandbox",
        )
        trajectories = [
            turn.trajectory for turn in (drift.role, repair.role) if turn is not None and turn.trajectory is not None
        ]
        if trajectories:
            self._enter("merging")
            self._merged = await self._call(
                refs.collect_role_segments,
                CollectRequest(workflow_id=workflow_id, trajectories=trajectories),
                timedelta(minutes=2),
                "collect the role segments",
            )

    @staticmethod
    def _sandbox_budget(inputs: int, run_timeout_s: float) -> timedelta:
        return timedelta(
            seconds=SANDBOX_BOOT_BUDGET_S + DEFAULT_PULL_TIMEOUT_S + inputs * run_timeout_s + HARNESS_SLACK_S
        )

    async def _call(self, activity: Callable[[A], Awaitable[R]], argument: A, budget: timedelta, summary: str) -> R:
        try:
            return await workflow.execute_activity(
                activity,
                argument,
                start_to_close_timeout=budget,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=summary,
            )
        except ActivityError as error:
            raise Aborted(abort_reason(error, CLASSIFIED_ERRORS)) from None

    def _enter(self, stage: EpisodeStage, **fields) -> None:
        self._progress = self._progress.model_copy(update={"stage": stage, "stage_since": workflow.now(), **fields})
        workflow.upsert_search_attributes([attrs.STAGE.value_set(stage)])
        p = self._progress
        workflow.set_current_details(
            f"**stage** {p.stage} · **task** `{p.task_id or '-'}` · **primitive** {p.primitive or '-'}"
        )

    def _result(self, episode: EpisodeInput, started, abort_reason: str | None = None) -> EpisodeResult:
        task, drift, breakage, repair, grade = self._task, self._drift, self._breakage, self._repair, self._grade
        completed = abort_reason is None
        rewards = None
        reward, success, applied_cleanly = 0.0, False, False
        breakdown, held_out = VisibleBreakdown(), HeldOutBreakdown()
        if completed:
            assert drift is not None and breakage is not None and grade is not None, (
                "a completed episode ran every stage"
            )
            outcome = DriftOutcome(drift.spec_source, breakage.valid, grade.reward, grade.success)
            rewards = role_rewards(outcome, episode.drift_reward)
            reward, success, applied_cleanly = grade.reward, bool(grade.success), bool(grade.applied_cleanly)
            breakdown, held_out = grade.visible, grade.held_out
        self._enter("done")
        workflow.upsert_search_attributes(
            [
                attrs.REWARD.value_set(reward),
                attrs.SOLVED.value_set(success),
                attrs.ABORT_REASON.value_set(abort_reason or ""),
            ]
        )
        merged = self._merged if completed else None
        info: dict[str, Any] = {"seed": episode.seed}
        if drift is not None:
            info["changed_sites"] = drift.changed_sites
        if breakage is not None:
            info |= {"breakage_exit_code": breakage.outcome.exit_code, "breakage_timed_out": breakage.outcome.timed_out}
        if grade is not None:
            info |= {"apply_error": grade.apply_error, "log_tail": grade.log_tail}
        return EpisodeResult(
            workflow_id=workflow.info().workflow_id,
            task_id=task.task_id if task else (episode.task_id or ""),
            difficulty=task.difficulty if task else episode.difficulty,
            category=task.category if task else None,
            group_index=episode.group_index,
            sample_index=episode.sample_index,
            status="completed" if completed else "aborted",
            abort_reason=abort_reason,
            drift_policy=episode.drift_policy,
            repair_policy=episode.repair_policy,
            spec=drift.spec if drift else None,
            spec_source=drift.spec_source if drift else None,
            spec_error=drift.spec_error if drift else "",
            breakage_valid=bool(breakage and breakage.valid),
            error_trace=breakage.error_trace if breakage else "",
            diff=repair.diff if repair else "",
            reward=reward,
            breakdown=breakdown,
            held_out=held_out,
            success=success,
            applied_cleanly=applied_cleanly,
            role_rewards=rewards or RoleRewards(),
            drift_role=drift.role if drift else None,
            repair_role=repair.role if repair else None,
            trajectory=merged.trajectory if merged else None,
            segments=merged.segments if merged else [],
            info=info,
            elapsed_s=(workflow.now() - started).total_seconds(),
        )
