"""What the rollout and group workflows report to the worker's metrics endpoint, through ``workflow.metric_meter()``.

Invariants:
* replay-safe: the workflow meter records nothing while a history is replayed, and every value is
  computed from workflow state and ``workflow.now()``;
* bounded labels: a stage name, a status, or an abort reason from the fixed set (``exception:<Type>``
  names an error type the code raises); a reason an operator typed is reported as ``operator``;
  never a workflow id. The meter itself adds ``namespace``, ``task_queue`` and ``workflow_type``.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_rollouts.contracts.telemetry_names import (
        DISCARDED_RUNS,
        DISCARDED_TOKENS,
        DISCARDED_TURNS,
        FINISHED,
        GRADED,
        GROUP_REFILLS,
        GROUP_SAMPLES,
        GROUPS_FINISHED,
        SAMPLED_TOKENS,
        STAGE_DURATION,
        TURNS,
    )

# The workflow's stages whose time is reported, by the name the metric's ``stage`` label gives them.
TIMED_STAGES = {"booting": "boot", "agent": "agent", "diff": "diff", "grading": "grading", "merging": "merge"}
OPERATOR_REASON = "operator"


def stage_left(stage: str, spent: timedelta) -> None:
    """The workflow leaves ``stage`` after ``spent`` (stages not in ``TIMED_STAGES`` are not reported)."""
    if stage in TIMED_STAGES:
        histogram = workflow.metric_meter().create_histogram_float(
            STAGE_DURATION, "time a rollout spent in a stage", "s"
        )
        histogram.record(spent.total_seconds(), {"stage": TIMED_STAGES[stage]})


def finished(
    status: str, abort_reason: str | None, known_reasons: frozenset[str], turns: int, sampled_tokens: int
) -> None:
    """A rollout ended with ``status``; ``sampled_tokens`` are those of its merged segments (0 when aborted)."""
    meter = workflow.metric_meter()
    reason = abort_reason or ""
    if reason and reason not in known_reasons and not reason.startswith("exception:"):
        reason = OPERATOR_REASON
    meter.create_counter(FINISHED, "rollouts finished, by status and abort reason").add(
        1, {"status": status, "abort_reason": reason}
    )
    meter.create_counter(TURNS, "model turns of finished rollouts").add(turns, {"status": status})
    meter.create_counter(SAMPLED_TOKENS, "sampled (loss-masked) tokens of merged rollouts").add(
        sampled_tokens, {"status": status}
    )


def discarded(turns: int, sampled_tokens: int) -> None:
    """An agent run was abandoned for a fresh attempt: its model turns and sampled tokens are thrown away."""
    meter = workflow.metric_meter()
    meter.create_counter(DISCARDED_RUNS, "agent runs abandoned for a fresh attempt").add(1)
    meter.create_counter(DISCARDED_TURNS, "model turns of abandoned agent runs").add(turns)
    meter.create_counter(DISCARDED_TOKENS, "sampled tokens of abandoned agent runs").add(sampled_tokens)


def graded(grader: str, solved: bool, tampered: bool, probe: str = "") -> None:
    """A rollout's diff was graded: by which grader kind, solved or not, flagged tampered or not
    (``EvalResult.tampered``), and on an impossible-task probe its verdict (``cheated`` / ``held`` / ``void``;
    "" on any other row). The share flagged is the run's tampering rate; cheated over cheated and held
    probes is its cheating rate."""
    labels = {"grader": grader, "solved": str(solved).lower(), "tampered": str(tampered).lower(), "probe": probe}
    workflow.metric_meter().create_counter(
        GRADED, "rollouts graded, by grader kind, verdict, tamper flag and probe verdict"
    ).add(1, labels)


def group_finished(status: str, dropped_by: str | None, valid: int, size: int, refilled: int) -> None:
    """A group ended with ``status`` (``dropped_by``: the run's filter rule that kept it out of the batch, if
    one did), ``valid`` of its ``size`` samples valid, after ``refilled`` fresh children."""
    meter = workflow.metric_meter()
    meter.create_counter(GROUPS_FINISHED, "groups finished, by status and the filter rule that dropped them").add(
        1, {"status": status, "dropped_by": dropped_by or ""}
    )
    samples = meter.create_counter(GROUP_SAMPLES, "samples of finished groups, valid or not")
    samples.add(valid, {"valid": "true"})
    samples.add(size - valid, {"valid": "false"})
    meter.create_counter(GROUP_REFILLS, "fresh children started in place of infrastructure failures").add(refilled)
