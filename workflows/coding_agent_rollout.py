"""CodingAgentRollout: one dataset row (one sample) from sandbox to training segments.

Per attempt (a fresh sandbox and adapter session each time): ``pick_host`` (shared queue) -> ``boot_sandbox`` ->
``run_claude_code`` -> ``capture_diff`` -> ``destroy_sandbox`` (always), pinned to the host queue ``pick_host``
returned, where the container and the session live; then ``evaluate`` (a clean sandbox on the same host, whose engine
holds the image; any worker if that host is gone) and ``merge_segments`` (the host holding the session). A lost host
is a heartbeat or schedule-to-start timeout; the next attempt starts on whichever worker picks it up.

Invariants:
* it always returns a ``RolloutResult``: ``completed`` with reward and a trajectory ref, or ``aborted`` with a
  machine-readable reason; it never fails because a rollout went wrong;
* the wall-clock guard is a workflow timer, not a hard execution timeout that would leak the container: when it
  fires (or on ``abort(reason)`` or a cancel) the in-flight activity is cancelled and waited for, then the sandbox
  is destroyed.

Big patches and the disk budget: docs/rollouts.md; staleness bounds: docs/slime.md; the resume window:
docs/fault_tolerance.md; progress: docs/operations.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeUpdate
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

from workflows import rollout_metrics
from workflows import search_attributes as attrs
from workflows.activity_errors import ABORT_REASONS, Aborted, abort_reason, error_type, host_lost, lost_reason
from workflows.rollout_guard import stop_reason_after

# Only temporalio, the pydantic contracts, the typed activity references (never an activity by a string name) and
# the error type names, so the workflow sandbox does not re-import aiohttp, transformers or docker
# (tests/activities/test_activity_refs.py).
with workflow.unsafe.imports_passed_through():
    from activities import activity_refs as refs
    from activities.error_types import ErrorType
    from durable_rollouts.contracts.aborts import AbortReason
    from durable_rollouts.contracts.agent_runs import AgentRun, AgentRunRequest, MergeRequest, MergeResult
    from durable_rollouts.contracts.grading import CapturedDiff, DiffReport, EvalRequest, EvalResult
    from durable_rollouts.contracts.payload_budget import ROLLOUT_RESULT_BUDGET_BYTES, json_size
    from durable_rollouts.contracts.rollouts import (
        AgentProgress,
        DiscardedRun,
        RolloutInput,
        RolloutProgress,
        RolloutResult,
        RolloutStage,
    )
    from durable_rollouts.contracts.sandboxes import ImagePull, PickRequest, SandboxHandle, SandboxRequest
    from durable_rollouts.contracts.session import StalenessReport
    from durable_rollouts.contracts.tasks import GraderKind

HEARTBEAT_TIMEOUT = timedelta(seconds=15)
BOOT_TIMEOUT = timedelta(minutes=5)  # beyond the image pull's own timeout
# Deprecated ``workflow.patched`` ids: the branches before them are gone, the markers stay so that runs started by
# the release that still patched (its history in tests/histories/previous_release.json) replay. Remove them once
# no run of that release can be open.
CAPTURE_DIFF_PATCH = "capture-diff-report"
WAIT_FOR_GRADING_CANCEL_PATCH = "wait-for-grading-cancel"
# Grades on the agent's host first (``_grade``); runs recorded before it graded on the shared queue.
GRADE_ON_AGENT_HOST_PATCH = "grade-on-agent-host"
BOOT_ERRORS = [
    ErrorType.SANDBOX_IMAGE_MISSING,
    ErrorType.REGISTRY_AUTH_FAILED,
    ErrorType.SANDBOX_BOOT_ERROR,
    ErrorType.NOT_EVALUABLE,
]
BOOT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_attempts=3, non_retryable_error_types=BOOT_ERRORS
)
# The error types reported by their reason in ``workflows.activity_errors.ABORT_REASONS``; others are
# ``exception:<type>``. A policy server that failed the agent's last call (``rollout_host.run_claude_code``) is named as
# such, not as an exception.
CLASSIFIED_ERRORS = (*BOOT_ERRORS, ErrorType.REGISTRY_UNAVAILABLE, ErrorType.NO_GRADER, ErrorType.POLICY_SERVER_ERROR)
KNOWN_ABORT_REASONS = frozenset(AbortReason)
SHORT_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# Quick at first (the refusals of hosts without the rollout's image, ``RolloutHost.pick_host``), then at most every
# 5 s while every host is full.
PICK_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=5))
# The grade's rules, which a re-grade (``workflows.regrade_rollout``) shares: no grader, or a task no sandbox boots for,
# is not retried.
GRADING_RETRY = RetryPolicy(maximum_attempts=3, non_retryable_error_types=[ErrorType.NO_GRADER, *BOOT_ERRORS])
GRADING_HEARTBEAT_TIMEOUT = timedelta(seconds=60)
GRADING_OVERHEAD = timedelta(seconds=300)  # boot and apply, beyond the grade's own timeout
# Unbounded attempts: an interruption (a worker restart, a server outage) re-attaches and costs nothing; the activity
# itself gives up non-retryably after its real failures (``durable_rollouts.claude_code.run_ledger``), and the agent's
# deadline, the host's resume window and the rollout's guard bound the rest. The interval stays short, so a worker
# back after its fifth restart is not kept waiting.
AGENT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=0,
    non_retryable_error_types=[ErrorType.NO_POLICY_SERVER, ErrorType.SESSION_LOST],
)


@workflow.defn
class CodingAgentRollout:
    def __init__(self) -> None:
        self._progress = RolloutProgress()
        self._attempts = 0
        self._agent: AgentRun | None = None
        self._evaluation: EvalResult | None = None
        self._diff: DiffReport | None = None
        self._host_start = timedelta(seconds=10)
        self._abort_requested: str | None = None
        self._staleness: StalenessReport | None = None
        self._discarded: list[DiscardedRun] = []

    @workflow.query
    def progress(self) -> RolloutProgress:
        return self._progress

    @workflow.signal
    def agent_progress(self, update: AgentProgress) -> None:
        if update.attempt != self._progress.attempt or update.turns < self._progress.turns:
            return
        self._progress = self._progress.model_copy(
            update={
                "session_id": update.session_id,
                "turns": update.turns,
                "tokens": update.tokens,
                "last_turn_at": update.last_turn_at,
                "last_tools": update.last_tools,
                "oldest_weight_version": update.oldest_weight_version,
                "newest_weight_version": update.newest_weight_version,
                "sampled_tokens": update.sampled_tokens,
            }
        )
        updates: list[SearchAttributeUpdate[Any]] = [attrs.TURNS.value_set(update.turns)]
        if update.oldest_weight_version is not None:
            updates.append(
                attrs.WEIGHT_VERSIONS.value_set(f"{update.oldest_weight_version}..{update.newest_weight_version}")
            )
        workflow.upsert_search_attributes(updates)
        self._show_details()

    @workflow.signal
    def image_pull(self, update: ImagePull) -> None:
        """The boot's pull of the task image on a host that lacks it (``RolloutHost.boot_sandbox`` sends it)."""
        if self._progress.stage == "booting" and update.attempt == self._progress.attempt:
            self._progress = self._progress.model_copy(update={"image_pull": update})
            self._show_details()

    @workflow.signal
    def abort(self, reason: str) -> None:
        """Stop this rollout gracefully; the result is ``aborted`` with ``reason`` (default ``cancelled``)."""
        self._abort_requested = reason or AbortReason.CANCELLED

    @workflow.run
    async def run(self, rollout: RolloutInput) -> RolloutResult:
        started = workflow.now()
        workflow.upsert_search_attributes(
            [
                attrs.INSTANCE.value_set(rollout.task.instance_id),
                attrs.POLICY.value_set(rollout.policy.policy_tag or "default"),
            ]
        )
        if not rollout.task.image or not rollout.task.workdir:
            return self._result(rollout, started, abort_reason=AbortReason.MISSING_IMAGE_OR_WORKDIR)
        body = asyncio.ensure_future(self._rollout(rollout))
        stop_reason = await stop_reason_after(
            body, timedelta(seconds=rollout.guard_s), lambda: self._abort_requested, (Aborted,)
        )
        if stop_reason is not None:
            return self._result(rollout, started, abort_reason=stop_reason, stopped_in=self._progress.stage)
        try:
            merged = body.result()
        except Aborted as aborted:
            return self._result(rollout, started, abort_reason=aborted.reason)
        return self._result(rollout, started, merged=merged)

    def _enter(self, stage: RolloutStage, **fields) -> None:
        """Move to ``stage``: query state, search attributes and UI details change together; the time spent in
        the stage left is reported (``workflows.rollout_metrics``)."""
        if self._progress.stage_since is not None:
            rollout_metrics.stage_left(self._progress.stage, workflow.now() - self._progress.stage_since)
        self._progress = self._progress.model_copy(update={"stage": stage, "stage_since": workflow.now(), **fields})
        workflow.upsert_search_attributes(
            [
                attrs.STAGE.value_set(stage),
                attrs.ATTEMPT.value_set(self._progress.attempt),
                attrs.HOST.value_set(self._progress.host_queue),
                attrs.TURNS.value_set(self._progress.turns),
            ]
        )
        self._show_details()

    def _show_details(self) -> None:
        p = self._progress
        last = p.last_turn_at.isoformat(timespec="seconds") if p.last_turn_at else "none yet"
        workflow.set_current_details(
            f"**stage** {p.stage} · **attempt** {p.attempt} · **host** `{p.host_queue or '-'}` · **sandbox** "
            f"`{p.sandbox or '-'}`\n\n"
            f"**turns** {p.turns} · **tokens** {p.tokens} · **last model turn** {last} · **last tools** "
            f"{', '.join(p.last_tools) or '-'}"
            + (
                f" · **weights** {p.oldest_weight_version}..{p.newest_weight_version}"
                if p.oldest_weight_version is not None
                else ""
            )
            + (f"\n\n**pulling** `{p.image_pull.image}`: {p.image_pull.summary()}" if p.image_pull is not None else "")
        )

    async def _rollout(self, rollout: RolloutInput) -> MergeResult:
        for attempt in range(1, rollout.max_agent_attempts + 1):
            self._attempts = attempt
            outcome = await self._agent_attempt(rollout, attempt)
            if outcome is not None:
                break
        else:
            raise Aborted(AbortReason.NO_HEALTHY_HOST)
        agent, captured, host_queue = outcome
        self._diff = (
            captured.report
            if captured.report.over_cap
            else captured.report.model_copy(update={"kept_patch": captured.diff})
        )
        try:
            self._enter("grading")
            if captured.report.over_cap and rollout.task.grader is not None:
                self._evaluation = _not_graded(rollout.task.grader, captured.report)
            else:
                workflow.deprecate_patch(WAIT_FOR_GRADING_CANCEL_PATCH)
                self._evaluation = await self._grade(rollout, captured, host_queue)
                evaluation = self._evaluation
                probe = evaluation.probe.verdict if evaluation.probe else ""
                rollout_metrics.graded(evaluation.grader, evaluation.solved, bool(evaluation.tampered), probe)
        except ActivityError as error:
            await self._clean_up_on_host(refs.discard_session, agent.session_id, host_queue, "discard adapter session")
            raise Aborted(abort_reason(error, CLASSIFIED_ERRORS)) from None
        self._enter("merging")
        try:
            merged = await workflow.execute_activity(
                refs.merge_segments,
                MergeRequest(session_id=agent.session_id, workflow_id=workflow.info().workflow_id),
                task_queue=host_queue,
                schedule_to_start_timeout=self._host_start,
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=SHORT_RETRY,
                summary="collect token segments",
            )
        except ActivityError as error:
            raise Aborted(
                AbortReason.ADAPTER_SESSION_LOST if host_lost(error) else abort_reason(error, CLASSIFIED_ERRORS)
            ) from None
        if merged.trajectory is None:
            raise Aborted(AbortReason.ADAPTER_SESSION_EMPTY)
        self._staleness = merged.staleness
        if merged.staleness is not None and merged.staleness.dropped:
            raise Aborted(AbortReason.STALE_POLICY)
        return merged

    async def _grade(self, rollout: RolloutInput, captured: CapturedDiff, host_queue: str) -> EvalResult:
        """Grade in a fresh sandbox on the host that ran the agent, whose engine holds the task image (a grade
        elsewhere could first pull it); a host gone before or during the grade leaves it to any worker."""
        request = EvalRequest(
            task=rollout.task,
            diff=captured.diff,
            workflow_id=workflow.info().workflow_id,
            timeout_s=rollout.eval_timeout_s,
            pull_timeout_s=rollout.pull_timeout_s,
        )
        options: dict[str, Any] = {
            "start_to_close_timeout": timedelta(seconds=rollout.eval_timeout_s + rollout.pull_timeout_s)
            + GRADING_OVERHEAD,
            "heartbeat_timeout": GRADING_HEARTBEAT_TIMEOUT,
            "retry_policy": GRADING_RETRY,
            # A stopped rollout waits for its cancelled grade to end, so the grading sandbox is gone when the result is.
            "cancellation_type": ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            "summary": "grade the diff in a fresh sandbox",
        }
        if workflow.patched(GRADE_ON_AGENT_HOST_PATCH):
            try:
                return await workflow.execute_activity(
                    refs.evaluate, request, task_queue=host_queue, schedule_to_start_timeout=self._host_start, **options
                )
            except ActivityError as error:
                if not host_lost(error):
                    raise
        return await workflow.execute_activity(refs.evaluate, request, **options)

    async def _agent_attempt(self, rollout: RolloutInput, attempt: int) -> tuple[AgentRun, CapturedDiff, str] | None:
        """One attempt in a fresh sandbox; ``None`` means the host was lost and the next attempt should run."""
        self._enter(
            "booting",
            attempt=attempt,
            sandbox="",
            host_queue="",
            session_id="",
            turns=0,
            tokens=0,
            sampled_tokens=0,
            last_turn_at=None,
            last_tools=[],
            image_pull=None,
        )
        host_queue = await workflow.execute_activity(
            refs.pick_host,
            PickRequest(image=rollout.task.image),
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=PICK_RETRY,
            summary="pick a worker with a free agent slot",
        )
        self._host_start = timedelta(seconds=rollout.host_start_timeout_s)
        pinned = {"task_queue": host_queue, "schedule_to_start_timeout": self._host_start}
        workflow_id = workflow.info().workflow_id
        handle: SandboxHandle | None = None
        session_to_discard: str | None = None
        try:
            handle = await self._boot(rollout, workflow_id, attempt, pinned)
            self._enter("agent", sandbox=handle.name, host_queue=host_queue, image_pull=None)
            agent = await workflow.execute_activity(
                refs.run_claude_code,
                AgentRunRequest(
                    handle=handle,
                    task=rollout.task,
                    policy=rollout.policy,
                    workflow_id=workflow_id,
                    attempt=attempt,
                    time_budget_s=rollout.agent_budget_s,
                ),
                task_queue=host_queue,
                schedule_to_start_timeout=timedelta(seconds=rollout.resume_window_s),
                start_to_close_timeout=timedelta(seconds=rollout.agent_budget_s + 120),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=AGENT_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"claude code, attempt {attempt}",
            )
            self._agent = agent
            session_to_discard = agent.session_id
            self._enter("diff", turns=max(self._progress.turns, agent.turns))
            captured = await self._capture_diff(handle, pinned)
            session_to_discard = None
            return agent, captured, host_queue
        except ActivityError as error:
            if host_lost(error):
                self._discard(attempt, lost_reason(error))
                return None
            raise Aborted(abort_reason(error, CLASSIFIED_ERRORS)) from None
        finally:
            if session_to_discard is not None:
                await self._clean_up_on_host(
                    refs.discard_session, session_to_discard, host_queue, "discard adapter session"
                )
            if handle is not None:
                await self._clean_up_on_host(refs.destroy_sandbox, handle, host_queue, "destroy sandbox")

    def _discard(self, attempt: int, reason: str) -> None:
        """The agent run of ``attempt`` is abandoned for a fresh one: what it had done is reported, never silent."""
        if self._progress.stage not in ("agent", "diff"):
            return  # lost while booting: no agent work to throw away
        discarded = DiscardedRun(
            attempt=attempt, turns=self._progress.turns, sampled_tokens=self._progress.sampled_tokens, reason=reason
        )
        self._discarded.append(discarded)
        rollout_metrics.discarded(discarded.turns, discarded.sampled_tokens)
        workflow.logger.info(
            "agent run %d abandoned after %d turns (%d sampled tokens): %s",
            attempt,
            discarded.turns,
            discarded.sampled_tokens,
            reason,
        )

    async def _capture_diff(self, handle: SandboxHandle, pinned: dict) -> CapturedDiff:
        """The agent's patch and its report (what was left out of a patch over the cap, and why)."""
        workflow.deprecate_patch(CAPTURE_DIFF_PATCH)
        return await workflow.execute_activity(
            refs.capture_diff,
            handle,
            start_to_close_timeout=timedelta(minutes=6),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=SHORT_RETRY,
            summary="git diff",
            **pinned,
        )

    async def _boot(self, rollout: RolloutInput, workflow_id: str, attempt: int, pinned: dict) -> SandboxHandle:
        """Boot with retries for transient Docker and registry errors, pulling the task image on a host that
        lacks it (its own timeout, ``pull_timeout_s``); a boot that still fails aborts with its failure's reason
        (``image_not_found``, ``registry_auth_failed``, ``registry_unavailable``, ``not_evaluable``), else
        ``sandbox_boot_failed``."""
        try:
            return await workflow.execute_activity(
                refs.boot_sandbox,
                SandboxRequest(
                    task=rollout.task, workflow_id=workflow_id, attempt=attempt, pull_timeout_s=rollout.pull_timeout_s
                ),
                start_to_close_timeout=BOOT_TIMEOUT + timedelta(seconds=rollout.pull_timeout_s),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=BOOT_RETRY,
                summary=f"boot {rollout.task.image}",
                **pinned,
            )
        except ActivityError as error:
            if host_lost(error):
                raise
            kind = error_type(error)
            raise Aborted(
                ABORT_REASONS[kind] if kind in CLASSIFIED_ERRORS else AbortReason.SANDBOX_BOOT_FAILED
            ) from None

    async def _clean_up_on_host(
        self, activity: Callable[[Any], Awaitable[None]], argument: Any, host_queue: str, summary: str
    ) -> None:
        """Best effort: a dead host can neither destroy its container nor drop its session; the reaper
        removes the container by label and a restarted worker releases sessions nobody resumes."""
        try:
            await workflow.execute_activity(
                activity,
                argument,
                task_queue=host_queue,
                schedule_to_start_timeout=self._host_start,
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=SHORT_RETRY,
                summary=summary,
            )
        except ActivityError:
            pass

    def _result(
        self,
        rollout: RolloutInput,
        started,
        merged: MergeResult | None = None,
        abort_reason: str | None = None,
        stopped_in: RolloutStage | None = None,
    ) -> RolloutResult:
        evaluation = self._evaluation
        turns = self._progress.turns
        reward = evaluation.reward if evaluation and not abort_reason else 0.0
        solved = bool(evaluation and evaluation.solved and not abort_reason)
        self._enter("done")
        rollout_metrics.finished(
            "aborted" if abort_reason else "completed",
            abort_reason,
            KNOWN_ABORT_REASONS,
            turns,
            sum(segment.n_sampled for segment in merged.segments) if merged else 0,
        )
        workflow.upsert_search_attributes(
            [
                attrs.REWARD.value_set(reward),
                attrs.SOLVED.value_set(solved),
                attrs.ABORT_REASON.value_set(abort_reason or ""),
            ]
        )
        result = RolloutResult(
            workflow_id=workflow.info().workflow_id,
            instance_id=rollout.task.instance_id,
            sample_index=rollout.sample_index,
            group_index=rollout.group_index,
            status="aborted" if abort_reason else "completed",
            abort_reason=abort_reason,
            reward=reward,
            solved=solved,
            applied_cleanly=bool(evaluation and evaluation.applied_cleanly),
            attempts=self._attempts,
            agent=self._agent,
            evaluation=evaluation,
            trajectory=merged.trajectory if merged else None,
            segments=merged.segments if merged else [],
            elapsed_s=(workflow.now() - started).total_seconds(),
            diff=self._diff,
            staleness=self._staleness,
            stopped_in=stopped_in,
            turns=turns,
            finish=merged.finish if merged else None,
            discarded=self._discarded,
        )
        return result if json_size(result) <= ROLLOUT_RESULT_BUDGET_BYTES else result.without_logs()


def _not_graded(grader: GraderKind, report: DiffReport) -> EvalResult:
    """The evaluation of a patch too big to grade: reward 0, marked."""
    return EvalResult(
        reward=0.0, solved=False, applied_cleanly=False, grader=grader, log_tail=f"[not graded: {report.note}]"
    )
