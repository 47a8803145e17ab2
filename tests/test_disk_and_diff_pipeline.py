"""Disk budgets and big patches through the whole rollout: Temporal dev server, worker, Docker, Claude Code.

The scripted oracle applies each task's real fix with Bash. What else the
agent writes comes from Claude Code itself: a ``PostToolUse`` hook (passed
with ``--settings``, as ``SLIME_AGENT_CC_EXTRA_ARGS`` would) runs, as the
agent user after every Bash call, the script a task's pre-command left at
``/tmp/after-bash.sh`` (outside the workdir, so not part of any patch).
"""

from __future__ import annotations

import json
import shlex
import uuid

import pytest
import pytest_asyncio

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.grading import OmittedFile
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.workspace_diff import MAX_DIFF_BYTES
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.rollout_runs import rollout_input, run_rollouts
from tests.local_cluster import containers_of_runs, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
BUDGETS = RolloutBudgets(agent_budget_s=300, eval_timeout_s=120, guard_s=900)
DISK_BUDGET = 64 << 20
AFTER_BASH = "/tmp/after-bash.sh"
HOOK = {
    "hooks": {
        "PostToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {
                        "type": "command",
                        "command": f"if [ -f {AFTER_BASH} ]; then bash {AFTER_BASH}; fi",
                        "timeout": 900,
                    }
                ],
            }
        ]
    }
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(renderer, tmp_path_factory):
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET))
    )
    policy_url = await policy.start()
    overrides = {"claude_extra_args": ["--settings", json.dumps(HOOK)], "sandbox_disk_bytes": DISK_BUDGET}
    run_ids: list[str] = []
    async with local_cluster(policy_url, tmp_path_factory.mktemp("results"), BUDGETS, **overrides) as (env, settings):
        yield env, settings, run_ids
        assert await containers_of_runs(run_ids) == []
    await policy.stop()


@pytest.fixture(scope="module")
def calc_task() -> TaskSpec:
    return next(
        row.task
        for row in read_dataset(EXAMPLE_DATASET)
        if isinstance(row, DatasetRow) and row.task.instance_id == "calc-eval-cmd"
    )


def writing_after_bash(task: TaskSpec, script: str) -> TaskSpec:
    """The task, with ``script`` run in its workdir after each of the agent's Bash calls."""
    body = f"cd {shlex.quote(task.workdir)}\n{script}\n"
    return task.model_copy(
        update={"pre_commands": [*task.pre_commands, f"printf %s {shlex.quote(body)} > {AFTER_BASH}"]}
    )


async def run_one(cluster, task: TaskSpec):
    env, settings, run_ids = cluster
    run_ids.append(f"t{uuid.uuid4().hex[:6]}")
    rollout = rollout_input(task, 0, 0, PolicySpec(sampling=SamplingParams(max_new_tokens=2048)), BUDGETS)
    (result,) = await run_rollouts(env.client, [rollout], run_ids[-1], task_queue=settings.task_queue)
    return result


def sampled_tokens(result) -> int:
    return sum(sum(segment.loss_mask) for segment in unpack_trajectory(result.trajectory))


async def test_a_30_mb_blob_beside_the_fix_is_left_out_and_named_and_the_fix_is_graded(cluster, calc_task):
    result = await run_one(cluster, writing_after_bash(calc_task, "head -c 30000000 /dev/urandom > blob.bin"))
    assert (result.status, result.reward, result.solved, result.applied_cleanly) == ("completed", 1.0, True, True)
    assert result.agent.reason == "completed"
    assert result.diff.omitted == [OmittedFile(path="blob.bin", size_bytes=30_000_000)] and not result.diff.over_cap
    assert 0 < result.diff.patch_bytes < 10_000 and sampled_tokens(result) > 0
    assert (
        len(result.diff.kept_patch.encode()) == result.diff.patch_bytes and "blob.bin" not in result.diff.kept_patch
    ), "the graded patch is kept"


async def test_a_patch_over_the_cap_is_graded_zero_and_marked_and_keeps_its_tokens(cluster, calc_task):
    notes = "\n".join(f"head -c 600000 /dev/urandom | base64 > notes{i}.txt" for i in range(3))
    result = await run_one(cluster, writing_after_bash(calc_task, notes))
    assert (result.status, result.abort_reason, result.reward, result.applied_cleanly) == (
        "completed",
        None,
        0.0,
        False,
    )
    assert result.diff.over_cap and result.diff.patch_bytes > MAX_DIFF_BYTES and result.diff.omitted == []
    assert result.diff.kept_patch is None, "nothing was captured, nothing kept"
    assert result.evaluation.log_tail == f"[not graded: {result.diff.note}]"
    assert result.agent.reason == "completed" and sampled_tokens(result) > 0


async def test_an_agent_writing_past_the_disk_budget_is_stopped_and_graded(cluster, calc_task):
    """The hook fills 96 MB (budget 64 MiB) after the fix and then hangs: the watch stops the agent, and what
    it had done is graded like a run stopped at its time budget. The written-bytes watch can stop the writer
    before it is done (docs/rollouts.md: the overshoot is bounded), so the file is left out at whatever size it
    reached past about half the budget."""
    result = await run_one(cluster, writing_after_bash(calc_task, "head -c 96000000 /dev/zero > fill.bin\nsleep 600"))
    assert result.agent.reason == "sandbox_disk_exceeded" and result.agent.exit_code is None
    assert (result.status, result.reward, result.solved) == ("completed", 1.0, True)
    (omitted,) = result.diff.omitted
    assert omitted.path == "fill.bin" and 32 * 2**20 < omitted.size_bytes <= 96_000_000, omitted
    assert sampled_tokens(result) > 0
