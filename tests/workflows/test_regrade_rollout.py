"""RegradeRollout on Temporal's time-skipping test server: the patch the input carries (a payload like any other,
however large) is what gets graded, and the result, graded or aborted, names the original rollout."""

from __future__ import annotations

import uuid

import pytest
from temporalio import activity
from temporalio.worker import Worker

from activities import activity_refs as refs
from activities.activity_refs import name_of
from activities.evaluate import GradingActivities
from durable_rollouts.contracts.grading import EvalRequest, EvalResult
from durable_rollouts.contracts.regrade import RegradeInput
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.workflow_ids import regrade_workflow_id
from workflows.regrade_rollout import RegradeRollout

pytestmark = pytest.mark.asyncio(loop_scope="session")
TASK = TaskSpec(instance_id="calc", image="img", workdir="/w", problem_statement="p", eval_cmd="true")
# Past the payload folder's threshold (256 KiB), so external storage carries it; non-ASCII lines too.
PATCH = "diff --git a/x b/x\n+café 🦀\n" + "".join(f"+line {n}\n" for n in range(40_000))


async def test_the_patch_in_the_input_is_graded_and_the_result_names_the_original(env):
    graded: list[EvalRequest] = []

    @activity.defn(name=name_of(refs.evaluate))
    async def evaluate(request: EvalRequest) -> EvalResult:
        graded.append(request)
        return EvalResult(reward=1.0, solved=True, applied_cleanly=True, grader="eval_cmd", log="graded\n", log_bytes=7)

    assert len(PATCH.encode()) > 256 * 1024
    queue = f"regrade-{uuid.uuid4().hex[:6]}"
    original = "rollout-r-calc-0-0"
    workflow_id = regrade_workflow_id(uuid.uuid4().hex[:6], original)
    async with Worker(env.client, task_queue=queue, workflows=[RegradeRollout], activities=[evaluate]):
        regrade = RegradeInput(original_workflow_id=original, task=TASK, patch=PATCH, eval_timeout_s=77)
        result = await env.client.execute_workflow(RegradeRollout.run, regrade, id=workflow_id, task_queue=queue)
    assert [(r.diff, r.task, r.workflow_id, r.timeout_s) for r in graded] == [(PATCH, TASK, workflow_id, 77)], (
        "graded once, on the kept patch"
    )
    assert (result.workflow_id, result.original_workflow_id, result.instance_id) == (workflow_id, original, "calc")
    assert (result.status, result.abort_reason) == ("completed", None)
    assert result.evaluation is not None and (result.evaluation.solved, result.evaluation.log) == (True, "graded\n")


async def test_a_grading_that_cannot_run_aborts_the_regrade_and_still_names_the_original(env, sandboxes):
    grading = GradingActivities(sandboxes)
    queue = f"regrade-{uuid.uuid4().hex[:6]}"
    original = "rollout-r-calc-1-0"
    workflow_id = regrade_workflow_id(uuid.uuid4().hex[:6], original)
    no_grader = TASK.model_copy(update={"eval_cmd": None})
    assert no_grader.grader is None
    async with Worker(env.client, task_queue=queue, workflows=[RegradeRollout], activities=[grading.evaluate]):
        regrade = RegradeInput(original_workflow_id=original, task=no_grader, patch="diff --git a/y b/y\n")
        result = await env.client.execute_workflow(RegradeRollout.run, regrade, id=workflow_id, task_queue=queue)
    assert (result.workflow_id, result.original_workflow_id, result.instance_id) == (workflow_id, original, "calc")
    assert (result.status, result.abort_reason, result.evaluation) == ("aborted", "no_grader", None)
