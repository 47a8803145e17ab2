"""The grading activity: ``evaluate`` grades a patch in a fresh sandbox (``durable_rollouts.grading.graders``),
heartbeating its phase; its result carries the whole grading log (``EvalResult.log``) and its size.

Library errors become the activity's error types here and nowhere else: a failure while the grading
sandbox boots is reported as a boot error, any later one as a grading error.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from activities.activity_failures import Failure, Translation
from activities.error_types import ErrorType
from activities.sandbox import heartbeating
from durable_rollouts.contracts.grading import EvalRequest, EvalResult
from durable_rollouts.docker_sandbox.errors import (
    RegistryAuthFailed,
    RegistryUnavailable,
    SandboxError,
    SandboxGone,
    SandboxImageMissing,
)
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import swebench
from durable_rollouts.grading.graders import GraderScriptMissing, NoGrader, evaluate


def _failures(failed: ErrorType) -> Translation:
    """How ``GradingActivities.evaluate`` reports a failure; a sandbox error not otherwise named is ``failed``."""
    return Translation(
        Failure(NoGrader, ErrorType.NO_GRADER),
        Failure(GraderScriptMissing, ErrorType.GRADER_SCRIPT_MISSING),
        Failure(swebench.NotEvaluable, ErrorType.NOT_EVALUABLE),
        Failure(SandboxImageMissing, ErrorType.SANDBOX_IMAGE_MISSING),
        Failure(RegistryAuthFailed, ErrorType.REGISTRY_AUTH_FAILED),
        Failure(RegistryUnavailable, ErrorType.REGISTRY_UNAVAILABLE, retryable=True),
        Failure(SandboxGone, ErrorType.SANDBOX_GONE, retryable=True),
        Failure(SandboxError, failed),
    )


BOOT_FAILURES = _failures(ErrorType.SANDBOX_BOOT_ERROR)
GRADING_FAILURES = _failures(ErrorType.GRADING_FAILED)


class GradingActivities:
    """The ``evaluate`` activity, grading with the worker's sandboxes; registered on the shared queue."""

    def __init__(self, sandboxes: DockerSandboxes):
        self.sandboxes = sandboxes

    @activity.defn(name="evaluate")
    async def evaluate(self, request: EvalRequest) -> EvalResult:
        """``graders.evaluate`` with the worker's sandbox settings, heartbeating ``{"phase": ...}`` every few seconds.

        Non-retryable: ``NoGrader``, ``NotEvaluable``, ``GraderScriptMissing``, ``SandboxImageMissing``,
        ``RegistryAuthFailed``, ``SandboxBootError`` (e.g. a failing pre-command), ``GradingFailed``. Retryable:
        ``SandboxGone`` (the grading container died), ``RegistryUnavailable`` and Docker hiccups (propagated).
        A pull of the task image during the boot adds ``pull`` (its progress) to the heartbeat.
        """
        phase: dict[str, Any] = {"phase": "start"}
        try:
            async with heartbeating(lambda: dict(phase)):
                graded = await evaluate(
                    self.sandboxes,
                    request,
                    report=lambda name: phase.update(phase=name),
                    on_pull=lambda progress: phase.update(pull=progress.model_dump(mode="json")),
                )
        except GRADING_FAILURES.handled as error:
            raise (BOOT_FAILURES if phase["phase"] == "boot" else GRADING_FAILURES)(error) from error
        log_bytes = await asyncio.to_thread(lambda: len(graded.log.encode("utf-8", errors="replace")))
        return graded.result.model_copy(update={"log": graded.log, "log_bytes": log_bytes})
