"""Rollouts whose task images come from a registry: example rows and a Harbor task, a group of two samples
each, run as ``starter.py run`` runs them (``run_groups``, one group in flight), on a worker whose mirror rule
sends every Docker Hub library name (``rollout-task-calc-eval-cmd:latest`` is
``docker.io/library/rollout-task-calc-eval-cmd:latest``) to a real registry on loopback (Debian's
docker-registry, htpasswd auth) that holds copies of the images under ``examples/``.

The engine never held the registry's names. The first group's boots pull its image; the images of the groups
after it are announced ahead (``PrefetchImages``) and pulled by the host while the group before runs, so their
boots find them. Each image is asked of the registry once, and every sample completes with the oracle's reward.
A name the registry lacks comes back from a prefetch as ``failed``, not retried. (The copies share their layers
with the engine's own images, so the pulls move manifests, not layers: ``tests/docker_sandbox/test_image_pull.py``
pulls real bytes.)
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import docker
import docker.errors
import pytest
from temporalio.client import Client

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.image_prefetch import PrefetchResult
from durable_rollouts.contracts.rollout_group import GroupFilter
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.contracts.workflow_ids import prefetch_workflow_id
from durable_rollouts.docker_sandbox.image_refs import parse_mirror_rules
from durable_rollouts.docker_sandbox.image_settings import ImageSettings, RegistryCredentials
from durable_rollouts.paths import EXAMPLE_DATASET, PROJECT_ROOT
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.task_sources.harbor_tasks import read_harbor_tasks
from durable_rollouts.trainer_client.batch_runs import GroupOptions, Placement, group_input, run_groups
from durable_rollouts.trainer_client.image_prefetch import ImagePrefetch
from testbed.local_registry import LocalRegistry, image_present
from tests.local_cluster import containers_of_runs, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
BUDGETS = RolloutBudgets(agent_budget_s=240, eval_timeout_s=180, pull_timeout_s=300, guard_s=900)
HARBOR_TASK = PROJECT_ROOT / "examples" / "harbor_tasks" / "median-reward-json"
ROWS = ("calc-eval-cmd", "textutil-f2p")


async def test_rows_and_a_harbor_task_pull_their_images_once_ahead_of_their_groups_and_complete(
    task_images, renderer, tmp_path
):
    client = docker.from_env()
    rows = [r.task for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow) and r.task.instance_id in ROWS]
    (harbor,) = [r.task for r in read_harbor_tasks(HARBOR_TASK) if isinstance(r, DatasetRow)]
    tasks = [*rows, harbor]
    registry = LocalRegistry(tmp_path / "registry")
    registry.start()
    pulled: list[str] = []
    oracle = [*oracle_tasks_from(str(EXAMPLE_DATASET)), *oracle_tasks_from(str(HARBOR_TASK))]
    policy = ScriptedPolicyServer(renderer, default_policy="oracle", oracle_tasks=oracle)
    policy_url = await policy.start()
    try:
        for task in tasks:
            await asyncio.to_thread(registry.push, client, task.image, f"examples/{task.image}")
            pulled.append(f"{registry.address}/examples/{task.image}")
        assert not any(image_present(client, name) for name in pulled), "the engine holds none of the registry's names"
        images = ImageSettings(
            mirrors=parse_mirror_rules(f"docker.io/library={registry.address}/examples"),
            credentials=RegistryCredentials(
                registry=registry.address, username=registry.username, password=registry.password
            ),
        )
        async with local_cluster(policy_url, tmp_path / "results", BUDGETS, images=images) as (env, settings):
            run_id = f"reg{uuid.uuid4().hex[:6]}"
            options = GroupOptions(
                run_id=run_id, samples=2, refill_budget=None, min_valid=None, filter=GroupFilter.KEEP_ALL
            )
            groups = [group_input(task, index, PolicySpec(), BUDGETS, options) for index, task in enumerate(tasks)]
            placement = Placement(task_queue=settings.task_queue, concurrency=2, server_wait_s=30)
            run = await run_groups(env.client, groups, tmp_path / "results.jsonl", placement, "groups")
            ahead = [await _prefetched(env.client, run_id, [task.image]) for task in tasks[1:]]
            missing = ImagePrefetch(env.client, run_id, settings.task_queue)
            missing.announce(["rollout-task-calc-eval-cmd:no-such-tag"], 60)
            await missing.settle()
            (gone,) = (await _prefetched(env.client, run_id, ["rollout-task-calc-eval-cmd:no-such-tag"])).images
        why = [
            (s.rollout.instance_id, s.rollout.status, s.rollout.abort_reason, s.rollout.error)
            for g in run.results
            for s in g.samples
            if s.rollout
        ]
        assert run.complete and [s.reward for g in run.results for s in g.samples] == [1.0] * 2 * len(tasks), why
        assert [(p.image, p.outcome, p.host_queue) for result in ahead for p in result.images] == [
            (task.image, "pulled", settings.host_queue) for task in tasks[1:]
        ], "each later group's image was pulled ahead by the host"
        for task in tasks:
            pulls = registry.manifest_requests(f"examples/{task.image.split(':')[0]}", ("HEAD",))
            assert pulls == 1, f"{task.image}: one pull for the group and its prefetch, {pulls} pulls"
        assert (gone.outcome, "not in registry" in gone.error) == ("failed", True), gone
        assert all(image_present(client, name) for name in pulled)
        assert await containers_of_runs([run_id]) == []
    finally:
        await policy.stop()
        registry.stop()
        for name in pulled:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(name)


async def _prefetched(client: Client, run_id: str, images: list[str]) -> PrefetchResult:
    return await client.get_workflow_handle(prefetch_workflow_id(run_id, images), result_type=PrefetchResult).result()
