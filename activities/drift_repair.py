"""The activities of ``DriftRepairEpisode``: sample, propose drift, break, propose repair, grade, collect.

``DriftEpisodeActivities`` is built once per worker with a ``RolePlayer``
(the adapter in production) and a ``ScriptRunner`` (a fresh Docker sandbox
per call in production); its bound methods are the activities, registered on
the shared queue (no host affinity: a role call opens and finishes its own
adapter session inside the activity, and every sandbox lives only inside the
call that booted it).

Scoring rules are in ``durable_rollouts.drift_repair.scoring``; the parsers, primitives
and baselines in their own modules. Non-retryable failures (``ApplicationError``
types): ``UnknownTask``, ``NoDrift`` (no primitive mutates the script),
``NoPolicyServer``, ``UnknownParser`` (the episode's model spec names a
parser ``durable_rollouts.policy.parsers`` does not know), ``SandboxImageMissing``, ``SandboxError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from temporalio import activity

from activities.activity_failures import SESSION_SETUP_FAILURES, Failure, Translation, application_error
from activities.error_types import ErrorType
from activities.sandbox import heartbeating
from durable_rollouts.contracts.agent_runs import MergeResult
from durable_rollouts.contracts.drift_repair import (
    BreakageRequest,
    BreakageRun,
    CollectRequest,
    DriftProposal,
    DriftRequest,
    DriftSpec,
    DriftTask,
    GradeRequest,
    RepairGrade,
    RepairProposal,
    RepairRequest,
    SampleRequest,
    SpecSource,
)
from durable_rollouts.contracts.tokens import SegmentSummary
from durable_rollouts.docker_sandbox.errors import SandboxError, SandboxGone, SandboxImageMissing
from durable_rollouts.drift_repair.baselines import baseline_drift, noop_repair, oracle_repair
from durable_rollouts.drift_repair.corpus import CORPUS_DIR, UnknownTask, load_corpus, sample_task
from durable_rollouts.drift_repair.parsers import SpecParseError, extract_diff, parse_drift_spec
from durable_rollouts.drift_repair.primitives import DriftSpecError, apply_spec
from durable_rollouts.drift_repair.prompts import drift_prompt, repair_prompt
from durable_rollouts.drift_repair.roles import RolePlayer
from durable_rollouts.drift_repair.scoring import grade_not_applied, grade_runs, judge_breakage
from durable_rollouts.drift_repair.script_runner import ScriptRunner
from durable_rollouts.drift_repair.unified_diff import DiffError, apply_diff
from durable_rollouts.policy.trajectory_packing import pack_trajectory, unpack_trajectory

T = TypeVar("T")
SANDBOX_FAILURES = Translation(
    Failure(SandboxImageMissing, ErrorType.SANDBOX_IMAGE_MISSING),
    Failure(SandboxGone, ErrorType.SANDBOX_GONE, retryable=True),
    Failure(SandboxError, ErrorType.SANDBOX_ERROR),
)


async def _heartbeating(work: Awaitable[T], phase: str) -> T:
    """Heartbeat while ``work`` runs, so a workflow's cancel (guard, abort) reaches the activity."""
    async with heartbeating(lambda: {"phase": phase}, interval_s=2.0):
        return await work


async def _runs(work: Awaitable[T], phase: str) -> T:
    """Run sandbox work; map sandbox failures to ``ApplicationError`` types the workflow understands."""
    try:
        return await _heartbeating(work, phase)
    except SANDBOX_FAILURES.handled as error:
        raise SANDBOX_FAILURES(error) from error


async def _playing(work: Awaitable[T], phase: str) -> T:
    """Play a policy role, heartbeating; a worker and rollout with no policy server is ``NoPolicyServer``, a
    spec naming an unknown parser ``UnknownParser``."""
    try:
        return await _heartbeating(work, phase)
    except SESSION_SETUP_FAILURES.handled as error:
        raise SESSION_SETUP_FAILURES(error) from None


def _baseline(task: DriftTask, seed: int) -> tuple[DriftSpec, str, int]:
    """The seeded baseline drift; a task it cannot drift is ``NoDrift`` (the activity error)."""
    try:
        spec = baseline_drift(task.script, seed, task.category)
    except DriftSpecError as error:
        raise application_error(error, ErrorType.NO_DRIFT) from None
    broken = apply_spec(task.script, spec)
    return spec, broken.script, broken.sites


class DriftEpisodeActivities:
    def __init__(self, roles: RolePlayer, runner: ScriptRunner, corpus_dir: Path = CORPUS_DIR):
        self.roles = roles
        self.runner = runner
        self.corpus_dir = corpus_dir

    @activity.defn(name="sample_drift_task")
    async def sample_drift_task(self, request: SampleRequest) -> DriftTask:
        try:
            return sample_task(load_corpus(self.corpus_dir), request)
        except UnknownTask as error:
            raise application_error(error, ErrorType.UNKNOWN_TASK) from None

    @activity.defn(name="propose_drift")
    async def propose_drift(self, request: DriftRequest) -> DriftProposal:
        """``model``: the policy's spec, or the seeded baseline's when it cannot be parsed or applied (``fallback``)."""
        task = request.task
        if request.policy == "noop":
            return DriftProposal(spec=None, spec_source="noop", broken_script=task.script)
        if request.policy == "baseline":
            spec, broken, sites = _baseline(task, request.seed)
            return DriftProposal(spec=spec, spec_source="baseline", broken_script=broken, changed_sites=sites)
        turn = await _playing(
            self.roles.play("drift", drift_prompt(task), request.model, request.workflow_id), "drift role"
        )
        source: SpecSource = "model"
        error = ""
        try:
            spec = parse_drift_spec(turn.completion)
            applied = apply_spec(task.script, spec)
            broken, sites = applied.script, applied.sites
        except (SpecParseError, DriftSpecError) as problem:
            source, error = "fallback", str(problem)
            spec, broken, sites = _baseline(task, request.seed)
        return DriftProposal(
            spec=spec, spec_source=source, spec_error=error, broken_script=broken, changed_sites=sites, role=turn
        )

    @activity.defn(name="run_breakage")
    async def run_breakage(self, request: BreakageRequest) -> BreakageRun:
        """Run the broken script on the visible input in its own sandbox; valid iff it fails."""
        task = request.task
        outcomes = await _runs(
            self.runner.run(
                request.broken_script,
                [task.visible.stdin],
                request.run_timeout_s,
                workflow_id=request.workflow_id,
                instance_id=task.task_id,
                image=request.image,
            ),
            "breaking",
        )
        return judge_breakage(outcomes[0], request.run_timeout_s)

    @activity.defn(name="propose_repair")
    async def propose_repair(self, request: RepairRequest) -> RepairProposal:
        task = request.task
        if request.policy == "noop":
            return RepairProposal(diff=noop_repair(), source="noop")
        if request.policy == "oracle":
            return RepairProposal(diff=oracle_repair(request.broken_script, task.script), source="oracle")
        prompt = repair_prompt(task, request.broken_script, request.error_trace)
        turn = await _playing(self.roles.play("repair", prompt, request.model, request.workflow_id), "repair role")
        return RepairProposal(diff=extract_diff(turn.completion), source="model", role=turn)

    @activity.defn(name="grade_repair")
    async def grade_repair(self, request: GradeRequest) -> RepairGrade:
        """Apply the diff to the broken script, then run the visible and held-out inputs in a fresh sandbox."""
        task = request.task
        try:
            repaired = apply_diff(request.broken_script, request.diff)
        except DiffError as error:
            return grade_not_applied(task, str(error))
        stdins = [task.visible.stdin, *(case.stdin for case in task.held_out)]
        outcomes = await _runs(
            self.runner.run(
                repaired,
                stdins,
                request.run_timeout_s,
                workflow_id=request.workflow_id,
                instance_id=task.task_id,
                image=request.image,
            ),
            "grading",
        )
        return grade_runs(task, outcomes)

    @activity.defn(name="collect_role_segments")
    async def collect_role_segments(self, request: CollectRequest) -> MergeResult:
        """One trajectory for the episode: the role segments in the order given (drift, then repair)."""
        segments = [s for packed in request.trajectories for s in await asyncio.to_thread(unpack_trajectory, packed)]
        trajectory = await asyncio.to_thread(pack_trajectory, segments)
        return MergeResult(
            trajectory=trajectory, segments=[SegmentSummary.of(s) for s in segments], turns=len(segments)
        )
