"""The trainer's side of drift → repair episodes: build a batch, run it, turn results into JSONL records.

GRPO-style groups: ``episode_inputs`` gives each group one task (the
difficulty's tasks in a ``seed``-shuffled order, cycled) and ``k`` episodes
of it, which share ``group_index`` and differ in ``sample_index`` and drift
seed. Workflow ids are deterministic per (run, task, role policies, sample,
group), so a restarted trainer re-attaches instead of re-running.
``episode_groups`` makes each group one ``RolloutGroup`` input (the starter's
``episodes`` command runs them so: infrastructure failures refilled, one line
per group); ``collect_episode`` runs one flat, with the rollouts' guarantees
(``workflow_runs``): an episode that cannot be started or collected is a
``failed`` result, and a Temporal restart is waited out.
"""

from __future__ import annotations

import hashlib
import random

from temporalio.client import Client, WorkflowHandle

from durable_rollouts.config.settings import SHARED_TASK_QUEUE
from durable_rollouts.contracts.drift_repair import (
    Difficulty,
    DriftPolicy,
    DriftTask,
    EpisodeInput,
    EpisodeResult,
    RepairPolicy,
)
from durable_rollouts.contracts.rollout_group import GroupFilter, GroupInput
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.contracts.workflow_ids import episode_workflow_id
from durable_rollouts.trainer_client.workflow_runs import DEFAULT_SERVER_WAIT_S, RunFailure, collect, start_or_attach

WORKFLOW_TYPE = "DriftRepairEpisode"
DEFAULT_MODEL = PolicySpec()  # episode_inputs' default; shared, never mutated


def episode_seed(seed: int, group: int, sample: int) -> int:
    return int(hashlib.sha256(f"{seed}:{group}:{sample}".encode()).hexdigest()[:8], 16)


def episode_inputs(
    tasks: list[DriftTask],
    n: int,
    k: int = 1,
    seed: int = 0,
    drift_policy: DriftPolicy = "model",
    repair_policy: RepairPolicy = "model",
    model: PolicySpec = DEFAULT_MODEL,
    difficulty: Difficulty | None = None,
    **options,
) -> list[EpisodeInput]:
    """``n`` episodes in groups of ``k`` (the last group may be smaller), one task per group; ``options`` are
    further ``EpisodeInput`` fields (``drift_reward``, ``run_timeout_s``, ...)."""
    if not tasks:
        raise ValueError("no tasks to run")
    order = random.Random(seed).sample(tasks, len(tasks))
    return [
        EpisodeInput(
            task_id=order[(index // k) % len(order)].task_id,
            difficulty=difficulty,
            seed=episode_seed(seed, index // k, index % k),
            group_index=index // k,
            sample_index=index % k,
            drift_policy=drift_policy,
            repair_policy=repair_policy,
            model=model,
            **options,
        )
        for index in range(n)
    ]


def episode_groups(
    episodes: list[EpisodeInput],
    run_id: str,
    group_filter: GroupFilter = GroupFilter.KEEP_ALL,
    min_valid: int | None = None,
    refill_budget: int | None = None,
) -> list[GroupInput]:
    """The episodes as ``RolloutGroup`` inputs, one per ``group_index`` (in order), under the run's group rules;
    ``min_valid`` is capped at a group's size (the last group may be smaller)."""
    by_group: dict[int, list[EpisodeInput]] = {}
    for episode in episodes:
        by_group.setdefault(episode.group_index, []).append(episode)
    return [
        GroupInput(
            run_id=run_id,
            group_index=index,
            episodes=members,
            filter=group_filter,
            min_valid=None if min_valid is None else min(min_valid, len(members)),
            refill_budget=refill_budget,
        )
        for index, members in by_group.items()
    ]


async def start_episode(
    client: Client, episode: EpisodeInput, run_id: str, task_queue: str = SHARED_TASK_QUEUE
) -> WorkflowHandle:
    """Start the episode's workflow, or attach to it if that id already ran or is running."""
    summary = f"{episode.task_id} sample {episode.sample_index} group {episode.group_index}"
    return await start_or_attach(
        client, WORKFLOW_TYPE, episode, episode_workflow_id(run_id, episode), task_queue, EpisodeResult, summary
    )


async def collect_episode(
    client: Client,
    episode: EpisodeInput,
    run_id: str,
    task_queue: str = SHARED_TASK_QUEUE,
    server_wait_s: float = DEFAULT_SERVER_WAIT_S,
) -> EpisodeResult:
    """Start (or attach to) one episode and wait for its result; a start or collection failure is its ``failed`` result
    (``rollout_runs.collect_rollout``'s twin: ``workflow_runs.run_limited`` runs many of either)."""
    workflow_id = episode_workflow_id(run_id, episode)
    outcome = await collect(
        client, workflow_id, lambda: start_episode(client, episode, run_id, task_queue), EpisodeResult, server_wait_s
    )
    return failed_episode(episode, workflow_id, outcome) if isinstance(outcome, RunFailure) else outcome


def failed_episode(episode: EpisodeInput, workflow_id: str, failure: RunFailure) -> EpisodeResult:
    return EpisodeResult(
        workflow_id=workflow_id,
        task_id=episode.task_id or "",
        difficulty=episode.difficulty,
        group_index=episode.group_index,
        sample_index=episode.sample_index,
        status="failed",
        abort_reason=failure.reason,
        error=failure.message,
        drift_policy=episode.drift_policy,
        repair_policy=episode.repair_policy,
    )
