"""The worker's activity failure log: expected failures and interruptions are one line, anything else keeps its
traceback."""

from __future__ import annotations

import asyncio
import logging

from temporalio.exceptions import ApplicationError

from activities.activity_failure_log import ExpectedFailureFilter
from activities.error_types import ErrorType


def _record(error: BaseException) -> logging.LogRecord:
    record = logging.LogRecord(
        "temporalio.activity",
        logging.WARNING,
        __file__,
        1,
        "Completing activity as failed",
        (),
        (type(error), error, None),
    )
    record.temporal_activity = {"activity_type": "run_claude_code", "workflow_id": "rollout-x", "attempt": 4}
    return record


def test_an_interruption_and_an_expected_failure_are_one_line_and_a_surprise_keeps_its_traceback():
    interrupted = _record(asyncio.CancelledError())
    assert ExpectedFailureFilter().filter(interrupted) and interrupted.exc_info is None
    assert interrupted.getMessage() == (
        "run_claude_code interrupted (workflow rollout-x, attempt 4): cancelled by a timeout or a lost server, not by "
        "its workflow"
    )
    lost = _record(ApplicationError("attempt 4: the agent session did not survive\nmore", type=ErrorType.SESSION_LOST))
    assert (
        ExpectedFailureFilter().filter(lost) and lost.exc_info is None and lost.getMessage().endswith("did not survive")
    )
    surprise = _record(RuntimeError("docker went away"))
    assert ExpectedFailureFilter().filter(surprise) and surprise.exc_info is not None
