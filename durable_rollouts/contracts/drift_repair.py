"""Pydantic contracts of the drift → repair episodes (workflow ``DriftRepairEpisode`` and its activities).

Like the other contracts this imports nothing heavier than pydantic, so
the workflow imports it through ``workflow.unsafe.imports_passed_through()``.

Vocabulary: a *task* is a small deterministic script with a visible input and
held-out inputs, each with its expected stdout. The *drift* role proposes a
breakage spec (a primitive and its parameters); the *repair* role answers the
broken script and its error trace with a unified diff.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.contracts.tokens import PackedTrajectory, SegmentSummary

Difficulty = Literal["easy", "medium", "hard"]
DriftCategory = Literal["api_rename", "kwarg_change", "import_move", "argument_order", "attribute_change"]
DriftPolicy = Literal["model", "baseline", "noop"]
RepairPolicy = Literal["model", "oracle", "noop"]
Role = Literal["drift", "repair"]
SpecSource = Literal["model", "baseline", "fallback", "noop"]
EpisodeStage = Literal["queued", "sampling", "drift", "breaking", "repair", "grading", "merging", "done"]
DEFAULT_IMAGE = "rollout-base:bookworm"
SCRIPT_NAME = "script.py"


class IOCase(BaseModel):
    """One input (fed on stdin) and the stdout the original script prints for it."""

    stdin: str
    expected_stdout: str


class DriftTask(BaseModel):
    """A corpus entry. ``held_out`` cases are never shown to either role."""

    task_id: str
    difficulty: Difficulty
    category: DriftCategory
    versions: dict[str, str]
    script: str
    visible: IOCase
    held_out: list[IOCase] = Field(min_length=1)


class DriftSpec(BaseModel):
    """A breakage: which primitive and its parameters (validated by the primitive itself)."""

    model_config = ConfigDict(extra="forbid")

    primitive_type: str
    params: dict[str, Any] = {}


class RunOutcome(BaseModel):
    """One run of a script on one input. ``exit_code`` is negative when a signal ended it; output is tail-capped."""

    exit_code: int
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0

    @property
    def ran(self) -> bool:
        """Exited 0 within its time limit."""
        return self.exit_code == 0 and not self.timed_out


class RoleTurn(BaseModel):
    """One role call through the token-capturing policy client (one adapter session, one turn, one segment)."""

    role: Role
    session_id: str
    system_prompt: str
    user_prompt: str
    completion: str
    reasoning: str = ""
    finish_reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    trajectory: PackedTrajectory | None = None
    segment: SegmentSummary | None = None


class SampleRequest(BaseModel):
    """``task_id`` wins; otherwise a task of ``difficulty`` (any if None) is picked by ``seed``."""

    task_id: str | None = None
    difficulty: Difficulty | None = None
    seed: int = 0


class DriftRequest(BaseModel):
    task: DriftTask
    policy: DriftPolicy
    seed: int
    workflow_id: str
    model: PolicySpec = PolicySpec()


class DriftProposal(BaseModel):
    """The spec actually applied and where it came from.

    ``spec_source``: ``model`` (the policy's answer parsed and mutated the
    script), ``fallback`` (it did not: ``spec_error`` says why, and the seeded
    baseline's spec for the task's category was applied instead), ``baseline``
    or ``noop`` (no spec, the script is unchanged).
    """

    spec: DriftSpec | None
    spec_source: SpecSource
    spec_error: str = ""
    broken_script: str
    changed_sites: int = 0
    role: RoleTurn | None = None


class BreakageRequest(BaseModel):
    task: DriftTask
    broken_script: str
    workflow_id: str
    run_timeout_s: float = Field(5.0, gt=0)
    image: str = DEFAULT_IMAGE


class BreakageRun(BaseModel):
    """``valid`` iff the broken script does not run on the visible input (non-zero exit or timeout)."""

    valid: bool
    outcome: RunOutcome
    error_trace: str


class RepairRequest(BaseModel):
    task: DriftTask
    broken_script: str
    error_trace: str
    policy: RepairPolicy
    workflow_id: str
    model: PolicySpec = PolicySpec()


class RepairProposal(BaseModel):
    """The diff to grade (``""`` is the empty patch) and the role turn that produced it, if any."""

    diff: str
    source: RepairPolicy
    role: RoleTurn | None = None


class GradeRequest(BaseModel):
    task: DriftTask
    broken_script: str
    diff: str
    workflow_id: str
    run_timeout_s: float = Field(5.0, gt=0)
    image: str = DEFAULT_IMAGE


class VisibleBreakdown(BaseModel):
    """The visible input's run after the repair; ``output_matches`` and ``quiet`` count only if it ``ran``."""

    applied: bool = False
    ran: bool = False
    output_matches: bool = False
    quiet: bool = False
    timed_out: bool = False
    exit_code: int | None = None


class HeldOutBreakdown(BaseModel):
    """Counts over the held-out cases; ``executed_cleanly`` iff every case ran and printed its expected output."""

    cases: int = 0
    ran: int = 0
    correct: int = 0
    timed_out: int = 0
    noisy: int = 0
    executed_cleanly: bool = False


class RepairGrade(BaseModel):
    applied_cleanly: bool
    apply_error: str = ""
    reward: float
    visible: VisibleBreakdown
    held_out: HeldOutBreakdown
    success: bool
    log_tail: str = ""


class RoleRewards(BaseModel):
    drift: float = 0.0
    repair: float = 0.0


class EpisodeInput(BaseModel):
    """One episode. ``task_id`` pins the task (a GRPO group shares it); else one is sampled by ``seed``."""

    task_id: str | None = None
    difficulty: Difficulty | None = None
    seed: int = 0
    group_index: int = 0
    sample_index: int = 0
    drift_policy: DriftPolicy = "baseline"
    repair_policy: RepairPolicy = "oracle"
    model: PolicySpec = PolicySpec()
    drift_reward: str = "breaks_and_survives"
    run_timeout_s: float = Field(5.0, gt=0)
    role_timeout_s: int = Field(600, ge=1)
    guard_s: int = Field(1200, ge=1)
    image: str = DEFAULT_IMAGE


class EpisodeProgress(BaseModel):
    """What the ``progress`` query returns."""

    stage: EpisodeStage = "queued"
    stage_since: datetime | None = None
    task_id: str = ""
    primitive: str = ""


class EpisodeResult(BaseModel):
    """Always returned (never a workflow failure): ``completed`` or ``aborted`` with a machine-readable reason.

    ``failed`` is made only by the starter, as for ``RolloutResult``.
    ``reward`` is the repair role's (the visible reward), ``success`` the
    held-out ``executed_cleanly``; ``segments`` lists the role segments in
    play order (drift, then repair) for the roles the model played.
    """

    workflow_id: str
    task_id: str = ""
    difficulty: Difficulty | None = None
    category: DriftCategory | None = None
    group_index: int = 0
    sample_index: int = 0
    status: Literal["completed", "aborted", "failed"]
    abort_reason: str | None = None
    error: str = ""
    drift_policy: DriftPolicy
    repair_policy: RepairPolicy
    spec: DriftSpec | None = None
    spec_source: SpecSource | None = None
    spec_error: str = ""
    breakage_valid: bool = False
    error_trace: str = ""
    diff: str = ""
    reward: float = 0.0
    breakdown: VisibleBreakdown = VisibleBreakdown()
    held_out: HeldOutBreakdown = HeldOutBreakdown()
    success: bool = False
    applied_cleanly: bool = False
    role_rewards: RoleRewards = RoleRewards()
    drift_role: RoleTurn | None = None
    repair_role: RoleTurn | None = None
    trajectory: PackedTrajectory | None = None
    segments: list[SegmentSummary] = []
    info: dict[str, Any] = {}
    elapsed_s: float = 0.0


class CollectRequest(BaseModel):
    """Role trajectories (one segment each) to merge, in order, under ``workflow_id``."""

    workflow_id: str
    trajectories: list[PackedTrajectory]
