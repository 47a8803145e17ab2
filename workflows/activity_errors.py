"""How both workflows read an activity failure: an abort reason, or a lost host to fail over from.

Deterministic workflow code (temporalio and the stdlib-only error vocabulary).
``ABORT_REASONS`` is the one table from ``ApplicationError`` type to abort
reason; each workflow names the types it classifies with it, and any other
failure is reported as ``exception:<Type>`` (``exception:Timeout:<KIND>``
for a timeout).
"""

from __future__ import annotations

from collections.abc import Collection

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from activities.error_types import ErrorType
    from durable_rollouts.contracts.aborts import AbortReason, exception_reason

ABORT_REASONS: dict[str, AbortReason] = {
    ErrorType.SANDBOX_IMAGE_MISSING: AbortReason.IMAGE_NOT_FOUND,
    ErrorType.REGISTRY_AUTH_FAILED: AbortReason.REGISTRY_AUTH_FAILED,
    ErrorType.REGISTRY_UNAVAILABLE: AbortReason.REGISTRY_UNAVAILABLE,
    ErrorType.SANDBOX_BOOT_ERROR: AbortReason.SANDBOX_BOOT_FAILED,
    ErrorType.NO_GRADER: AbortReason.NO_GRADER,
    ErrorType.NOT_EVALUABLE: AbortReason.NOT_EVALUABLE,
    ErrorType.UNKNOWN_TASK: AbortReason.UNKNOWN_TASK,
    ErrorType.NO_DRIFT: AbortReason.NO_DRIFT,
    ErrorType.NO_POLICY_SERVER: AbortReason.NO_POLICY_SERVER,
    ErrorType.POLICY_SERVER_ERROR: AbortReason.POLICY_ERROR,
    ErrorType.SANDBOX_ERROR: AbortReason.SANDBOX_FAILED,
    ErrorType.SANDBOX_GONE: AbortReason.SANDBOX_FAILED,
}
# Failures that mean the host (its worker or the session it held) is gone, not that the rollout went wrong.
HOST_LOST_ERRORS = (ErrorType.WORKER_SHUTDOWN, ErrorType.SESSION_LOST)


class Aborted(Exception):
    """Raised inside a workflow body to end it as ``aborted`` with ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def error_type(error: ActivityError) -> str | None:
    return error.cause.type if isinstance(error.cause, ApplicationError) else None


def abort_reason(error: ActivityError, classified: Collection[str]) -> str:
    """The abort reason of a failed activity: the table's for a type in ``classified``, else ``exception:<Type>``."""
    cause = error.cause
    if isinstance(cause, ApplicationError):
        if cause.type is not None and cause.type in classified:
            return ABORT_REASONS[cause.type]
        return exception_reason(cause.type or "ApplicationError")
    if isinstance(cause, TimeoutError):
        return exception_reason(f"Timeout:{cause.type.name if cause.type else 'UNKNOWN'}")
    return exception_reason(type(cause).__name__ if cause else "ActivityError")


def host_lost(error: ActivityError) -> bool:
    """A dead host (heartbeat / schedule-to-start timeout) or one that shut down under the activity."""
    cause = error.cause
    while isinstance(cause, FailureError):  # the chain Temporal decodes from a failure is all FailureErrors
        if isinstance(cause, TimeoutError) and cause.type in (TimeoutType.HEARTBEAT, TimeoutType.SCHEDULE_TO_START):
            return True
        if isinstance(cause, ApplicationError) and cause.type in HOST_LOST_ERRORS:
            return True
        cause = cause.cause
    return False


def lost_reason(error: ActivityError) -> str:
    """Why a lost host's agent run cannot go on, in words (``host_lost`` holds for ``error``)."""
    cause = error.cause
    while isinstance(cause, FailureError):
        if isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START:
            return "the host did not come back within the resume window"
        if isinstance(cause, TimeoutError) and cause.type == TimeoutType.HEARTBEAT:
            return "the host stopped heartbeating"
        if isinstance(cause, ApplicationError) and cause.type == ErrorType.SESSION_LOST:
            return f"the agent session could not be resumed: {cause.message}"
        if isinstance(cause, ApplicationError) and cause.type == ErrorType.WORKER_SHUTDOWN:
            return "the worker shut down"
        cause = cause.cause
    return "the host was lost"
