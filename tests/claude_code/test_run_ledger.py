"""The agent run's ledger across activity attempts: interruptions cost nothing, real failures are counted."""

from __future__ import annotations

from durable_rollouts.claude_code.run_ledger import MAX_AGENT_FAILURES, RunLedger


def test_every_attempt_that_did_not_record_a_failure_was_an_interruption():
    beat = {"session_id": "s", "turns": 4} | RunLedger(failures=1, interruptions=2).details()
    assert RunLedger.after(beat, attempt=5) == RunLedger(failures=1, interruptions=3), (
        "one attempt left no heartbeat: lost all the same"
    )
    assert RunLedger.after(None, attempt=2) == RunLedger(interruptions=1), "no heartbeat reached the server at all"
    assert RunLedger.after(beat, attempt=1) == RunLedger(), "the first attempt starts clean"


def test_a_failure_is_written_before_the_attempt_fails_and_read_as_one_by_the_next():
    beat = RunLedger(interruptions=4).failure_details()
    assert RunLedger.after(beat, attempt=6) == RunLedger(failures=1, interruptions=4), (
        "a failure, not one more interruption"
    )
    spent = RunLedger(failures=MAX_AGENT_FAILURES - 1, interruptions=9)
    assert not spent.exhausted and spent.failed().exhausted, (
        "the last real failure ends the run, whatever the interruptions"
    )
