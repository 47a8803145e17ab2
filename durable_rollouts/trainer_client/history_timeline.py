"""A workflow's history read as a ``trajectory_view.activity_timeline.Timeline`` (that module's invariants): only the
history's data is read, and for a running workflow its pending activities (``with_pending``); the summaries are the
JSON strings the workflow set."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import PendingActivityInfo

from durable_rollouts.trajectory_view.activity_timeline import ActivitySpan, Timeline

_ENDINGS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: ("completed", "activity_task_completed_event_attributes"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: ("failed", "activity_task_failed_event_attributes"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: ("timed_out", "activity_task_timed_out_event_attributes"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: ("canceled", "activity_task_canceled_event_attributes"),
}
_CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
}


def timeline(events: Iterable[HistoryEvent]) -> Timeline:
    """The time line of one workflow's history events (module invariants)."""
    result = Timeline()
    by_scheduled: dict[int, ActivitySpan] = {}
    picks = 0
    for event in events:
        at = event.event_time.ToDatetime()
        if result.started is None:
            result.started = at
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            if name == "pick_host":
                picks += 1
            activity_id = event.activity_task_scheduled_event_attributes.activity_id
            by_scheduled[event.event_id] = ActivitySpan(
                name, _summary(event), at, rollout_attempt=max(picks, 1), activity_id=activity_id
            )
            result.spans.append(by_scheduled[event.event_id])
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if (running := by_scheduled.get(started.scheduled_event_id)) is not None:
                running.started, running.attempt = at, started.attempt
        elif kind in _ENDINGS:
            outcome, attributes = _ENDINGS[kind]
            ending = getattr(event, attributes)
            if (ended := by_scheduled.get(ending.scheduled_event_id)) is not None:
                ended.ended, ended.outcome = at, outcome
                if outcome in ("failed", "timed_out"):
                    ended.failure = _one_line(ending.failure)
                elif outcome == "canceled":
                    ended.failure = "canceled"
        elif kind in _CLOSED:
            result.ended = at
    return result


def with_pending(line: Timeline, pending: Iterable[PendingActivityInfo], observed: datetime) -> Timeline:
    """``line`` read at ``observed`` (naive UTC, as the history's times), with its open spans' start, attempt and
    last failure as the server's pending activities give them (a running activity's start is written to the
    history only when it ends)."""
    line.observed = observed
    by_id = {span.activity_id: span for span in line.spans if span.ended is None}
    for activity in pending:
        span = by_id.get(activity.activity_id)
        if span is None:
            continue
        if activity.state in (
            PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
            PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED,
        ):
            span.started = activity.last_started_time.ToDatetime()
        span.attempt = activity.attempt
        if activity.HasField("last_failure"):
            span.failure = f"attempt {activity.attempt - 1} failed: {_one_line(activity.last_failure)}"
    return line


def closing_failure(events: Sequence[HistoryEvent]) -> str:
    """The failure a failed workflow's history ends with, one line; "" for any other ending."""
    last = events[-1] if events else None
    if last is None or not last.HasField("workflow_execution_failed_event_attributes"):
        return ""
    return _one_line(last.workflow_execution_failed_event_attributes.failure)


def _summary(event: HistoryEvent) -> str:
    payload = event.user_metadata.summary
    if not payload.data:
        return ""
    try:
        value = json.loads(payload.data)
    except ValueError:
        return payload.data.decode(errors="replace")
    return value if isinstance(value, str) else json.dumps(value)


def _one_line(failure: Failure) -> str:
    messages = []
    current: Failure | None = failure
    while current is not None and current.message:
        messages.append(" ".join(current.message.split()))
        current = current.cause if current.HasField("cause") else None
    return ": ".join(messages)
