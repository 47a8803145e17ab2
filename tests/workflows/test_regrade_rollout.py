"""RegradeRollout on Temporal's time-skipping test server with the real grading activities: a kept patch that is
gone or altered never reaches a grader, and the result still names the original rollout."""

from __future__ import annotations

import uuid

import pytest
from temporalio.worker import Worker

from activities.evaluate import GradingActivities
from contracts.regrade import RegradeInput
from contracts.rollout import TaskSpec
from contracts.workflow_ids import regrade_workflow_id
from policy.trajectory_store import TrajectoryStore
from workflows.regrade_rollout import RegradeRollout

pytestmark = pytest.mark.asyncio(loop_scope="session")
TASK = TaskSpec(instance_id="calc", image="img", workdir="/w", problem_statement="p", eval_cmd="true")


async def test_a_patch_gone_or_altered_aborts_the_regrade_without_grading(env, sandboxes, tmp_path):
    store = TrajectoryStore(tmp_path)
    grading = GradingActivities(sandboxes, store)
    queue = f"regrade-{uuid.uuid4().hex[:6]}"
    kept = store.put_patch("rollout-r-calc-0-0.attempt1", "diff --git a/x b/x\n")
    altered = store.put_patch("rollout-r-calc-1-0.attempt1", "diff --git a/y b/y\n")
    (tmp_path / "rollout-r-calc-1-0.attempt1.patch").write_text("diff --git a/z b/z\n")
    gone = kept.model_copy(update={"path": str(tmp_path / "rollout-r-calc-2-0.attempt1.patch")})
    async with Worker(env.client, task_queue=queue, workflows=[RegradeRollout], activities=[grading.read_patch, grading.evaluate]):
        for original, patch in (("rollout-r-calc-1-0", altered), ("rollout-r-calc-2-0", gone)):
            workflow_id = regrade_workflow_id(uuid.uuid4().hex[:6], original)
            regrade = RegradeInput(original_workflow_id=original, task=TASK, patch=patch)
            result = await env.client.execute_workflow(RegradeRollout.run, regrade, id=workflow_id, task_queue=queue)
            assert (result.workflow_id, result.original_workflow_id, result.instance_id) == (workflow_id, original, "calc")
            assert (result.status, result.abort_reason, result.evaluation) == ("aborted", "exception:PatchUnreadable", None)
