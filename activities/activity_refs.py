"""Typed references to every activity the workflows schedule: name, argument and result types.

Workflows pass these to ``workflow.execute_activity`` instead of string
names, so the activity type and the result type come from one signature.
Each is an ``@activity.defn`` stub that only the workflow side uses; the
worker registers the real implementations (``RolloutHost``, the sandbox and
grading faces, ``DriftEpisodeActivities``) under the same names with the same
argument and result types, which ``tests/activities/test_activity_refs.py`` checks
against the lists ``worker.activity_lists`` returns. This module imports only
temporalio and the contracts, so the workflow sandbox never loads docker,
aiohttp or transformers through it. The names are recorded in workflow
histories: they never change.
"""

from __future__ import annotations

from temporalio import activity

from durable_rollouts.contracts.agent_runs import AgentRun, AgentRunRequest, MergeRequest, MergeResult
from durable_rollouts.contracts.drift_repair import (
    BreakageRequest,
    BreakageRun,
    CollectRequest,
    DriftProposal,
    DriftRequest,
    DriftTask,
    GradeRequest,
    RepairGrade,
    RepairProposal,
    RepairRequest,
    SampleRequest,
)
from durable_rollouts.contracts.grading import CapturedDiff, EvalRequest, EvalResult
from durable_rollouts.contracts.image_prefetch import Prefetched, PrefetchRequest
from durable_rollouts.contracts.sandboxes import PickRequest, SandboxHandle, SandboxRequest


class StubCalled(RuntimeError):
    """A signature stub ran: the worker registered a stub instead of the implementation."""


def _stub(name: str) -> StubCalled:
    return StubCalled(f"activity {name!r} is a signature stub; the worker registers its implementation")


@activity.defn
async def pick_host(request: PickRequest | None = None) -> str:
    raise _stub("pick_host")


@activity.defn
async def prefetch_image(request: PrefetchRequest) -> Prefetched:
    raise _stub("prefetch_image")


@activity.defn
async def boot_sandbox(request: SandboxRequest) -> SandboxHandle:
    raise _stub("boot_sandbox")


@activity.defn
async def run_claude_code(request: AgentRunRequest) -> AgentRun:
    raise _stub("run_claude_code")


@activity.defn
async def capture_diff(handle: SandboxHandle) -> CapturedDiff:
    raise _stub("capture_diff")


@activity.defn
async def destroy_sandbox(handle: SandboxHandle) -> None:
    raise _stub("destroy_sandbox")


@activity.defn
async def evaluate(request: EvalRequest) -> EvalResult:
    raise _stub("evaluate")


@activity.defn
async def merge_segments(request: MergeRequest) -> MergeResult:
    raise _stub("merge_segments")


@activity.defn
async def discard_session(session_id: str) -> None:
    raise _stub("discard_session")


@activity.defn
async def sample_drift_task(request: SampleRequest) -> DriftTask:
    raise _stub("sample_drift_task")


@activity.defn
async def propose_drift(request: DriftRequest) -> DriftProposal:
    raise _stub("propose_drift")


@activity.defn
async def run_breakage(request: BreakageRequest) -> BreakageRun:
    raise _stub("run_breakage")


@activity.defn
async def propose_repair(request: RepairRequest) -> RepairProposal:
    raise _stub("propose_repair")


@activity.defn
async def grade_repair(request: GradeRequest) -> RepairGrade:
    raise _stub("grade_repair")


@activity.defn
async def collect_role_segments(request: CollectRequest) -> MergeResult:
    raise _stub("collect_role_segments")


WORKFLOW_ACTIVITIES = (
    pick_host,
    prefetch_image,
    boot_sandbox,
    run_claude_code,
    capture_diff,
    destroy_sandbox,
    evaluate,
    merge_segments,
    discard_session,
    sample_drift_task,
    propose_drift,
    run_breakage,
    propose_repair,
    grade_repair,
    collect_role_segments,
)


def name_of(ref: object) -> str:
    """The activity type name of a reference (what histories record and fakes register under)."""
    name = activity._Definition.must_from_callable(ref).name  # type: ignore[arg-type]
    assert name, f"{ref!r} has no activity name"
    return name
