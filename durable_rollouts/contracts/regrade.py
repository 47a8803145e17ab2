"""Re-grading a finished rollout's kept patch with the current graders, without running its agent again.

``workflows.regrade_rollout`` grades one patch; ``durable_rollouts.trainer_client.regrade_runs``
(``starter.py regrade``) finds a run's rollouts, starts one re-grade per kept
patch and writes one ``RegradeRow`` per re-graded rollout.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.tasks import TaskSpec


class RegradeInput(BaseModel):
    """``task``: the original rollout's task, or that task with a dataset's current grader spec;
    ``patch``: the rollout's kept patch (``DiffReport.kept_patch``), a payload like any other."""

    original_workflow_id: str
    task: TaskSpec
    patch: str
    eval_timeout_s: int = Field(600, ge=1)


class RegradeResult(BaseModel):
    """Always returned (never a workflow failure): ``completed`` with the new evaluation, or ``aborted`` with why
    the grading failed (``abort_reason``, the rollout's reasons)."""

    workflow_id: str
    original_workflow_id: str
    instance_id: str
    status: Literal["completed", "aborted"]
    abort_reason: str | None = None
    evaluation: EvalResult | None = None


class Verdict(BaseModel):
    """What a grading said: reward, solved, whether the patch applied, and how."""

    reward: float
    solved: bool
    applied_cleanly: bool
    apply_method: str = ""

    @classmethod
    def of(cls, evaluation: EvalResult) -> Verdict:
        return cls(
            reward=evaluation.reward,
            solved=evaluation.solved,
            applied_cleanly=evaluation.applied_cleanly,
            apply_method=evaluation.apply_method,
        )

    def differs_from(self, other: Verdict) -> bool:
        """Reward, solved or applied_cleanly differ (``apply_method`` says how a patch applied, not whether)."""
        return (self.reward, self.solved, self.applied_cleanly) != (other.reward, other.solved, other.applied_cleanly)


class RegradeRow(BaseModel):
    """One line of ``starter.py regrade``'s results file, naming the original rollout.

    ``workflow_id``: the re-grade's own id (``durable_rollouts.contracts.workflow_ids.regrade_workflow_id``), the line's
    key. ``status``: ``completed`` (``evaluation`` holds the new grading), ``aborted`` (the grading failed:
    ``abort_reason``) or ``failed`` (the starter could not start or collect the re-grade: ``abort_reason``, ``error``).
    ``original``: the original rollout's grading (None: it was never graded, e.g. stopped while grading). ``changed``:
    whether the new verdict differs from it (``Verdict.differs_from``); None when either is missing. ``grader_from``:
    ``dataset`` when ``--dataset`` supplied the grader spec, else ``rollout`` (the original task, graded by the worker's
    current code).
    """

    workflow_id: str
    original_workflow_id: str
    instance_id: str
    sample_index: int
    group_index: int
    status: Literal["completed", "aborted", "failed"]
    abort_reason: str | None = None
    error: str = ""
    original: Verdict | None = None
    evaluation: EvalResult | None = None
    changed: bool | None = None
    patch_bytes: int
    grader_from: Literal["rollout", "dataset"]
