"""One log line, not a traceback, for activity failures the rollout expects and classifies.

The Temporal worker logs every failed activity attempt with its traceback
(logger ``temporalio.activity``). A failure raised as an ``ApplicationError``
whose type is in ``EXPECTED_FAILURES`` (a missing image, a host that is full,
a row that cannot be graded, ...) is a known outcome with a clear message, so
its record is rewritten to one line: activity, error type, workflow, attempt
and the message's first line. So is a cancellation the workflow did not ask
for (a heartbeat timed out, the server went away): an interruption, which the
activity's retry resumes. Every other failure keeps its traceback.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.exceptions import ApplicationError, CancelledError

from activities.error_types import ErrorType

EXPECTED_FAILURES = frozenset(
    {
        ErrorType.SANDBOX_IMAGE_MISSING,
        ErrorType.SANDBOX_BOOT_ERROR,
        ErrorType.NOT_EVALUABLE,
        ErrorType.NO_GRADER,
        ErrorType.NO_POLICY_SERVER,
        ErrorType.HOST_FULL,
        ErrorType.SESSION_LOST,
        ErrorType.WORKER_SHUTDOWN,
    }
)
MESSAGE_LIMIT = 300


class ExpectedFailureFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, (asyncio.CancelledError, CancelledError)):
            # Not asked for by its workflow (those complete as cancelled, at debug level): the server timed the attempt
            # out or could not be reached, an interruption its retry resumes.
            details = getattr(record, "temporal_activity", None) or {}
            record.msg = (
                "%s interrupted (workflow %s, attempt %s): cancelled by a timeout or a lost server, not by its workflow"
            )
            record.args = (details.get("activity_type", "activity"), details.get("workflow_id"), details.get("attempt"))
            record.exc_info = None
            record.exc_text = None
        elif isinstance(error, ApplicationError) and error.type in EXPECTED_FAILURES:
            details = getattr(record, "temporal_activity", None) or {}
            first_line = next(iter(error.message.splitlines()), "")[:MESSAGE_LIMIT]
            record.msg = "%s failed with %s (workflow %s, attempt %s): %s"
            record.args = (
                details.get("activity_type", "activity"),
                error.type,
                details.get("workflow_id"),
                details.get("attempt"),
                first_line,
            )
            record.exc_info = None
            record.exc_text = None
        return True


_FILTER = ExpectedFailureFilter()


def install() -> None:
    """Rewrite expected failures on the Temporal activity logger (idempotent)."""
    logging.getLogger("temporalio.activity").addFilter(_FILTER)
