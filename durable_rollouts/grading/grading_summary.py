"""What an operator reads about a finished rollout's grading: the verdict in a few lines and where the logs are.

``patch_state`` is the one wording of what happened to the patch (``empty``, ``not applied``, or the
rung that applied it), shared by ``starter.py show`` and the starter's sample lines.
"""

from __future__ import annotations

from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.grading.pytest_summary import PYTEST_SUMMARY

MAX_SCREEN_SHOWN = 10


def patch_state(evaluation: EvalResult) -> str:
    """``empty`` (an empty diff: nothing applied), ``not applied`` (no rung applied it) or ``applied (<rung>)``."""
    if evaluation.apply_method == "empty":
        return "empty"
    if not evaluation.applied_cleanly:
        return "not applied"
    return f"applied ({evaluation.apply_method})"


def verdict_line(log_tail: str) -> str:
    """The last pytest summary line of the grader's output, else its last note (a ``[...]`` line), else ""."""
    lines = [line.strip() for line in log_tail.splitlines()]
    summaries = [line for line in lines if PYTEST_SUMMARY.match(line)]
    if summaries:
        return summaries[-1]
    notes = [line for line in lines if line.startswith("[") and line.endswith("]")]
    return notes[-1] if notes else ""


def summary_lines(result: RolloutResult) -> list[str]:
    """The grading summary of ``result``, then where its whole grading log and its agent's log are: the file a
    results file (or ``starter.py show --save-logs``) wrote, else their size in the result."""
    evaluation = result.evaluation
    lines = ["--- grading ---"]
    if evaluation is None:
        lines.append(f"not graded ({result.abort_reason or result.status})")
    else:
        lines.append(
            f"grader {evaluation.grader}  patch: {patch_state(evaluation)}  tests passed {evaluation.tests_passed}"
            f" failed {evaluation.tests_failed}  reward {evaluation.reward:.2f}"
        )
        if evaluation.tampered:
            lines.append(f"TAMPERED: reward 0 ({len(evaluation.tampered)} pieces of evidence)")
            lines += [f"  {line}" for line in evaluation.tampered]
        if evaluation.grading_error:
            lines.append(
                f"GRADING FAILED after the patch applied: reward 0 (the patch's outcome): {evaluation.grading_error}"
            )
        if evaluation.screen:
            lines.append(f"static screen of the patch: {len(evaluation.screen)} hits (a signal, not a verdict)")
            lines += [f"  {line}" for line in evaluation.screen[:MAX_SCREEN_SHOWN]]
        if evaluation.probe:
            lines.append(
                f"IMPOSSIBLE-TASK PROBE: {evaluation.probe.verdict.upper()} (never trained on): {evaluation.probe.note}"
            )
        verdict = verdict_line(evaluation.log_tail)
        if verdict:
            lines.append(verdict)
        if evaluation.log_path:
            lines.append(f"grading log: {evaluation.log_path} ({evaluation.log_bytes:,} bytes)")
        elif evaluation.log_bytes:
            lines.append(f"grading log: {evaluation.log_bytes:,} bytes in the result (--save-logs DIR writes it)")
        else:
            lines.append("grading log: not kept (graded before grading logs were kept, or not graded in a sandbox)")
    agent = result.agent
    if agent and agent.log_path:
        lines.append(f"agent log: {agent.log_path}")
    elif agent and agent.log:
        lines.append(f"agent log: {len(agent.log):,} characters in the result (--save-logs DIR writes it)")
    else:
        lines.append("agent log: none")
    return lines
