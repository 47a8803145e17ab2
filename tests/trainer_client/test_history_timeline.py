"""Time lines read off recorded rollout histories (tests/histories)."""

import json

from temporalio.client import WorkflowHistory

from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.trainer_client.history_timeline import timeline


def recorded(name: str):
    path = PROJECT_ROOT / "tests" / "histories" / f"{name}.json"
    return timeline(WorkflowHistory.from_json(name, json.loads(path.read_text())).events)


def test_a_lost_host_gives_two_attempts_the_first_ended_by_its_heartbeat():
    line = recorded("lost_host")
    assert line.started is not None and line.ended is not None and line.started < line.ended
    agents = [s for s in line.spans if s.stage == "agent"]
    assert [(s.rollout_attempt, s.outcome) for s in agents] == [(1, "timed_out"), (2, "completed")]
    assert agents[0].failure == "activity ScheduleToStart timeout: activity Heartbeat timeout", "the failure and its cause, one line"
    assert agents[0].started is None, "the lost attempt never started on a live worker"
    assert [s.stage for s in line.spans if s.rollout_attempt == 2] == ["other", "boot", "agent", "diff", "other", "grading", "merge"]
    assert all(s.summary for s in line.spans) and line.spans[1].summary.startswith("boot rollout-task-")
    assert all(s.scheduled <= s.started <= s.ended for s in line.spans if s.started and s.ended)


def test_a_guarded_rollout_shows_its_agent_cancelled():
    line = recorded("guard")
    (agent,) = [s for s in line.spans if s.stage == "agent"]
    assert (agent.outcome, agent.failure, agent.attempt) == ("canceled", "canceled", 1)
