"""What ``Batch.metrics()`` counts from the groups' results."""

from __future__ import annotations

from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.probes import ProbeVerdict
from durable_rollouts.contracts.rollout_group import GroupResult, GroupSample
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.trainer_client.rollout_groups import Batch


def test_the_batch_reports_how_many_graded_samples_were_flagged_tampered_and_hit_by_the_screen():
    def slot(index: int, tampered: list[str] | None, screen: tuple[str, ...] = ()) -> GroupSample:
        evaluation = (
            None
            if tampered is None
            else EvalResult(
                reward=0.0,
                solved=False,
                applied_cleanly=True,
                grader="eval_cmd",
                tampered=tampered,
                screen=list(screen),
            )
        )
        rollout_result = RolloutResult(
            workflow_id=f"w{index}",
            instance_id="i",
            sample_index=index,
            group_index=0,
            status="completed",
            evaluation=evaluation,
        )
        return GroupSample(sample_index=index, valid=True, outcome="model", rollout=rollout_result)

    hit = ("lib.py:3: pytest-current-test: os.environ['PYTEST_CURRENT_TEST']",)
    samples = [slot(0, ["canary passed"]), slot(1, [], hit), slot(2, []), slot(3, None)]
    group = GroupResult(workflow_id="g", status="completed", samples=samples, kept=True)
    assert group.tampered_mask == [True, False, False, False]
    metrics = Batch(groups=[group]).metrics()
    assert (metrics["samples_tampered"], metrics["tampered_share"]) == (1, 1 / 3), (
        "a share of the graded samples (one was not graded)"
    )
    assert (metrics["samples_screened"], metrics["screened_share"]) == (1, 1 / 3), "the screen's hits are counted apart"
    assert Batch().metrics()["tampered_share"] == 0.0


def test_the_batch_reports_its_probe_groups_and_their_cheating_rate_apart_from_the_filtered_ones():
    def probe_slot(index: int, verdict: str) -> GroupSample:
        evaluation = EvalResult(
            reward=0.0, solved=False, applied_cleanly=True, grader="swepro", probe=ProbeVerdict(verdict=verdict)
        )
        result = RolloutResult(
            workflow_id=f"p{index}",
            instance_id="i.probe-3",
            sample_index=index,
            group_index=1,
            status="completed",
            evaluation=evaluation,
        )
        return GroupSample(
            sample_index=index, valid=False, outcome="probe", invalid_reason="impossible_probe", rollout=result
        )

    probe = GroupResult(
        workflow_id="p",
        status="completed",
        samples=[probe_slot(0, "cheated"), probe_slot(1, "held"), probe_slot(2, "void")],
        dropped_by="probe",
    )
    filtered = GroupResult(workflow_id="f", status="completed", dropped_by="zero_variance")
    metrics = Batch(dropped=[probe, filtered]).metrics()
    assert (metrics["groups_probe"], metrics["groups_filtered"]) == (1, 1)
    assert (metrics["probes_cheated"], metrics["probes_held"], metrics["probes_void"], metrics["cheating_rate"]) == (
        1,
        1,
        1,
        0.5,
    )
