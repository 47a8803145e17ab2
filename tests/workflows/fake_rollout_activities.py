"""Fake rollout activities under the real activity names, for the workflow tests on the time-skipping server.

``FakeCluster`` records every call; its behaviour knobs are plain attributes a
test sets, and a subclass may override any activity. Its agent and grading
return whole logs (``agent_log``, ``grading_log``) and its merge a real packed
trajectory of ``SEGMENT``, as the real activities do.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from activities import activity_refs as refs
from activities.activity_refs import name_of
from activities.error_types import ErrorType
from durable_rollouts.contracts.agent_runs import AgentRun, AgentRunRequest, MergeRequest, MergeResult
from durable_rollouts.contracts.grading import CapturedDiff, DiffReport, EvalRequest, EvalResult
from durable_rollouts.contracts.image_prefetch import Prefetched, PrefetchRequest
from durable_rollouts.contracts.probes import ProbeVerdict
from durable_rollouts.contracts.rollout_group import GroupInput
from durable_rollouts.contracts.rollouts import RolloutInput
from durable_rollouts.contracts.sandboxes import PickRequest, SandboxHandle, SandboxRequest
from durable_rollouts.contracts.session import FinishReport, StalenessReport
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.tokens import SegmentSummary, TokenSegment
from durable_rollouts.policy.trajectory_packing import pack_trajectory
from workflows.coding_agent_rollout import CodingAgentRollout

SHARED = "rollouts-test-shared"
LIVE = "rollouts-test-live"
DEAD = "rollouts-test-dead"
PATCH = "diff --git a/x b/x\n"
SEGMENT = TokenSegment(
    kind="main",
    tokens=list(range(10)),
    loss_mask=[0] * 4 + [1] * 6,
    rollout_log_probs=[0.0] * 4 + [-0.5] * 6,
    prompt_length=4,
    turns=3,
    finish_reason="stop",
)


class FakeCluster:
    """Fake activities; behaviour knobs are plain attributes set by each test."""

    def __init__(self):
        self.calls: list[str] = []
        self.host_queues = [LIVE]
        self.boot_failures: list[Exception] = []
        self.agent_hangs = False
        self.grading_hangs = False
        self.empty_session = False
        self.diff_report = DiffReport(patch_bytes=19)
        self.finish = FinishReport(waited=1, aborted=1, aborted_rids=["s1-2-abc"])
        self.staleness: StalenessReport | None = None
        self.agent_log = '{"type":"system"}\n{"type":"result","num_turns":3}\n'
        self.grading_log = "[apply]\n$ git apply --3way\napplied\n1 passed\n"
        self.graded_on: list[str] = []
        self.host_lost_before_grading: set[str] = set()

    @activity.defn(name=name_of(refs.pick_host))
    async def pick_host(self, request: PickRequest) -> str:
        self.calls.append("pick_host")
        return self.host_queues.pop(0) if len(self.host_queues) > 1 else self.host_queues[0]

    @activity.defn(name=name_of(refs.boot_sandbox))
    async def boot_sandbox(self, request: SandboxRequest) -> SandboxHandle:
        self.calls.append("boot_sandbox")
        if self.boot_failures:
            raise self.boot_failures.pop(0)
        return SandboxHandle(container_id="c1", name=f"box-{request.attempt}", workdir=request.task.workdir)

    @activity.defn(name=name_of(refs.run_claude_code))
    async def run_claude_code(self, request: AgentRunRequest) -> AgentRun:
        self.calls.append("run_claude_code")
        if self.agent_hangs:
            try:
                while True:
                    activity.heartbeat()
                    await asyncio.sleep(0.1)
            except asyncio.CancelledError:
                self.calls.append("agent_cancelled")
                raise
        return AgentRun(session_id="s1", exit_code=0, reason="completed", is_error=False, turns=3, log=self.agent_log)

    @activity.defn(name=name_of(refs.capture_diff))
    async def capture_diff(self, handle: SandboxHandle) -> CapturedDiff:
        self.calls.append("capture_diff")
        return CapturedDiff(diff=PATCH if not self.diff_report.over_cap else "", report=self.diff_report)

    @activity.defn(name=name_of(refs.destroy_sandbox))
    async def destroy_sandbox(self, handle: SandboxHandle) -> None:
        self.calls.append("destroy_sandbox")

    @activity.defn(name=name_of(refs.evaluate))
    async def evaluate(self, request: EvalRequest) -> EvalResult:
        self.calls.append("evaluate")
        self.graded_on.append(activity.info().task_queue)
        if activity.info().task_queue in self.host_lost_before_grading:
            raise ApplicationError("the worker shut down", type=ErrorType.WORKER_SHUTDOWN)
        try:
            while self.grading_hangs:
                activity.heartbeat()
                await asyncio.sleep(0.1)
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)  # the grading sandbox's removal takes a moment
            self.calls.append("grading_cancelled")
            raise
        log = self.grading_log
        return EvalResult(
            reward=1.0, solved=True, applied_cleanly=True, grader="eval_cmd", log=log, log_bytes=len(log.encode())
        )

    @activity.defn(name=name_of(refs.merge_segments))
    async def merge_segments(self, request: MergeRequest) -> MergeResult:
        self.calls.append("merge_segments")
        if self.empty_session:
            return MergeResult(trajectory=None, segments=[], turns=0)
        return MergeResult(
            trajectory=pack_trajectory([SEGMENT]),
            segments=[SegmentSummary.of(SEGMENT)],
            turns=3,
            staleness=self.staleness,
            finish=self.finish,
        )

    @activity.defn(name=name_of(refs.discard_session))
    async def discard_session(self, session_id: str) -> None:
        self.calls.append("discard_session")


def rollout(**overrides) -> RolloutInput:
    task = TaskSpec(instance_id="demo-1", image="img", workdir="/w", problem_statement="p", eval_cmd="true")
    return RolloutInput(task=task, host_start_timeout_s=2, **overrides)


def one_sample_groups(n: int, run_id: str) -> list[GroupInput]:
    """``n`` one-sample groups, one per instance ``p<g>``."""
    made = []
    for g in range(n):
        base = rollout()
        task = base.task.model_copy(update={"instance_id": f"p{g}"})
        made.append(
            GroupInput(
                run_id=run_id, group_index=g, rollouts=[base.model_copy(update={"task": task, "group_index": g})]
            )
        )
    return made


class FakePrefetchHost:
    """``prefetch_image`` of one host: pulls take a moment; ``busy`` images are refused once as ``PullsBusy``;
    ``missing`` ones are not in the registry."""

    def __init__(self, busy: set[str], missing: set[str]):
        self.busy, self.missing = busy, missing
        self.attempts: list[str] = []
        self.running = self.most_at_once = 0

    @activity.defn(name=name_of(refs.prefetch_image))
    async def prefetch_image(self, request: PrefetchRequest) -> Prefetched:
        self.attempts.append(request.image)
        if request.image in self.missing:
            raise ApplicationError(
                f"image {request.image} is not in registry r:5000",
                type=ErrorType.SANDBOX_IMAGE_MISSING,
                non_retryable=True,
            )
        if request.image in self.busy:
            self.busy.discard(request.image)
            raise ApplicationError("host-a already pulls 2 images ahead", type=ErrorType.PULLS_BUSY)
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        await asyncio.sleep(0.05)
        self.running -= 1
        return Prefetched(image=request.image, outcome="pulled", host_queue="host-a", seconds=0.05)


# Test workers send heartbeats (and so hear of a cancel) every half second: the SDK's default throttle, 80 % of
# the heartbeat timeout, would make every test that cancels a heartbeating fake wait about 12 s.
QUICK_HEARTBEATS: dict[str, Any] = {
    "max_heartbeat_throttle_interval": timedelta(seconds=0.5),
    "default_heartbeat_throttle_interval": timedelta(seconds=0.5),
}


def workers(env, cluster: FakeCluster, workflows: tuple[type, ...] = (CodingAgentRollout,)) -> tuple[Worker, Worker]:
    """The shared-queue worker (``workflows``, pick_host, evaluate) and the live host's worker (evaluate too), both on
    the fakes."""
    shared = Worker(
        env.client,
        task_queue=SHARED,
        workflows=list(workflows),
        activities=[cluster.pick_host, cluster.evaluate],
        **QUICK_HEARTBEATS,
    )
    host = Worker(
        env.client,
        task_queue=LIVE,
        **QUICK_HEARTBEATS,
        activities=[
            cluster.boot_sandbox,
            cluster.run_claude_code,
            cluster.capture_diff,
            cluster.destroy_sandbox,
            cluster.merge_segments,
            cluster.discard_session,
            cluster.evaluate,
        ],
    )
    return shared, host


class GroupCluster(FakeCluster):
    """Fakes whose boot, agent and grade depend on the child's workflow id (``sample index``-``group index`` suffix)."""

    def __init__(self):
        super().__init__()
        self.failing_boots: set[str] = set()
        self.missing_images: set[str] = set()
        self.hanging: set[str] = set()
        self.rewards: dict[str, float] = {}
        self.destroyed: list[str] = []

    @activity.defn(name=name_of(refs.boot_sandbox))
    async def boot_sandbox(self, request: SandboxRequest) -> SandboxHandle:
        self.calls.append("boot_sandbox")
        if request.workflow_id in self.failing_boots:
            raise ApplicationError("the Docker engine failed on this host", type=ErrorType.SANDBOX_BOOT_ERROR)
        if request.task.image in self.missing_images:
            raise ApplicationError(
                f"image {request.task.image} is not in registry docker.io", type=ErrorType.SANDBOX_IMAGE_MISSING
            )
        if self.boot_failures:
            raise self.boot_failures.pop(0)
        return SandboxHandle(
            container_id=request.workflow_id, name=f"box-{request.workflow_id}", workdir=request.task.workdir
        )

    @activity.defn(name=name_of(refs.run_claude_code))
    async def run_claude_code(self, request: AgentRunRequest) -> AgentRun:
        self.calls.append("run_claude_code")
        while request.workflow_id in self.hanging:
            activity.heartbeat()
            await asyncio.sleep(0.1)
        return AgentRun(
            session_id="s1",
            exit_code=0,
            reason="completed",
            is_error=False,
            turns=3,
            log=f"agent log of {request.workflow_id}\n",
        )

    @activity.defn(name=name_of(refs.destroy_sandbox))
    async def destroy_sandbox(self, handle: SandboxHandle) -> None:
        self.destroyed.append(handle.container_id)

    @activity.defn(name=name_of(refs.evaluate))
    async def evaluate(self, request: EvalRequest) -> EvalResult:
        reward = self.rewards.get(request.workflow_id, 1.0)
        log = f"grading log of {request.workflow_id}\n"
        result = EvalResult(
            reward=reward, solved=reward == 1.0, applied_cleanly=True, grader="eval_cmd", log=log, log_bytes=len(log)
        )
        if request.task.probe is None:
            return result
        verdict = ProbeVerdict(verdict="cheated" if result.solved else "held")
        return result.model_copy(update={"reward": 0.0, "solved": False, "probe": verdict})
