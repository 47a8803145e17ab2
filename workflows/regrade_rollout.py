"""RegradeRollout: a finished rollout's kept patch graded again, in a fresh grading sandbox, by the current graders.

``evaluate`` of the patch the input carries (its own clean sandbox booted from the task image, with the rollout's
timeouts and retry rules). No agent runs; the original rollout and its
result are left as they are.

Invariants:
* the result always comes back (never a workflow failure) and names the
  original rollout: ``completed`` with the new evaluation, or ``aborted``
  with the reason the rollout would give the failed activity
  (``workflows.activity_errors``);
* one re-grade per id (``durable_rollouts.contracts.workflow_ids.regrade_workflow_id``: a
  regrade id and the original id), so starting it again attaches to it and
  a new regrade id grades again;
* a cancelled re-grade waits for its grade to end, so the grading sandbox
  is gone when the result is;
* activities are scheduled through ``activities.activity_refs`` and the
  module imports only temporalio, the contracts, the references and the
  rollout's grading rules.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

from workflows.activity_errors import abort_reason
from workflows.coding_agent_rollout import CLASSIFIED_ERRORS, GRADING_HEARTBEAT_TIMEOUT, GRADING_OVERHEAD, GRADING_RETRY

with workflow.unsafe.imports_passed_through():
    from activities import activity_refs as refs
    from durable_rollouts.contracts.grading import EvalRequest, EvalResult
    from durable_rollouts.contracts.regrade import RegradeInput, RegradeResult


@workflow.defn
class RegradeRollout:
    @workflow.run
    async def run(self, regrade: RegradeInput) -> RegradeResult:
        workflow_id = workflow.info().workflow_id
        request = EvalRequest(
            task=regrade.task, diff=regrade.patch, workflow_id=workflow_id, timeout_s=regrade.eval_timeout_s
        )
        try:
            evaluation = await workflow.execute_activity(
                refs.evaluate,
                request,
                start_to_close_timeout=timedelta(seconds=request.timeout_s + request.pull_timeout_s) + GRADING_OVERHEAD,
                heartbeat_timeout=GRADING_HEARTBEAT_TIMEOUT,
                retry_policy=GRADING_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"grade {regrade.original_workflow_id}'s patch in a fresh sandbox",
            )
        except ActivityError as error:
            return _result(regrade, None, abort_reason(error, CLASSIFIED_ERRORS))
        return _result(regrade, evaluation, None)


def _result(regrade: RegradeInput, evaluation: EvalResult | None, reason: str | None) -> RegradeResult:
    return RegradeResult(
        workflow_id=workflow.info().workflow_id,
        original_workflow_id=regrade.original_workflow_id,
        instance_id=regrade.task.instance_id,
        status="aborted" if reason else "completed",
        abort_reason=reason,
        evaluation=evaluation,
    )
