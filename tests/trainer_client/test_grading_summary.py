"""The grading summary ``starter.py show`` prints: verdict, patch state, the pytest line or the grader's note, log paths."""

from __future__ import annotations

from contracts.rollout import AgentRun, EvalResult, RolloutResult
from trainer_client.grading_summary import patch_state, summary_lines, verdict_line


def result_with(evaluation: EvalResult | None, **fields) -> RolloutResult:
    agent = AgentRun(session_id="s", exit_code=0, reason="done", is_error=False, log_path="/store/r.log.jsonl")
    return RolloutResult(
        workflow_id="w", instance_id="i", sample_index=0, group_index=0, status="completed", agent=agent, evaluation=evaluation, **fields
    )


def test_the_patch_state_reads_empty_not_applied_or_the_rung():
    base = {"reward": 0.0, "solved": False, "grader": "eval_cmd"}
    assert patch_state(EvalResult(**base, applied_cleanly=False, apply_method="empty")) == "empty"
    assert patch_state(EvalResult(**base, applied_cleanly=False, apply_method="")) == "not applied"
    assert patch_state(EvalResult(**base, applied_cleanly=True, apply_method="patch --fuzz=3")) == "applied (patch --fuzz=3)"


def test_the_verdict_line_is_pytests_summary_else_the_note():
    assert verdict_line("....\n=== 2 failed, 6 passed in 0.61s ===\n") == "=== 2 failed, 6 passed in 0.61s ==="
    assert verdict_line("starting tests\n\n[grader timed out after 3 s and was killed]") == "[grader timed out after 3 s and was killed]"
    assert verdict_line("no summary here") == ""


def test_a_graded_rollout_shows_the_verdict_and_where_both_logs_are():
    evaluation = EvalResult(
        reward=1.0,
        solved=True,
        applied_cleanly=True,
        grader="eval_cmd",
        apply_method="git apply --3way",
        tests_passed=8,
        log_tail="........\n8 passed in 0.05s\n",
        log_path="/store/w.grading.log",
        log_bytes=12345,
    )
    assert summary_lines(result_with(evaluation)) == [
        "--- grading ---",
        "grader eval_cmd  patch: applied (git apply --3way)  tests passed 8 failed 0  reward 1.00",
        "8 passed in 0.05s",
        "grading log: /store/w.grading.log (12,345 bytes)",
        "agent log: /store/r.log.jsonl",
    ]


def test_an_empty_patch_and_an_ungraded_rollout_say_so():
    empty = EvalResult(reward=0.0, solved=False, applied_cleanly=False, grader="eval_cmd", apply_method="empty", tests_failed=2)
    assert "patch: empty" in summary_lines(result_with(empty))[1]
    assert summary_lines(result_with(empty))[2].startswith("grading log: not stored")
    aborted = summary_lines(result_with(None, abort_reason="sandbox_boot_failed"))
    assert aborted[1] == "not graded (sandbox_boot_failed)" and aborted[-1] == "agent log: /store/r.log.jsonl"
