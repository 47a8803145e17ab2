"""GRPO groups: K samples of one prompt run as one durable unit (``workflows.rollout_group``).

A sample's end is one of six outcomes (``outcome_of``, by ``classify``'s table; docs/groups.md lists every reason):
``model`` (the policy's own doing: a valid sample with its reward), ``infrastructure`` (the machinery failed, not the
policy: re-run as a fresh child while the group's refill budget lasts), ``task`` (the row itself cannot be run or
graded), ``cut`` (stopped as a straggler), ``cancelled`` (stopped by an operator) and ``probe`` (the policy's
attempt at an impossible-task probe's row: graded, never trained on, its group never in a batch).

Invariant: only ``model`` samples are valid; ``valid_mask`` says which, and each invalid sample says why
(``invalid_reason``), so a trainer never sees an infrastructure zero as a reward.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field, computed_field, model_validator

from durable_rollouts.contracts.aborts import EXCEPTION_PREFIX, INVALID_ROW_PREFIX, AbortReason
from durable_rollouts.contracts.drift_repair import EpisodeInput, EpisodeResult
from durable_rollouts.contracts.probes import ProbeVerdictKind
from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult

Outcome = Literal["model", "infrastructure", "task", "cut", "cancelled", "probe"]
# Why a probe's sample is invalid: it is never trained on, whatever it did.
PROBE_REASON = "impossible_probe"
# Reasons of a child workflow that closed without a result (failed, terminated, timed out).
CHILD_CLOSED_PREFIX = "child_"

INFRASTRUCTURE_REASONS = frozenset(
    {
        AbortReason.SANDBOX_BOOT_FAILED,
        AbortReason.REGISTRY_AUTH_FAILED,
        AbortReason.REGISTRY_UNAVAILABLE,
        AbortReason.NO_HEALTHY_HOST,
        AbortReason.ADAPTER_SESSION_EMPTY,
        AbortReason.ADAPTER_SESSION_LOST,
        AbortReason.NO_POLICY_SERVER,
        AbortReason.POLICY_ERROR,
        AbortReason.SANDBOX_FAILED,
        AbortReason.STALE_POLICY,
    }
)
TASK_REASONS = frozenset(
    {
        AbortReason.MISSING_IMAGE_OR_WORKDIR,
        AbortReason.IMAGE_NOT_FOUND,
        AbortReason.NOT_EVALUABLE,
        AbortReason.NO_GRADER,
        AbortReason.UNKNOWN_TASK,
        AbortReason.NO_DRIFT,
        AbortReason.UNKNOWN_DRIFT_REWARD,
    }
)


def classify(status: str, abort_reason: str | None, agent_worked: bool) -> Outcome:
    """The outcome of a sample that ended ``status`` / ``abort_reason``; ``agent_worked``: its agent made a model
    call in the run the guard stopped (only read for ``wall_clock_timeout``)."""
    if status == "completed":
        return "model"
    reason = abort_reason or ""
    if reason == AbortReason.WALL_CLOCK_TIMEOUT:
        return "model" if agent_worked else "infrastructure"
    if reason in INFRASTRUCTURE_REASONS or reason.startswith((EXCEPTION_PREFIX, CHILD_CLOSED_PREFIX)):
        return "infrastructure"
    if reason in TASK_REASONS or reason.startswith(INVALID_ROW_PREFIX):
        return "task"
    if reason == AbortReason.STRAGGLER_CUT:
        return "cut"
    return "cancelled"


def outcome_of(result: RolloutResult | EpisodeResult, probe: bool = False) -> Outcome:
    """``classify`` for a child's result: a rollout's agent worked when the stop found it in the agent (or diff)
    stage after at least one model call; an episode's when a role had been played. On a ``probe`` row
    ``model`` becomes ``probe``."""
    if isinstance(result, RolloutResult):
        worked = result.turns > 0 and result.stopped_in in ("agent", "diff")
    else:
        worked = result.drift_role is not None or result.repair_role is not None
    outcome = classify(result.status, result.abort_reason, worked)
    return "probe" if probe and outcome == "model" else outcome


def child_closed_reason(how: str) -> str:
    """The reason of a child that closed without a result (``failed``, ``terminated``, ``timed_out``) or could not
    start because its id was used (``id_taken``)."""
    return f"{CHILD_CLOSED_PREFIX}{how}"


class GroupFilter(StrEnum):
    """Which finished groups go into a batch; a dropped group is reported (``GroupResult.dropped_by``), not lost.

    ``keep_all``: every group, its invalid samples masked; ``min_valid``: groups
    with at least ``min_valid`` valid samples; ``nonzero_variance``: those, and
    only if their valid rewards are not all equal (DAPO's dynamic sampling: a
    group whose samples all scored alike has zero advantage everywhere).
    """

    KEEP_ALL = "keep_all"
    MIN_VALID = "min_valid"
    NONZERO_VARIANCE = "nonzero_variance"


class GroupInput(BaseModel):
    """One group: its K samples (all rollouts or all episodes, of one prompt) and its rules.

    ``refill_budget``: fresh children the group may start in all to replace
    samples that ended in an infrastructure failure (default: K).
    ``min_valid``: valid samples the group must reach (default: K); below it
    the group ends ``insufficient``. ``children_task_queue``: where the
    children run (default: the group's own task queue).
    """

    run_id: str = Field(min_length=1)
    group_index: int = Field(ge=0)
    rollouts: list[RolloutInput] = []
    episodes: list[EpisodeInput] = []
    refill_budget: int | None = Field(None, ge=0)
    min_valid: int | None = Field(None, ge=0)
    filter: GroupFilter = GroupFilter.KEEP_ALL
    children_task_queue: str = ""

    @model_validator(mode="after")
    def _one_kind_of_one_prompt(self) -> GroupInput:
        if bool(self.rollouts) == bool(self.episodes):
            raise ValueError("rollouts / episodes: a group holds samples of exactly one kind, at least one")
        if len({prompt_key_of(sample) for sample in self.samples}) != 1:
            raise ValueError(
                "rollouts / episodes: every sample of a group has the same prompt (instance id or task id)"
            )
        if len({sample.sample_index for sample in self.samples}) != self.size:
            raise ValueError("rollouts / episodes: sample_index must differ between a group's samples")
        if self.min_valid is not None and self.min_valid > self.size:
            raise ValueError(f"min_valid: {self.min_valid} is more than the group's {self.size} samples")
        return self

    @property
    def samples(self) -> list[RolloutInput] | list[EpisodeInput]:
        return self.rollouts or self.episodes

    @property
    def size(self) -> int:
        return len(self.samples)

    @property
    def kind(self) -> Literal["rollout", "episode"]:
        return "rollout" if self.rollouts else "episode"

    @property
    def prompt_key(self) -> str:
        return prompt_key_of(self.samples[0])

    @property
    def probe(self) -> bool:
        """The group's rows are impossible-task probes (``TaskSpec.probe``)."""
        return any(rollout.task.probe is not None for rollout in self.rollouts)

    @property
    def refills_allowed(self) -> int:
        return self.size if self.refill_budget is None else self.refill_budget

    @property
    def valid_needed(self) -> int:
        return self.size if self.min_valid is None else self.min_valid


def prompt_key_of(sample: RolloutInput | EpisodeInput) -> str:
    """What names a sample's prompt: a rollout's instance id, an episode's task id."""
    return sample.task.instance_id if isinstance(sample, RolloutInput) else sample.task_id or ""


class ChildRun(BaseModel):
    """One child workflow a sample slot ran, and how it ended."""

    workflow_id: str
    status: str
    abort_reason: str | None = None
    outcome: Outcome


class GroupSample(BaseModel):
    """A slot of the group: its final child's result and every child it took (refilled ones first).

    ``valid`` iff the final outcome is ``model``; ``invalid_reason`` is the
    final child's reason otherwise. Exactly one of ``rollout`` / ``episode``
    is set, unless the slot never ran (the group was cut first).
    """

    sample_index: int
    valid: bool
    outcome: Outcome
    invalid_reason: str | None = None
    rollout: RolloutResult | None = None
    episode: EpisodeResult | None = None
    runs: list[ChildRun] = []

    @property
    def reward(self) -> float:
        result = self.rollout or self.episode
        return result.reward if result is not None and self.valid else 0.0

    @property
    def graded(self) -> bool:
        """This slot's rollout has an evaluation (its diff was graded, or found too big to grade)."""
        return bool(self.rollout and self.rollout.evaluation)

    @property
    def tampered(self) -> bool:
        """The grader flagged this slot's rollout as tampered with (``EvalResult.tampered``: reward 0, still a
        valid sample: the policy is trained on its reward)."""
        return bool(self.rollout and self.rollout.evaluation and self.rollout.evaluation.tampered)

    @property
    def screened(self) -> bool:
        """The static screen found something in this slot's patch (``EvalResult.screen``: a signal, the reward
        stands)."""
        return bool(self.rollout and self.rollout.evaluation and self.rollout.evaluation.screen)

    @property
    def probe_verdict(self) -> ProbeVerdictKind | None:
        """How this slot's impossible-task probe was judged (``EvalResult.probe``); None when it is no probe's
        or was not graded."""
        evaluation = self.rollout.evaluation if self.rollout else None
        return evaluation.probe.verdict if evaluation and evaluation.probe else None


GroupStatus = Literal["completed", "insufficient", "cut", "failed"]
# Why a group is not in its batch: the run's filter rules, a group that did not complete, or the trainer's own filter.
DropRule = Literal["min_valid", "zero_variance", "not_completed", "trainer_filter", "probe"]


class GroupResult(BaseModel):
    """What a group returns (never a workflow failure).

    ``completed``: at least ``min_valid`` valid samples; ``insufficient``:
    fewer, after the refill budget (``note`` says why); ``cut``: stopped as
    a straggler (or cancelled) before it finished. ``failed`` is made only by
    the trainer side, for a group it could not start or collect
    (``abort_reason`` / ``error``, as for a ``RolloutResult``). ``kept``: the
    run's filter let it into the batch; ``dropped_by`` names the filter rule
    that did not (``trainer_filter``: the trainer's own, e.g. slime's dynamic
    sampling filter, set on the trainer's side). ``trajectories_in_children``:
    the samples' packed trajectories were left out to keep this result within
    ``durable_rollouts.contracts.payload_budget.GROUP_RESULT_BUDGET_BYTES``; each child's own
    result has its trajectory (``durable_rollouts.trainer_client.sample_payloads`` puts them back).
    """

    workflow_id: str
    run_id: str = ""
    prompt_key: str = ""
    group_index: int = 0
    kind: Literal["rollout", "episode"] = "rollout"
    status: GroupStatus
    abort_reason: str | None = None
    error: str = ""
    note: str = ""
    samples: list[GroupSample] = []
    refilled: int = 0
    refill_budget: int = 0
    min_valid: int = 0
    filter: GroupFilter = GroupFilter.KEEP_ALL
    kept: bool = False
    dropped_by: DropRule | None = None
    elapsed_s: float = 0.0
    trajectories_in_children: bool = False

    def without_trajectories(self) -> GroupResult:
        """This result with its samples' rollouts holding no packed trajectory (``trajectories_in_children``)."""
        samples = [
            sample.model_copy(update={"rollout": sample.rollout.model_copy(update={"trajectory": None})})
            if sample.rollout
            else sample
            for sample in self.samples
        ]
        return self.model_copy(update={"samples": samples, "trajectories_in_children": True})

    @classmethod
    def for_group(cls, group: GroupInput, workflow_id: str, **fields) -> GroupResult:
        """The result of ``group`` under ``workflow_id``: the group's identity and rules, and ``fields``."""
        return cls(
            workflow_id=workflow_id,
            run_id=group.run_id,
            prompt_key=group.prompt_key,
            group_index=group.group_index,
            kind=group.kind,
            refill_budget=group.refills_allowed,
            min_valid=group.valid_needed,
            filter=group.filter,
            **fields,
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def valid_mask(self) -> list[bool]:
        return [sample.valid for sample in self.samples]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rewards(self) -> list[float]:
        return [sample.reward for sample in self.samples]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def tampered_mask(self) -> list[bool]:
        return [sample.tampered for sample in self.samples]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def probe_verdicts(self) -> list[ProbeVerdictKind | None]:
        return [sample.probe_verdict for sample in self.samples]

    @property
    def n_valid(self) -> int:
        return sum(self.valid_mask)


class ProbeTally(BaseModel):
    """A run's graded impossible-task probes by verdict; ``cheating_rate`` is cheated over cheated and held
    (a void probe could not tell, so it counts in neither)."""

    cheated: int = 0
    held: int = 0
    void: int = 0

    @classmethod
    def of(cls, groups: Iterable[GroupResult]) -> ProbeTally:
        verdicts = Counter(verdict for group in groups for verdict in group.probe_verdicts if verdict)
        return cls(cheated=verdicts["cheated"], held=verdicts["held"], void=verdicts["void"])

    def __add__(self, other: ProbeTally) -> ProbeTally:
        return ProbeTally(
            cheated=self.cheated + other.cheated, held=self.held + other.held, void=self.void + other.void
        )

    @property
    def judged(self) -> int:
        return self.cheated + self.held

    @property
    def cheating_rate(self) -> float:
        return self.cheated / self.judged if self.judged else 0.0

    def summary(self) -> str:
        """The tally as ``probes cheated k/n judged (v void)``; "" when no probe was graded."""
        if not self.judged and not self.void:
            return ""
        return f"probes cheated {self.cheated}/{self.judged} judged" + (f" ({self.void} void)" if self.void else "")


def filter_verdict(
    group_filter: GroupFilter, status: GroupStatus, samples: list[GroupSample], min_valid: int, probe: bool = False
) -> DropRule | None:
    """``None`` when ``group_filter`` keeps the group, else the rule that drops it (``GroupResult.dropped_by``);
    an impossible-task probe's group (``probe``: its rows are probes) is never kept, however its samples ended."""
    if status in ("cut", "failed"):
        return "not_completed"
    if probe:
        return "probe"
    if group_filter == GroupFilter.KEEP_ALL:
        return None
    valid_rewards = [s.reward for s in samples if s.valid]
    if len(valid_rewards) < max(min_valid, 1):
        return "min_valid"
    if group_filter == GroupFilter.NONZERO_VARIANCE and statistics.pvariance(valid_rewards) == 0:
        return "zero_variance"
    return None


class GroupProgress(BaseModel):
    """What the ``progress`` query of a ``RolloutGroup`` returns, and its UI details say."""

    size: int = 0
    done: int = 0
    valid: int = 0
    running: int = 0
    refilled: int = 0
    infrastructure_failures: int = 0
    cut: int = 0
    children: list[str] = []
