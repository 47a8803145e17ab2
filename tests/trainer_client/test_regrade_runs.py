"""Which rollouts of a run a re-grade takes, the task it grades with, and the row it writes."""

from __future__ import annotations

import pytest

from durable_rollouts.contracts.grading import DiffReport, EvalResult
from durable_rollouts.contracts.regrade import RegradeResult, Verdict
from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.workflow_ids import refill_workflow_id, rollout_workflow_id
from durable_rollouts.trainer_client.regrade_runs import (
    StoredRollout,
    belongs_to_run,
    regrade_input,
    regrade_row,
    regrade_task,
    rollouts_query,
    skip_reason,
)
from durable_rollouts.trainer_client.workflow_runs import RunFailure

TASK = TaskSpec(
    instance_id="calc", image="img:1", workdir="/w", problem_statement="p", eval_cmd="pytest -q", pre_commands=["make"]
)
PATCH = "diff --git a/x b/x\n+caf\u00e9\n"
GRADED = EvalResult(reward=1.0, solved=True, applied_cleanly=True, grader="eval_cmd", apply_method="git apply")


KEPT = DiffReport(patch_bytes=len(PATCH.encode()), kept_patch=PATCH)
# A report recorded when patches were kept in a folder: its claim check is not a patch to grade.
FOLDER_KEPT = DiffReport.model_validate(
    {
        "patch_bytes": 20,
        "patch": {"path": "/store/rollout-r-calc-1-0.attempt1.patch", "sha256": "ab" * 32, "nbytes": 20},
    }
)


def stored(diff: DiffReport | None = KEPT, execution: str = "COMPLETED", **result) -> StoredRollout:
    """Run ``r``'s rollout of sample 1, group 0, as read from its history (``result`` overrides its result's fields)."""
    rollout = RolloutInput(task=TASK, sample_index=1, group_index=0, eval_timeout_s=77)
    workflow_id = rollout_workflow_id("r", "calc", 1, 0)
    done = RolloutResult(
        workflow_id=workflow_id,
        instance_id="calc",
        sample_index=1,
        group_index=0,
        status="completed",
        diff=diff,
        evaluation=GRADED,
    )
    return StoredRollout(
        workflow_id, rollout, done.model_copy(update=result) if execution == "COMPLETED" else None, execution
    )


def test_a_run_is_its_own_ids_and_their_refills_not_another_run_sharing_the_prefix():
    rollout = RolloutInput(task=TASK, sample_index=1, group_index=0)
    first = rollout_workflow_id("r", "calc", 1, 0)
    assert belongs_to_run(first, "r", rollout) and belongs_to_run(refill_workflow_id(first, 3), "r", rollout)
    assert not belongs_to_run(rollout_workflow_id("r-b", "calc", 1, 0), "r", rollout), (
        "run r-b's rollout only shares the prefix"
    )
    assert not belongs_to_run(f"{first}-refillx", "r", rollout) and not belongs_to_run(f"{first}-refill0", "r", rollout)
    assert rollouts_query("r") == "WorkflowType='CodingAgentRollout' AND WorkflowId STARTS_WITH 'rollout-r-'"
    with pytest.raises(ValueError, match="--run-id"):
        rollouts_query("it's")


@pytest.mark.parametrize(
    ("rollout", "reason"),
    [
        (stored(), None),
        (stored(execution="RUNNING"), "not finished (running)"),
        (stored(execution="TERMINATED"), "closed without a result (terminated)"),
        (
            stored(None, status="aborted", abort_reason="sandbox_boot_failed", evaluation=None),
            "no diff was taken (aborted: sandbox_boot_failed)",
        ),
        (
            stored(DiffReport(patch_bytes=3 << 20, over_cap=True, note="over the cap")),
            "patch over the cap, nothing kept (over the cap)",
        ),
        (stored(DiffReport(patch_bytes=20)), "no patch kept (rolled out before patches travelled in the result)"),
        (stored(FOLDER_KEPT), "no patch kept (rolled out before patches travelled in the result)"),
    ],
)
def test_rollouts_without_a_kept_patch_are_skipped_with_their_reason(rollout, reason):
    assert skip_reason(rollout, None) == reason


def test_with_a_dataset_an_instance_it_lacks_is_skipped_and_the_rest_take_its_grader_in_the_original_environment():
    current = TaskSpec(
        instance_id="calc",
        image="img:2",
        workdir="/other",
        problem_statement="p2",
        eval_cmd="pytest -q --strict",
        test_files=["t/*"],
    )
    assert skip_reason(stored(), {"other": current}) == "instance 'calc' is not in --dataset"
    assert skip_reason(stored(), {"calc": current}) is None
    task = regrade_task(TASK, current)
    assert (task.eval_cmd, task.test_files) == ("pytest -q --strict", ["t/*"]), "the grader spec is the dataset's"
    assert (task.image, task.workdir, task.pre_commands) == ("img:1", "/w", ["make"]), (
        "the patch's capture environment is the rollout's"
    )
    assert regrade_task(TASK, None) == TASK
    regrade = regrade_input(stored(), current)
    assert (regrade.original_workflow_id, regrade.patch, regrade.eval_timeout_s, regrade.task) == (
        stored().workflow_id,
        PATCH,
        77,
        task,
    )


def test_a_row_names_the_original_rollout_and_says_whether_the_verdict_changed():
    rollout = stored()
    failing = GRADED.model_copy(update={"reward": 0.0, "solved": False})
    new = RegradeResult(
        workflow_id="regrade-g-x",
        original_workflow_id=rollout.workflow_id,
        instance_id="calc",
        status="completed",
        evaluation=failing,
    )
    row = regrade_row(rollout, "regrade-g-x", new, from_dataset=True)
    assert (row.workflow_id, row.original_workflow_id, row.instance_id, row.sample_index, row.group_index) == (
        "regrade-g-x",
        rollout.workflow_id,
        "calc",
        1,
        0,
    )
    assert (row.status, row.original, row.evaluation, row.changed, row.patch_bytes, row.grader_from) == (
        "completed",
        Verdict(reward=1.0, solved=True, applied_cleanly=True, apply_method="git apply"),
        failing,
        True,
        len(PATCH.encode()),
        "dataset",
    )
    other_method = new.model_copy(update={"evaluation": GRADED.model_copy(update={"apply_method": "patch --fuzz"})})
    assert regrade_row(rollout, "regrade-g-x", other_method, from_dataset=False).changed is False, (
        "how it applied is not the verdict"
    )
    aborted = new.model_copy(update={"status": "aborted", "abort_reason": "no_grader", "evaluation": None})
    assert (
        regrade_row(rollout, "regrade-g-x", aborted, False).status,
        regrade_row(rollout, "regrade-g-x", aborted, False).changed,
    ) == (
        "aborted",
        None,
    )
    assert regrade_row(stored(evaluation=None), "regrade-g-x", new, False).changed is None
    failed = regrade_row(rollout, "regrade-g-x", RunFailure("server_unavailable", "down"), False)
    assert (failed.status, failed.abort_reason, failed.error, failed.evaluation) == (
        "failed",
        "server_unavailable",
        "down",
        None,
    )
