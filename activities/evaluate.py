"""The grading activities: ``evaluate`` grades a patch in a fresh sandbox (``grading.graders``), heartbeating
its phase; ``read_patch`` reads a kept patch back from the trajectory store for a re-grade.

The whole grading log goes to the trajectory store under a key naming the workflow run, the activity and
its attempt (``grading_log_key``), so neither a retry nor a later grading overwrites another's log; the
result carries its path and size. A store that cannot take the log costs the log, never the grade
(``log_path`` stays "").

Library errors become the activity's error types here and nowhere else: a failure while the grading
sandbox boots is reported as a boot error, any later one as a grading error.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio import activity

from activities.activity_failures import Failure, Translation
from activities.error_types import ErrorType
from activities.sandbox import heartbeating
from contracts.rollout import EvalRequest, EvalResult, PatchRef
from docker_sandbox.errors import SandboxError, SandboxGone, SandboxImageMissing
from docker_sandbox.sandboxes import DockerSandboxes
from grading import swebench
from grading.graders import GraderScriptMissing, NoGrader, evaluate
from policy.trajectory_store import TrajectoryStore


def _failures(failed: ErrorType) -> Translation:
    """How ``GradingActivities.evaluate`` reports a failure; a sandbox error not otherwise named is ``failed``."""
    return Translation(
        Failure(NoGrader, ErrorType.NO_GRADER),
        Failure(GraderScriptMissing, ErrorType.GRADER_SCRIPT_MISSING),
        Failure(swebench.NotEvaluable, ErrorType.NOT_EVALUABLE),
        Failure(SandboxImageMissing, ErrorType.SANDBOX_IMAGE_MISSING),
        Failure(SandboxGone, ErrorType.SANDBOX_GONE, retryable=True),
        Failure(SandboxError, failed),
    )


BOOT_FAILURES = _failures(ErrorType.SANDBOX_BOOT_ERROR)
GRADING_FAILURES = _failures(ErrorType.GRADING_FAILED)
log = logging.getLogger(__name__)
PATCH_FAILURES = Translation(Failure(OSError, ErrorType.PATCH_UNREADABLE), Failure(ValueError, ErrorType.PATCH_UNREADABLE))


def grading_log_key(info: activity.Info) -> str:
    """The store key of one grading's log: workflow id, run, activity id and attempt."""
    return f"{info.workflow_id}.{info.workflow_run_id[:8]}.{info.activity_id}.{info.attempt}"


class GradingActivities:
    """The ``evaluate`` activity, grading with the worker's sandboxes and keeping each grading's whole log in
    ``store``; registered on the shared queue."""

    def __init__(self, sandboxes: DockerSandboxes, store: TrajectoryStore):
        self.sandboxes = sandboxes
        self.store = store

    @activity.defn(name="evaluate")
    async def evaluate(self, request: EvalRequest) -> EvalResult:
        """``graders.evaluate`` with the worker's sandbox settings, heartbeating ``{"phase": ...}`` every few seconds.

        Non-retryable: ``NoGrader``, ``NotEvaluable``, ``GraderScriptMissing``, ``SandboxImageMissing``,
        ``SandboxBootError`` (e.g. a failing pre-command), ``GradingFailed``. Retryable:
        ``SandboxGone`` (the grading container died) and Docker hiccups (propagated).
        """
        phase = {"phase": "start"}
        try:
            async with heartbeating(lambda: dict(phase)):
                graded = await evaluate(self.sandboxes, request, report=lambda name: phase.update(phase=name))
        except GRADING_FAILURES.handled as error:
            raise (BOOT_FAILURES if phase["phase"] == "boot" else GRADING_FAILURES)(error) from error
        try:
            path = await asyncio.to_thread(self.store.put_grading_log, grading_log_key(activity.info()), graded.log)
        except OSError as error:
            log.warning("grading log of %s not kept (the grade stands): %s", request.workflow_id, error)
            return graded.result
        return graded.result.model_copy(update={"log_path": str(path), "log_bytes": path.stat().st_size})

    @activity.defn(name="read_patch")
    async def read_patch(self, ref: PatchRef) -> str:
        """A kept patch (``DiffReport.patch``) for a re-grade, verified by its hash; non-retryable
        ``PatchUnreadable`` when it is missing, lies outside ``store`` or was altered."""
        try:
            return await asyncio.to_thread(self.store.load_patch, ref)
        except PATCH_FAILURES.handled as error:
            raise PATCH_FAILURES(error) from error
