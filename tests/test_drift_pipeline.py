"""Drift → repair episodes for real: Temporal dev server, the worker, Docker sandboxes, the adapter's policy client.

The scripted policy server plays both roles (``self_play``) and records what
it sampled, so each role segment is checked token for token against it.
"""

from __future__ import annotations

import json
import uuid

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from durable_rollouts.config.settings import RolloutBudgets, WorkerSettings
from durable_rollouts.contracts.rollout_group import GroupInput
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.contracts.workflow_ids import episode_workflow_id
from durable_rollouts.drift_repair.corpus import load_corpus
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.trainer_client.drift_episodes import collect_episode, episode_inputs
from durable_rollouts.trainer_client.results_file import record_with_segments
from durable_rollouts.trainer_client.rollout_groups import collect_group
from durable_rollouts.trainer_client.workflow_runs import run_limited
from starter import parse_args, run_episode_batch
from tests.local_cluster import containers_of_runs, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
MODEL = PolicySpec(sampling=SamplingParams(max_new_tokens=2048), context_budget=16384)


class Cluster:
    def __init__(self, env: WorkflowEnvironment, settings: WorkerSettings, policy: ScriptedPolicyServer):
        self.env, self.settings, self.policy = env, settings, policy
        self.run_ids: list[str] = []

    async def run(self, episodes):
        self.run_ids.append(f"t{uuid.uuid4().hex[:6]}")
        run_id, queue = self.run_ids[-1], self.settings.task_queue
        return await run_limited(episodes, lambda episode: collect_episode(self.env.client, episode, run_id, queue), 8)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(renderer, tmp_path_factory):
    policy = ScriptedPolicyServer(renderer, default_policy="self_play")
    policy_url = await policy.start()
    async with local_cluster(
        policy_url,
        tmp_path_factory.mktemp("results"),
        RolloutBudgets(agent_budget_s=120, eval_timeout_s=120, guard_s=600),
    ) as (
        env,
        settings,
    ):
        yield Cluster(env, settings, policy)
    await policy.stop()


async def test_the_scripted_policy_plays_both_roles_with_exact_token_capture(cluster):
    tasks = list(load_corpus().values())
    episodes = episode_inputs(
        [tasks[0], tasks[14], tasks[25]], n=4, k=2, drift_policy="model", repair_policy="model", model=MODEL
    )
    results = await cluster.run(episodes)
    assert [(r.status, r.spec_source, r.breakage_valid, r.success, r.reward) for r in results] == [
        ("completed", "model", True, True, 1.0)
    ] * 4
    assert [r.group_index for r in results] == [0, 0, 1, 1] and results[0].task_id == results[1].task_id
    for result in results:
        segments = unpack_trajectory(result.trajectory)
        assert [(s.kind, s.lane, s.turns) for s in segments] == [("role", "drift", 1), ("role", "repair", 1)]
        for segment, turn in zip(segments, (result.drift_role, result.repair_role), strict=True):
            (record,) = cluster.policy.records_for(turn.session_id)
            assert record.policy == "self_play"
            assert segment.tokens[: segment.prompt_length] == record.input_ids
            assert segment.tokens[segment.prompt_length :] == record.output_ids
            assert segment.rollout_log_probs[segment.prompt_length :] == record.output_logprobs
            assert segment.loss_mask == [0] * segment.prompt_length + [1] * len(record.output_ids)
        record = record_with_segments(result)
        assert len(record["segments"]) == 2 and record["drift_role"]["user_prompt"].startswith(
            f"Task: {result.task_id}"
        )


async def test_baselines_through_the_workflow_oracle_always_noop_never(cluster):
    tasks = list(load_corpus().values())
    picked = [tasks[i] for i in (1, 5, 13, 20, 27, 31)]
    oracle = episode_inputs(picked, n=len(picked), drift_policy="baseline", repair_policy="oracle", seed=3)
    noop = episode_inputs(picked, n=len(picked), drift_policy="baseline", repair_policy="noop", seed=3)
    results = await cluster.run(oracle + noop)
    assert all(r.status == "completed" and r.breakage_valid and r.segments == [] for r in results)
    assert [r.success for r in results] == [True] * len(picked) + [False] * len(picked)
    assert [r.role_rewards.drift for r in results] == [0.0] * len(picked) + [1.0] * len(picked)
    assert all("/srv/script.py" in r.error_trace for r in results)


async def test_episodes_run_as_a_group_under_their_flat_ids_and_a_task_error_is_not_refilled(cluster):
    task = list(load_corpus().values())[2]
    cluster.run_ids.append(f"g{uuid.uuid4().hex[:6]}")
    run_id = cluster.run_ids[-1]
    solved = GroupInput(
        run_id=run_id,
        group_index=0,
        episodes=episode_inputs([task], n=2, k=2, drift_policy="baseline", repair_policy="oracle"),
    )
    unknown = [e.model_copy(update={"task_id": "no_such_task", "group_index": 1}) for e in solved.episodes]
    solved_result, unknown_result = [
        await collect_group(cluster.env.client, group, cluster.settings.task_queue)
        for group in (solved, GroupInput(run_id=run_id, group_index=1, episodes=unknown))
    ]
    assert (solved_result.kind, solved_result.status, solved_result.valid_mask, solved_result.rewards) == (
        "episode",
        "completed",
        [True, True],
        [1.0, 1.0],
    )
    assert [s.episode.workflow_id for s in solved_result.samples] == [
        episode_workflow_id(run_id, e) for e in solved.episodes
    ]
    assert (unknown_result.status, unknown_result.refilled, unknown_result.valid_mask) == (
        "insufficient",
        0,
        [False, False],
    )
    assert {(s.outcome, s.invalid_reason) for s in unknown_result.samples} == {("task", "unknown_task")}


async def test_the_starters_episodes_command_writes_one_line_per_group(cluster, tmp_path):
    cluster.run_ids.append(f"e{uuid.uuid4().hex[:6]}")
    out = tmp_path / "episodes.jsonl"
    argv = [
        "episodes",
        "--n",
        "4",
        "--k",
        "2",
        "--drift-policy",
        "baseline",
        "--repair-policy",
        "oracle",
        "--run-id",
        cluster.run_ids[-1],
    ]
    args = parse_args([*argv, "--out", str(out), "--task-queue", cluster.settings.task_queue, "--min-valid", "2"])
    assert await run_episode_batch(cluster.env.client, args) == 0
    lines = [json.loads(text) for text in out.read_text().splitlines()]
    assert sorted(line["group_index"] for line in lines) == [0, 1] and {line["kind"] for line in lines} == {"episode"}
    assert all(
        line["status"] == "completed" and line["valid_mask"] == [True, True] and line["rewards"] == [1.0, 1.0]
        for line in lines
    )
    assert all(
        sample["episode"]["success"] and sample["episode"]["segments"] == []
        for line in lines
        for sample in line["samples"]
    )


async def test_no_labelled_container_is_left_behind(cluster):
    assert cluster.run_ids and await containers_of_runs(cluster.run_ids) == []
