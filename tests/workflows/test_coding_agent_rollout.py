"""CodingAgentRollout on Temporal's time-skipping test server, with fakes under the real activity names.

The fakes record every call, so each test checks both the result the trainer
gets and that the sandbox was destroyed on that path.
"""

from __future__ import annotations

import uuid

import pytest
from temporalio.exceptions import ApplicationError

from activities.error_types import ErrorType
from durable_rollouts.contracts.grading import DiffReport
from durable_rollouts.contracts.rollouts import AgentProgress, RolloutInput
from durable_rollouts.contracts.session import PolicySpec, StalenessBound, StalenessReport
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from tests.waiting import until
from tests.workflows.fake_rollout_activities import DEAD, LIVE, PATCH, SEGMENT, SHARED, FakeCluster, rollout, workers
from workflows import search_attributes as attrs
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def run(env, cluster: FakeCluster, rollout_input: RolloutInput):
    shared, host = workers(env, cluster)
    async with shared, host:
        return await env.client.execute_workflow(
            CodingAgentRollout.run, rollout_input, id=f"wf-{uuid.uuid4().hex[:8]}", task_queue=SHARED
        )


async def test_happy_path_completes_with_reward_and_destroys_the_sandbox(env):
    cluster = FakeCluster()
    result = await run(env, cluster, rollout())
    assert result.status == "completed" and result.reward == 1.0 and result.solved
    assert result.trajectory is not None and result.attempts == 1 and result.stopped_in is None
    assert cluster.calls == [
        "pick_host",
        "boot_sandbox",
        "run_claude_code",
        "capture_diff",
        "destroy_sandbox",
        "evaluate",
        "merge_segments",
    ]
    assert result.diff == cluster.diff_report.model_copy(update={"kept_patch": PATCH}), (
        "the graded patch is kept for a re-grade"
    )
    assert result.finish == cluster.finish, "what finishing the session found in flight reaches the rollout result"
    assert unpack_trajectory(result.trajectory) == [SEGMENT], "the packed trajectory reaches the result intact"
    assert (result.agent.log, result.agent.log_path) == (cluster.agent_log, ""), (
        "the whole agent log travels in the result"
    )
    assert (result.evaluation.log, result.evaluation.log_bytes, result.evaluation.log_path) == (
        cluster.grading_log,
        len(cluster.grading_log.encode()),
        "",
    )


async def test_the_grade_runs_on_the_agents_host_and_on_any_worker_once_that_host_is_gone(env):
    """The agent's host holds the task image, so the fresh grading sandbox boots there; a host that shut down
    before the grade leaves it to the shared queue."""
    cluster = FakeCluster()
    result = await run(env, cluster, rollout())
    assert result.status == "completed" and cluster.graded_on == [LIVE]
    gone = FakeCluster()
    gone.host_lost_before_grading = {LIVE}
    result = await run(env, gone, rollout())
    assert (
        (result.status, result.reward) == ("completed", 1.0)
        and gone.graded_on[0] == LIVE
        and gone.graded_on[-1] == SHARED
    )


async def test_logs_past_the_payload_threshold_reach_the_result_whole(env):
    """Past the payload folder's threshold (256 KiB) external storage carries them; the result holds them all the
    same."""
    cluster = FakeCluster()
    cluster.agent_log = "".join(f'{{"type":"assistant","n":{n},"text":"café 🦀"}}\n' for n in range(20_000))
    cluster.grading_log = "".join(f"test_{n} PASSED é\n" for n in range(30_000))
    assert min(len(cluster.agent_log.encode()), len(cluster.grading_log.encode())) > 256 * 1024
    result = await run(env, cluster, rollout())
    assert result.agent.log == cluster.agent_log and result.evaluation.log == cluster.grading_log
    assert result.evaluation.log_bytes == len(cluster.grading_log.encode())


async def test_a_patch_over_the_cap_completes_graded_zero_without_a_grading_sandbox(env):
    cluster = FakeCluster()
    cluster.diff_report = DiffReport(
        patch_bytes=3 << 20, over_cap=True, note="the patch is 3,145,728 bytes, over the 1,048,576-byte cap"
    )
    result = await run(env, cluster, rollout())
    assert (result.status, result.reward, result.solved, result.applied_cleanly) == ("completed", 0.0, False, False)
    assert result.trajectory is not None and result.diff == cluster.diff_report and result.diff.kept_patch is None, (
        "nothing to re-grade"
    )
    assert (
        result.evaluation.grader == "eval_cmd"
        and result.evaluation.log_tail == f"[not graded: {cluster.diff_report.note}]"
    )
    assert "evaluate" not in cluster.calls and cluster.calls[-1] == "merge_segments"


async def test_wall_clock_guard_aborts_gracefully_after_stopping_the_agent(env):
    cluster = FakeCluster()
    cluster.agent_hangs = True
    result = await run(env, cluster, rollout(guard_s=3))
    assert result.status == "aborted" and result.abort_reason == "wall_clock_timeout" and result.reward == 0.0
    assert (result.stopped_in, result.turns) == ("agent", 0), "where the guard found it, for a group to classify"
    assert cluster.calls.index("agent_cancelled") < cluster.calls.index("destroy_sandbox")
    assert "evaluate" not in cluster.calls


async def test_a_guard_firing_during_grading_waits_for_the_cancelled_grade_to_end(env):
    cluster = FakeCluster()
    cluster.grading_hangs = True
    result = await run(env, cluster, rollout(guard_s=3))
    assert (result.status, result.abort_reason, result.stopped_in) == ("aborted", "wall_clock_timeout", "grading")
    assert cluster.calls[-2:] == ["grading_cancelled", "discard_session"], (
        "the grade ended (its sandbox gone) before the clean-up and result"
    )


async def test_transient_boot_failures_are_retried(env):
    cluster = FakeCluster()
    cluster.boot_failures = [RuntimeError("docker hiccup"), RuntimeError("docker hiccup")]
    result = await run(env, cluster, rollout())
    assert result.status == "completed"
    assert cluster.calls.count("boot_sandbox") == 3


async def test_a_boot_that_keeps_failing_is_retried_then_aborted(env):
    cluster = FakeCluster()
    cluster.boot_failures = [RuntimeError("docker down")] * 3
    result = await run(env, cluster, rollout())
    assert result.status == "aborted" and result.abort_reason == "sandbox_boot_failed"
    assert cluster.calls.count("boot_sandbox") == 3 and "run_claude_code" not in cluster.calls


@pytest.mark.parametrize(
    ("error_type", "reason"),
    [
        (ErrorType.SANDBOX_IMAGE_MISSING, "image_not_found"),
        (ErrorType.REGISTRY_AUTH_FAILED, "registry_auth_failed"),
        (ErrorType.NOT_EVALUABLE, "not_evaluable"),
    ],
)
async def test_a_bad_image_or_an_ungradable_row_aborts_without_retrying(env, error_type, reason):
    """Marked retryable here, so the workflow's own non-retryable list is what stops the retries."""
    cluster = FakeCluster()
    cluster.boot_failures = [ApplicationError("refused", type=error_type)] * 3
    result = await run(env, cluster, rollout())
    assert result.status == "aborted" and result.abort_reason == reason
    assert (
        cluster.calls.count("boot_sandbox") == 1
        and "run_claude_code" not in cluster.calls
        and "destroy_sandbox" not in cluster.calls
    )


async def test_an_unreachable_registry_is_retried_then_reported_as_such(env):
    cluster = FakeCluster()
    cluster.boot_failures = [ApplicationError("dial tcp: connection refused", type=ErrorType.REGISTRY_UNAVAILABLE)] * 3
    result = await run(env, cluster, rollout())
    assert (result.status, result.abort_reason) == ("aborted", "registry_unavailable")
    assert cluster.calls.count("boot_sandbox") == 3 and "run_claude_code" not in cluster.calls


async def test_a_lost_host_queue_moves_to_the_next_attempt(env):
    cluster = FakeCluster()
    cluster.host_queues = [DEAD, LIVE]
    result = await run(env, cluster, rollout())
    assert result.status == "completed" and result.attempts == 2
    assert cluster.calls.count("pick_host") == 2 and cluster.calls.count("boot_sandbox") == 1


async def test_no_turns_means_adapter_session_empty(env):
    cluster = FakeCluster()
    cluster.empty_session = True
    result = await run(env, cluster, rollout())
    assert result.status == "aborted" and result.abort_reason == "adapter_session_empty"


async def test_missing_image_is_aborted_before_any_activity(env):
    cluster = FakeCluster()
    bad = rollout()
    bad.task.image = ""
    result = await run(env, cluster, bad)
    assert result.abort_reason == "missing_image_or_workdir" and cluster.calls == []


async def start(env, cluster: FakeCluster, rollout_input: RolloutInput):
    shared, host = workers(env, cluster)
    handle = await env.client.start_workflow(
        CodingAgentRollout.run, rollout_input, id=f"wf-{uuid.uuid4().hex[:8]}", task_queue=SHARED
    )
    return shared, host, handle


@pytest.mark.parametrize("how", ["abort_signal", "temporal_cancel"])
async def test_an_operator_stop_is_graceful(env, how):
    cluster = FakeCluster()
    cluster.agent_hangs = True
    shared, host, handle = await start(env, cluster, rollout(guard_s=600))
    async with shared, host:
        await until(lambda: "run_claude_code" in cluster.calls)
        progress = await handle.query(CodingAgentRollout.progress)
        assert progress.stage == "agent" and progress.sandbox == "box-1"
        if how == "abort_signal":
            await handle.signal(CodingAgentRollout.abort, "operator_stop")
        else:
            await handle.cancel()
        result = await handle.result()
    assert result.status == "aborted" and result.abort_reason == (
        "operator_stop" if how == "abort_signal" else "cancelled"
    )
    assert cluster.calls.index("agent_cancelled") < cluster.calls.index("destroy_sandbox")


@pytest.mark.parametrize("policy", ["mask", "drop"])
async def test_a_staleness_verdict_from_the_merge_decides_the_result(env, policy):
    """``drop`` ends the rollout ``aborted: stale_policy`` with its reward zeroed; ``mask`` completes; both keep the
    report."""
    cluster = FakeCluster()
    bound = StalenessBound(max_staleness=2, policy=policy)
    cluster.staleness = StalenessReport(
        bound=bound, current_version="9", oldest_version="4", staleness=5, stale_turns=1, dropped=policy == "drop"
    )
    result = await run(env, cluster, rollout(policy=PolicySpec(staleness=bound)))
    assert result.staleness == cluster.staleness
    if policy == "drop":
        assert (result.status, result.abort_reason, result.reward) == ("aborted", "stale_policy", 0.0)
    else:
        assert (result.status, result.reward) == ("completed", 1.0)


async def test_the_agents_weight_version_range_shows_in_progress_details_and_a_search_attribute(env):
    cluster = FakeCluster()
    cluster.agent_hangs = True
    shared, host, handle = await start(env, cluster, rollout(guard_s=600))
    async with shared, host:
        await until(lambda: "run_claude_code" in cluster.calls)
        update = AgentProgress(
            attempt=1, session_id="s1", turns=2, tokens=90, oldest_weight_version="3", newest_weight_version="5"
        )
        await handle.signal(CodingAgentRollout.agent_progress, update)
        progress = await handle.query(CodingAgentRollout.progress)
        assert (progress.oldest_weight_version, progress.newest_weight_version, progress.turns) == ("3", "5", 2)
        description = await handle.describe()
        assert description.typed_search_attributes.get(attrs.WEIGHT_VERSIONS) == "3..5"
        await handle.signal(CodingAgentRollout.abort, "done")
        await handle.result()
