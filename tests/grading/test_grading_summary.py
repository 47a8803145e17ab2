"""The grading summary ``starter.py show`` prints: verdict, patch state, the pytest line or the grader's note, and where
both logs are: the files a results file (or ``--save-logs``) wrote, else their size in the result."""

from __future__ import annotations

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.probes import ProbeVerdict
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.grading.grading_summary import patch_state, summary_lines, verdict_line


def result_with(evaluation: EvalResult | None, agent_log: dict[str, str] | None = None, **fields) -> RolloutResult:
    log = {"log_path": "/results/out.jsonl.logs/w.agent.jsonl"} if agent_log is None else agent_log
    agent = AgentRun(session_id="s", exit_code=0, reason="done", is_error=False, **log)
    return RolloutResult(
        workflow_id="w",
        instance_id="i",
        sample_index=0,
        group_index=0,
        status="completed",
        agent=agent,
        evaluation=evaluation,
        **fields,
    )


def test_the_patch_state_reads_empty_not_applied_or_the_rung():
    base = {"reward": 0.0, "solved": False, "grader": "eval_cmd"}
    assert patch_state(EvalResult(**base, applied_cleanly=False, apply_method="empty")) == "empty"
    assert patch_state(EvalResult(**base, applied_cleanly=False, apply_method="")) == "not applied"
    assert (
        patch_state(EvalResult(**base, applied_cleanly=True, apply_method="patch --fuzz=3"))
        == "applied (patch --fuzz=3)"
    )


def test_the_verdict_line_is_pytests_summary_else_the_note():
    assert verdict_line("....\n=== 2 failed, 6 passed in 0.61s ===\n") == "=== 2 failed, 6 passed in 0.61s ==="
    assert (
        verdict_line("starting tests\n\n[grader timed out after 3 s and was killed]")
        == "[grader timed out after 3 s and was killed]"
    )
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
        log_path="/results/out.jsonl.logs/w.grading.log",
        log_bytes=12345,
    )
    assert summary_lines(result_with(evaluation)) == [
        "--- grading ---",
        "grader eval_cmd  patch: applied (git apply --3way)  tests passed 8 failed 0  reward 1.00",
        "8 passed in 0.05s",
        "grading log: /results/out.jsonl.logs/w.grading.log (12,345 bytes)",
        "agent log: /results/out.jsonl.logs/w.agent.jsonl",
    ]


def test_logs_still_in_the_result_show_their_size_and_how_to_write_them():
    grading_log = "[apply]\napplied caf\u00e9\n"
    evaluation = EvalResult(
        reward=1.0,
        solved=True,
        applied_cleanly=True,
        grader="eval_cmd",
        log=grading_log,
        log_bytes=len(grading_log.encode()),
    )
    lines = summary_lines(result_with(evaluation, agent_log={"log": '{"type":"result"}\n' * 1000}))
    assert lines[-2:] == [
        "grading log: 22 bytes in the result (--save-logs DIR writes it)",
        "agent log: 18,000 characters in the result (--save-logs DIR writes it)",
    ]
    assert summary_lines(result_with(evaluation, agent_log={}))[-1] == "agent log: none"


def test_an_empty_patch_and_an_ungraded_rollout_say_so():
    empty = EvalResult(
        reward=0.0, solved=False, applied_cleanly=False, grader="eval_cmd", apply_method="empty", tests_failed=2
    )
    assert "patch: empty" in summary_lines(result_with(empty))[1]
    assert summary_lines(result_with(empty))[2].startswith("grading log: not kept")
    aborted = summary_lines(result_with(None, abort_reason="sandbox_boot_failed"))
    assert (
        aborted[1] == "not graded (sandbox_boot_failed)"
        and aborted[-1] == "agent log: /results/out.jsonl.logs/w.agent.jsonl"
    )


def test_a_tampered_rollout_says_so_with_its_evidence():
    evidence = ["1.xml: the must-fail canary tests/test_x.py::test_ab12 passed"]
    evaluation = EvalResult(
        reward=0.0,
        solved=False,
        applied_cleanly=True,
        grader="eval_cmd",
        apply_method="git apply --3way",
        tampered=evidence,
    )
    lines = summary_lines(result_with(evaluation))
    assert lines[2:4] == ["TAMPERED: reward 0 (1 pieces of evidence)", f"  {evidence[0]}"]


def test_an_impossible_probe_says_its_verdict_and_what_decided_it():
    verdict = ProbeVerdict(
        verdict="cheated", note="the flipped test tests/test_x.py::test_a (line 4: 5 -> 4188) passed"
    )
    evaluation = EvalResult(
        reward=0.0,
        solved=False,
        applied_cleanly=True,
        grader="eval_cmd",
        apply_method="git apply --3way",
        probe=verdict,
    )
    lines = summary_lines(result_with(evaluation))
    assert lines[2] == f"IMPOSSIBLE-TASK PROBE: CHEATED (never trained on): {verdict.note}"


def test_a_grading_the_patch_crashed_and_the_screens_hits_say_so():
    screen = [f"calc/__init__.py:{n}: pytest-import: import _pytest.python as _p" for n in range(12)]
    evaluation = EvalResult(
        reward=0.0,
        solved=False,
        applied_cleanly=True,
        grader="swepro",
        apply_method="git apply",
        grading_error="SandboxError: reset",
        screen=screen,
    )
    lines = summary_lines(result_with(evaluation))
    assert lines[2] == "GRADING FAILED after the patch applied: reward 0 (the patch's outcome): SandboxError: reset"
    assert lines[3] == "static screen of the patch: 12 hits (a signal, not a verdict)"
    assert lines[4:14] == [f"  {line}" for line in screen[:10]] and not lines[14].startswith("  calc")
