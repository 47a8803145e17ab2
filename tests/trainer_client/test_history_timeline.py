"""Time lines read off recorded rollout histories (tests/histories)."""

import json
from datetime import timedelta

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.failure.v1 import Failure
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import WorkflowHistory

from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.trainer_client.history_timeline import timeline, with_pending


def recorded(name: str):
    path = PROJECT_ROOT / "tests" / "histories" / f"{name}.json"
    return timeline(WorkflowHistory.from_json(name, json.loads(path.read_text())).events)


def test_a_lost_host_gives_two_attempts_the_first_ended_by_its_heartbeat():
    line = recorded("lost_host")
    assert line.started is not None and line.ended is not None and line.started < line.ended
    agents = [s for s in line.spans if s.stage == "agent"]
    assert [(s.rollout_attempt, s.outcome) for s in agents] == [(1, "timed_out"), (2, "completed")]
    assert agents[0].failure == "activity ScheduleToStart timeout: activity Heartbeat timeout", (
        "the failure and its cause, one line"
    )
    assert agents[0].started is None, "the lost attempt never started on a live worker"
    assert [s.stage for s in line.spans if s.rollout_attempt == 2] == [
        "other",
        "boot",
        "agent",
        "diff",
        "other",
        "grading",
        "merge",
    ]
    assert all(s.summary for s in line.spans) and line.spans[1].summary.startswith("boot rollout-task-")
    assert all(s.scheduled <= s.started <= s.ended for s in line.spans if s.started and s.ended)


def test_a_guarded_rollout_shows_its_agent_cancelled():
    line = recorded("guard")
    (agent,) = [s for s in line.spans if s.stage == "agent"]
    assert (agent.outcome, agent.failure, agent.attempt) == ("canceled", "canceled", 1)


def test_a_running_activity_takes_its_start_attempt_and_last_failure_from_the_pending_activities():
    events = WorkflowHistory.from_json(
        "lost_host", json.loads((PROJECT_ROOT / "tests" / "histories" / "lost_host.json").read_text())
    ).events
    second_agent = [
        e for e in events if e.activity_task_scheduled_event_attributes.activity_type.name == "run_claude_code"
    ][1]
    cut = timeline(e for e in events if e.event_id <= second_agent.event_id)
    running = cut.spans[-1]
    assert (running.activity, running.outcome, running.started) == ("run_claude_code", "running", None), (
        "not started in the history yet"
    )
    pending = PendingActivityInfo(
        activity_id=second_agent.activity_task_scheduled_event_attributes.activity_id,
        state=PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        attempt=2,
        last_failure=Failure(message="activity Heartbeat timeout"),
    )
    pending.last_started_time.FromDatetime(second_agent.event_time.ToDatetime() + timedelta(seconds=3))
    with_pending(
        cut,
        [pending, PendingActivityInfo(activity_id="someone-else")],
        second_agent.event_time.ToDatetime() + timedelta(seconds=9),
    )
    assert running.started == second_agent.event_time.ToDatetime() + timedelta(seconds=3) and running.attempt == 2
    assert running.failure == "attempt 1 failed: activity Heartbeat timeout" and running.outcome == "running"
