"""The trainer's side of drift → repair episodes: build a batch, run it, turn results into JSONL records.

GRPO-style groups: ``episode_inputs`` gives each group one task (the
difficulty's tasks in a ``seed``-shuffled order, cycled) and ``k`` episodes
of it, which share ``group_index`` and differ in ``sample_index`` and drift
seed. Workflow ids are deterministic per (run, task, role policies, sample,
group), so a restarted trainer re-attaches instead of re-running.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Awaitable, Callable, Iterable

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from activities.contracts import PolicySpec
from activities.drift_contracts import Difficulty, DriftPolicy, DriftTask, EpisodeInput, EpisodeResult, RepairPolicy
from activities.settings import SHARED_TASK_QUEUE
from activities.trajectory_store import TrajectoryStore

EpisodeCallback = Callable[[EpisodeResult], Awaitable[None] | None]
WORKFLOW_TYPE = "DriftRepairEpisode"


def episode_seed(seed: int, group: int, sample: int) -> int:
    return int(hashlib.sha256(f"{seed}:{group}:{sample}".encode()).hexdigest()[:8], 16)


def episode_inputs(
    tasks: list[DriftTask],
    n: int,
    k: int = 1,
    seed: int = 0,
    drift_policy: DriftPolicy = "model",
    repair_policy: RepairPolicy = "model",
    model: PolicySpec = PolicySpec(),
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


def episode_workflow_id(run_id: str, episode: EpisodeInput) -> str:
    return f"episode-{run_id}-{episode.task_id}-{episode.drift_policy}-{episode.repair_policy}-{episode.sample_index}-{episode.group_index}"


async def start_episode(client: Client, episode: EpisodeInput, run_id: str, task_queue: str = SHARED_TASK_QUEUE) -> WorkflowHandle:
    """Start the episode's workflow, or attach to it if that id already ran or is running."""
    workflow_id = episode_workflow_id(run_id, episode)
    try:
        return await client.start_workflow(
            WORKFLOW_TYPE,
            episode,
            id=workflow_id,
            task_queue=task_queue,
            result_type=EpisodeResult,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"{episode.task_id} sample {episode.sample_index} group {episode.group_index}",
        )
    except WorkflowAlreadyStartedError:
        return client.get_workflow_handle(workflow_id, result_type=EpisodeResult)


async def run_episodes(
    client: Client,
    episodes: Iterable[EpisodeInput],
    run_id: str,
    concurrency: int = 8,
    task_queue: str = SHARED_TASK_QUEUE,
    on_result: EpisodeCallback | None = None,
) -> list[EpisodeResult]:
    """Run every episode (at most ``concurrency`` in flight); results come back in input order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(episode: EpisodeInput) -> EpisodeResult:
        async with gate:
            result = await (await start_episode(client, episode, run_id, task_queue)).result()
        if on_result is not None:
            maybe = on_result(result)
            if asyncio.iscoroutine(maybe):
                await maybe
        return result

    return list(await asyncio.gather(*(one(e) for e in episodes)))


def episode_record(result: EpisodeResult) -> dict:
    """One JSONL line: the result plus its role segments loaded from the trajectory store."""
    record = result.model_dump(mode="json")
    segments = TrajectoryStore.load(result.trajectory) if result.trajectory else []
    record["segments"] = [s.model_dump(mode="json") for s in segments]
    return record
