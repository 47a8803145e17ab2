"""A rollout workflow's input, its progress as queries show it, and its result.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.contracts.grading import DiffReport, EvalResult
from durable_rollouts.contracts.sandboxes import DEFAULT_PULL_TIMEOUT_S, ImagePull
from durable_rollouts.contracts.session import FinishReport, PolicySpec, StalenessReport
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.tokens import PackedTrajectory, SegmentSummary
from durable_rollouts.contracts.weight_versions import collapse_runs, order_weight_versions

RolloutStage = Literal["queued", "booting", "agent", "diff", "grading", "merging", "done"]


class RolloutInput(BaseModel):
    task: TaskSpec
    sample_index: int = 0
    group_index: int = 0
    policy: PolicySpec = PolicySpec()
    agent_budget_s: int = Field(1800, ge=1)
    eval_timeout_s: int = Field(600, ge=1)
    pull_timeout_s: int = Field(DEFAULT_PULL_TIMEOUT_S, ge=1)
    guard_s: int = Field(3180, ge=1)
    max_agent_attempts: int = Field(3, ge=1)
    host_start_timeout_s: int = Field(10, ge=1)
    resume_window_s: int = Field(120, ge=1)


class AgentProgress(BaseModel):
    """Sent by the running agent activity to its workflow (signal ``agent_progress``) when turns advance."""

    attempt: int
    session_id: str
    turns: int
    tokens: int
    last_turn_at: datetime | None = None
    last_tools: list[str] = []
    oldest_weight_version: str | None = None
    newest_weight_version: str | None = None
    # Output tokens the policy sampled over the session's turns (what an abandoned run throws away).
    sampled_tokens: int = 0


class DiscardedRun(BaseModel):
    """An agent run the rollout abandoned for a fresh one: its attempt, how far it had got (model turns, sampled
    tokens: work thrown away, never trained on) and why (``reason``: the host was lost, its session could not be
    resumed, ...)."""

    attempt: int
    turns: int
    sampled_tokens: int
    reason: str


class RolloutProgress(BaseModel):
    """What the ``progress`` query returns: where a rollout is and how far its agent got."""

    stage: RolloutStage = "queued"
    attempt: int = 0
    sandbox: str = ""
    host_queue: str = ""
    session_id: str = ""
    turns: int = 0
    tokens: int = 0
    last_turn_at: datetime | None = None
    last_tools: list[str] = []
    stage_since: datetime | None = None
    oldest_weight_version: str | None = None
    newest_weight_version: str | None = None
    # Output tokens sampled over the attempt's turns so far.
    sampled_tokens: int = 0
    # The task image's pull while the attempt boots on a host that lacks it (None once booted, or when none ran).
    image_pull: ImagePull | None = None


class RolloutResult(BaseModel):
    """The workflow always returns one (never a workflow failure): ``completed`` or ``aborted`` with a machine-readable
    reason.

    ``failed`` is made only by the starter, for a rollout it could not start or
    collect (``abort_reason`` says why, machine-readable; ``error`` has the
    message); the workflow may still be running, and a re-run with the same
    run id attaches to it. ``diff`` reports the agent's patch (what it left
    out, whether it was over the cap); None when no diff was taken.
    ``stopped_in`` / ``turns``: the stage a guard, abort or cancel stopped
    the run in, and the model calls its last attempt had made by then.
    ``finish``: what finishing the adapter session found in flight (turns
    waited for, turns aborted; ``FinishReport``), None when no merge ran.
    ``discarded``: the agent runs abandoned for a fresh attempt (``DiscardedRun``:
    turns and sampled tokens thrown away, and why), empty when none was; the
    interruptions the kept run lived through are ``agent.interruptions``.

    Weight versions, over the sampled tokens of all ``segments`` (in segment
    order, each in position order; tokens without a version skipped):
    ``oldest_weight_version`` and ``newest_weight_version`` (ordered as
    integers when every version is one, else by first appearance; None when
    no token has a version) and ``weight_version_changes``, the number of
    times the version differs from the one before.
    """

    workflow_id: str
    instance_id: str
    sample_index: int
    group_index: int
    status: Literal["completed", "aborted", "failed"]
    abort_reason: str | None = None
    error: str = ""
    reward: float = 0.0
    solved: bool = False
    applied_cleanly: bool = False
    attempts: int = 0
    agent: AgentRun | None = None
    evaluation: EvalResult | None = None
    trajectory: PackedTrajectory | None = None
    segments: list[SegmentSummary] = []
    elapsed_s: float = 0.0
    diff: DiffReport | None = None
    staleness: StalenessReport | None = None
    stopped_in: RolloutStage | None = None
    turns: int = 0
    finish: FinishReport | None = None
    discarded: list[DiscardedRun] = []

    def _weight_version_runs(self) -> list[str]:
        return collapse_runs(v for segment in self.segments for v in segment.weight_version_runs)

    def without_logs(self) -> RolloutResult:
        """This result with its agent and grading logs left empty (their sizes and tails stay): what a group's
        result holds of each sample, so K samples' logs never add up in one payload; each child's own result
        keeps them."""
        return self.model_copy(
            update={
                "agent": self.agent.model_copy(update={"log": ""}) if self.agent else None,
                "evaluation": self.evaluation.model_copy(update={"log": ""}) if self.evaluation else None,
            }
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def oldest_weight_version(self) -> str | None:
        order = order_weight_versions(self._weight_version_runs())
        return order[0] if order else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def newest_weight_version(self) -> str | None:
        order = order_weight_versions(self._weight_version_runs())
        return order[-1] if order else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def weight_version_changes(self) -> int:
        return max(len(self._weight_version_runs()) - 1, 0)
