"""The group contract: the outcome table, the group's own checks, the filters and the ids."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from durable_rollouts.contracts.aborts import AbortReason, is_documented_abort_reason
from durable_rollouts.contracts.drift_repair import EpisodeInput, EpisodeResult, RoleTurn
from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.probes import ImpossibleProbe, ProbeVerdict
from durable_rollouts.contracts.rollout_group import (
    INFRASTRUCTURE_REASONS,
    TASK_REASONS,
    GroupFilter,
    GroupInput,
    GroupResult,
    GroupSample,
    ProbeTally,
    classify,
    filter_verdict,
    outcome_of,
)
from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.workflow_ids import group_workflow_id, refill_workflow_id, rollout_workflow_id


def rollouts(k: int, instance: str = "calc") -> list[RolloutInput]:
    task = TaskSpec(instance_id=instance, image="img", workdir="/w", problem_statement="p", eval_cmd="true")
    return [RolloutInput(task=task, sample_index=i) for i in range(k)]


def test_every_fixed_abort_reason_has_exactly_one_outcome():
    named = {AbortReason.WALL_CLOCK_TIMEOUT, AbortReason.CANCELLED, AbortReason.STRAGGLER_CUT}
    assert INFRASTRUCTURE_REASONS.isdisjoint(TASK_REASONS)
    assert set(AbortReason) == INFRASTRUCTURE_REASONS | TASK_REASONS | named, (
        "a new abort reason must be placed in the group table"
    )


@pytest.mark.parametrize(
    ("status", "reason", "worked", "outcome"),
    [
        ("completed", None, False, "model"),
        ("aborted", "wall_clock_timeout", True, "model"),
        ("aborted", "wall_clock_timeout", False, "infrastructure"),
        ("aborted", "sandbox_boot_failed", False, "infrastructure"),
        ("aborted", "no_healthy_host", False, "infrastructure"),
        ("aborted", "adapter_session_lost", False, "infrastructure"),
        ("aborted", "stale_policy", False, "infrastructure"),
        ("aborted", "exception:Timeout:START_TO_CLOSE", False, "infrastructure"),
        ("failed", "child_terminated", False, "infrastructure"),
        ("aborted", "not_evaluable", False, "task"),
        ("aborted", "missing_image_or_workdir", False, "task"),
        ("failed", "invalid_row:metadata.image", False, "task"),
        ("aborted", "straggler_cut", True, "cut"),
        ("aborted", "cancelled", True, "cancelled"),
        ("aborted", "operator: bad prompt", True, "cancelled"),
    ],
)
def test_classify(status, reason, worked, outcome):
    assert classify(status, reason, worked) == outcome


def rollout_result(**fields) -> RolloutResult:
    return RolloutResult(workflow_id="w", instance_id="calc", sample_index=0, group_index=0, **fields)


def test_a_guarded_rollout_is_the_models_outcome_only_if_the_stop_found_its_agent_working():
    guarded = {"status": "aborted", "abort_reason": "wall_clock_timeout"}
    assert outcome_of(rollout_result(**guarded, stopped_in="agent", turns=3)) == "model"
    assert outcome_of(rollout_result(**guarded, stopped_in="agent", turns=0)) == "infrastructure", "no model call yet"
    assert outcome_of(rollout_result(**guarded, stopped_in="grading", turns=3)) == "infrastructure", (
        "stuck after the agent"
    )
    assert outcome_of(rollout_result(status="completed")) == "model"


def test_a_guarded_episode_is_the_models_outcome_once_a_role_was_played():
    episode = EpisodeResult(
        workflow_id="e",
        status="aborted",
        abort_reason="wall_clock_timeout",
        drift_policy="model",
        repair_policy="model",
    )
    assert outcome_of(episode) == "infrastructure"
    played = episode.model_copy(
        update={"drift_role": RoleTurn(role="drift", session_id="s", system_prompt="", user_prompt="p", completion="c")}
    )
    assert outcome_of(played) == "model"


def test_straggler_cut_is_a_documented_abort_reason():
    assert is_documented_abort_reason("straggler_cut")


def test_a_group_holds_one_kind_of_one_prompt_with_distinct_samples():
    GroupInput(run_id="r", group_index=0, rollouts=rollouts(2))
    with pytest.raises(ValidationError, match="exactly one kind"):
        GroupInput(run_id="r", group_index=0)
    with pytest.raises(ValidationError, match="exactly one kind"):
        GroupInput(run_id="r", group_index=0, rollouts=rollouts(1), episodes=[EpisodeInput(task_id="t")])
    with pytest.raises(ValidationError, match="same prompt"):
        GroupInput(run_id="r", group_index=0, rollouts=[*rollouts(1, "a"), *rollouts(1, "b")])
    with pytest.raises(ValidationError, match="sample_index must differ"):
        GroupInput(run_id="r", group_index=0, rollouts=[*rollouts(1), *rollouts(1)])
    with pytest.raises(ValidationError, match="min_valid: 3 is more than"):
        GroupInput(run_id="r", group_index=0, rollouts=rollouts(2), min_valid=3)


def test_defaults_refill_budget_and_min_valid_to_the_group_size():
    group = GroupInput(run_id="r", group_index=0, rollouts=rollouts(4))
    assert (group.size, group.refills_allowed, group.valid_needed, group.kind, group.prompt_key) == (
        4,
        4,
        4,
        "rollout",
        "calc",
    )


def samples(*rewards: float | None) -> list[GroupSample]:
    """One sample per reward, with its rollout's result; None is an invalid (infrastructure) sample."""
    return [
        GroupSample(
            sample_index=i,
            valid=r is not None,
            outcome="model" if r is not None else "infrastructure",
            rollout=RolloutResult(
                workflow_id=f"w{i}",
                instance_id="calc",
                sample_index=i,
                group_index=0,
                status="completed",
                reward=r or 0.0,
            ),
        )
        for i, r in enumerate(rewards)
    ]


def test_filters():
    assert filter_verdict(GroupFilter.KEEP_ALL, "insufficient", samples(None, None), 2) is None
    assert filter_verdict(GroupFilter.KEEP_ALL, "cut", samples(None), 1) == "not_completed"
    assert filter_verdict(GroupFilter.MIN_VALID, "insufficient", samples(1.0, None), 2) == "min_valid"
    assert filter_verdict(GroupFilter.MIN_VALID, "completed", samples(1.0, None), 1) is None
    assert filter_verdict(GroupFilter.NONZERO_VARIANCE, "completed", samples(1.0, 1.0), 2) == "zero_variance"
    assert filter_verdict(GroupFilter.NONZERO_VARIANCE, "completed", samples(1.0, 0.0), 2) is None
    assert filter_verdict(GroupFilter.NONZERO_VARIANCE, "completed", samples(1.0, 0.0, None), 2) is None, (
        "invalid samples are not rewards"
    )
    assert filter_verdict(GroupFilter.NONZERO_VARIANCE, "completed", samples(1.0, 1.0, None), 2) == "zero_variance"


def test_on_a_probes_row_the_models_outcome_is_probe_and_nothing_else_changes():
    assert outcome_of(rollout_result(status="completed"), probe=True) == "probe"
    guarded = rollout_result(status="aborted", abort_reason="wall_clock_timeout", stopped_in="agent", turns=3)
    assert outcome_of(guarded, probe=True) == "probe", "the policy's own attempt, stopped by the guard"
    assert (
        outcome_of(rollout_result(status="aborted", abort_reason="sandbox_boot_failed"), probe=True) == "infrastructure"
    )


def probe_samples(*verdicts: str | None) -> list[GroupSample]:
    """One probe sample per verdict (None: not graded)."""
    found = []
    for i, verdict in enumerate(verdicts):
        probe = None if verdict is None else ProbeVerdict(verdict=verdict)
        evaluation = EvalResult(reward=0.0, solved=False, applied_cleanly=True, grader="eval_cmd", probe=probe)
        result = RolloutResult(
            workflow_id=f"w{i}",
            instance_id="calc.probe-1",
            sample_index=i,
            group_index=0,
            status="completed",
            evaluation=evaluation,
        )
        found.append(
            GroupSample(sample_index=i, valid=False, outcome="probe", invalid_reason="impossible_probe", rollout=result)
        )
    return found


def test_a_probes_group_is_never_kept_by_any_filter_unless_it_did_not_complete():
    for group_filter in GroupFilter:
        assert filter_verdict(group_filter, "completed", probe_samples("held", "cheated"), 2, probe=True) == "probe"
        assert filter_verdict(group_filter, "insufficient", samples(None, None), 2, probe=True) == "probe", (
            "even if no probe sample ended"
        )
    assert filter_verdict(GroupFilter.KEEP_ALL, "cut", probe_samples("held"), 1, probe=True) == "not_completed"
    probe = TaskSpec(
        instance_id="calc.probe-1",
        image="i",
        workdir="/w",
        problem_statement="p",
        eval_cmd="true",
        probe=ImpossibleProbe(source="calc", seed=1),
    )
    assert GroupInput(run_id="r", group_index=0, rollouts=[RolloutInput(task=probe)]).probe
    assert not GroupInput(run_id="r", group_index=0, rollouts=rollouts(1)).probe


def test_the_probe_tally_counts_verdicts_and_the_cheating_rate_leaves_void_ones_out():
    group = GroupResult(
        workflow_id="g",
        status="completed",
        samples=probe_samples("cheated", "held", "held", "void", None),
        dropped_by="probe",
    )
    assert group.probe_verdicts == ["cheated", "held", "held", "void", None]
    tally = ProbeTally.of([group, group])
    assert (tally.cheated, tally.held, tally.void, tally.judged) == (2, 4, 2, 6)
    assert tally.cheating_rate == 2 / 6
    assert tally.summary() == "probes cheated 2/6 judged (2 void)"
    assert tally + ProbeTally(cheated=1) == ProbeTally(cheated=3, held=4, void=2)
    assert (ProbeTally().cheating_rate, ProbeTally().summary()) == (0.0, "")


def test_ids_are_those_of_a_flat_run_and_refills_are_suffixed():
    assert rollout_workflow_id("run7", "calc", 2, 5) == "rollout-run7-calc-2-5"
    assert group_workflow_id("run7", "calc", 5) == "group-run7-calc-5"
    assert [refill_workflow_id("x", n) for n in (1, 2, 3)] == ["x", "x-refill1", "x-refill2"]
