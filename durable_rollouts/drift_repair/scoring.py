"""How drift → repair episodes are scored (pure functions; the workflow and the offline scorer share them).

**Breakage.** Valid iff the broken script does not run on the visible input: it exits non-zero or is killed at the
time limit. One that still exits 0 (even with different output or a stderr warning) is invalid: the repairer needs
an error to work from. The error trace is the run's stderr tail (a note replaces it on a timeout or an exit without
stderr).

**Repair, visible reward** (the repair role's reward), on the visible input after applying the diff::

    reward = 0.2 * ran + 0.6 * (ran and output_matches) + 0.2 * (ran and quiet)

``ran``: exit 0 within the time limit; ``output_matches``: stdout equals the expected output, compared line by line
with trailing whitespace and trailing blank lines ignored; ``quiet``: nothing on stderr. **Success** is the held-out
breakdown's ``executed_cleanly``; the **drift role reward** is ``DRIFT_REWARDS[name](outcome)``. docs/drift_repair.md
("Scoring", "Role rewards") gives the edge cases and every drift reward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from durable_rollouts.contracts.drift_repair import (
    BreakageRun,
    DriftTask,
    HeldOutBreakdown,
    IOCase,
    RepairGrade,
    RoleRewards,
    RunOutcome,
    SpecSource,
    VisibleBreakdown,
)

RAN_WEIGHT, CORRECT_WEIGHT, QUIET_WEIGHT = 0.2, 0.6, 0.2
TRACE_LIMIT = 4000
DEFAULT_DRIFT_REWARD = "breaks_and_survives"


def same_output(actual: str, expected: str) -> bool:
    def normal(text: str) -> list[str]:
        lines = [line.rstrip() for line in text.splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    return normal(actual) == normal(expected)


def error_trace(outcome: RunOutcome, timeout_s: float) -> str:
    if outcome.timed_out:
        note = f"[the script did not finish within {timeout_s:g} s and was killed]"
        return (outcome.stderr[-TRACE_LIMIT:] + "\n" + note).lstrip()
    if outcome.stderr.strip():
        return outcome.stderr[-TRACE_LIMIT:]
    return f"[exit code {outcome.exit_code}, nothing on stderr]"


def judge_breakage(outcome: RunOutcome, timeout_s: float) -> BreakageRun:
    valid = not outcome.ran
    return BreakageRun(valid=valid, outcome=outcome, error_trace=error_trace(outcome, timeout_s) if valid else "")


def visible_breakdown(outcome: RunOutcome, case: IOCase) -> VisibleBreakdown:
    ran = outcome.ran
    return VisibleBreakdown(
        applied=True,
        ran=ran,
        output_matches=ran and same_output(outcome.stdout, case.expected_stdout),
        quiet=ran and not outcome.stderr.strip(),
        timed_out=outcome.timed_out,
        exit_code=outcome.exit_code,
    )


def visible_reward(breakdown: VisibleBreakdown) -> float:
    if not breakdown.applied:
        return 0.0
    return round(
        RAN_WEIGHT * breakdown.ran + CORRECT_WEIGHT * breakdown.output_matches + QUIET_WEIGHT * breakdown.quiet, 6
    )


def held_out_breakdown(outcomes: list[RunOutcome], cases: list[IOCase]) -> HeldOutBreakdown:
    correct = sum(o.ran and same_output(o.stdout, c.expected_stdout) for o, c in zip(outcomes, cases, strict=False))
    return HeldOutBreakdown(
        cases=len(cases),
        ran=sum(o.ran for o in outcomes),
        correct=correct,
        timed_out=sum(o.timed_out for o in outcomes),
        noisy=sum(bool(o.stderr.strip()) for o in outcomes),
        executed_cleanly=bool(cases) and len(outcomes) == len(cases) and correct == len(cases),
    )


def _log_tail(outcome: RunOutcome) -> str:
    return f"exit {outcome.exit_code}{' (timed out)' if outcome.timed_out else ''}\n{outcome.stderr[-1000:]}".strip()


def grade_runs(task: DriftTask, outcomes: list[RunOutcome]) -> RepairGrade:
    """Grade an applied repair from its runs: the visible input first, then each held-out input in order."""
    visible = visible_breakdown(outcomes[0], task.visible)
    held_out = held_out_breakdown(outcomes[1:], task.held_out)
    return RepairGrade(
        applied_cleanly=True,
        reward=visible_reward(visible),
        visible=visible,
        held_out=held_out,
        success=held_out.executed_cleanly,
        log_tail=_log_tail(outcomes[0]),
    )


def grade_not_applied(task: DriftTask, apply_error: str) -> RepairGrade:
    return RepairGrade(
        applied_cleanly=False,
        apply_error=apply_error,
        reward=0.0,
        visible=VisibleBreakdown(),
        held_out=HeldOutBreakdown(cases=len(task.held_out)),
        success=False,
    )


@dataclass(frozen=True)
class DriftOutcome:
    """What a drift reward function may look at."""

    spec_source: SpecSource
    breakage_valid: bool
    repair_reward: float
    repair_success: bool


def breaks_and_survives(outcome: DriftOutcome) -> float:
    return float(outcome.breakage_valid and not outcome.repair_success)


def breaks(outcome: DriftOutcome) -> float:
    return float(outcome.breakage_valid)


def adversarial(outcome: DriftOutcome) -> float:
    return round(1.0 - outcome.repair_reward, 6) if outcome.breakage_valid else 0.0


DRIFT_REWARDS: dict[str, Callable[[DriftOutcome], float]] = {
    "breaks_and_survives": breaks_and_survives,
    "breaks": breaks,
    "adversarial": adversarial,
}


def role_rewards(outcome: DriftOutcome, drift_reward: str = DEFAULT_DRIFT_REWARD) -> RoleRewards:
    """Repair = the visible reward; drift = ``DRIFT_REWARDS[drift_reward]``, 0 for a fallback spec."""
    drift = 0.0 if outcome.spec_source == "fallback" else DRIFT_REWARDS[drift_reward](outcome)
    return RoleRewards(drift=drift, repair=outcome.repair_reward)
