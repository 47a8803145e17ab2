"""What ``Batch.metrics()`` counts from the groups' results."""

from __future__ import annotations

from contracts.rollout import EvalResult, RolloutResult
from contracts.rollout_group import GroupResult, GroupSample
from trainer_client.rollout_groups import Batch


def test_the_batch_reports_how_many_graded_samples_were_flagged_tampered():
    def slot(index: int, tampered: list[str] | None) -> GroupSample:
        evaluation = None if tampered is None else EvalResult(reward=0.0, solved=False, applied_cleanly=True, grader="eval_cmd", tampered=tampered)
        rollout_result = RolloutResult(
            workflow_id=f"w{index}", instance_id="i", sample_index=index, group_index=0, status="completed", evaluation=evaluation
        )
        return GroupSample(sample_index=index, valid=True, outcome="model", rollout=rollout_result)

    group = GroupResult(workflow_id="g", status="completed", samples=[slot(0, ["canary passed"]), slot(1, []), slot(2, []), slot(3, None)], kept=True)
    assert group.tampered_mask == [True, False, False, False]
    metrics = Batch(groups=[group]).metrics()
    assert (metrics["samples_tampered"], metrics["tampered_share"]) == (1, 1 / 3), "a share of the graded samples (one was not graded)"
    assert Batch().metrics()["tampered_share"] == 0.0
