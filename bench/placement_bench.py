"""Placement benchmark: two workers whose engines hold different halves of the task images, image-aware
``pick_host`` against giving each rollout to the first worker that polls.

Two worker processes ``a`` and ``b`` share this host's engine, each with its own registry mirror rule, so a worker
holds an image when the engine holds its copy and otherwise pulls its copy from a real registry behind a TCP front
limited to ``--mbps``. Each arm runs every example row ``--samples`` times at once with ``ROLLOUT_IMAGE_AFFINITY``
1 (``affinity``, shipped) or 0 (``first_poller``, the baseline), the arms alternating over ``--rounds``. Per arm it
prints the share of rollouts whose agent ran on the worker holding their image, the pulls the registry served and
the seconds from the batch's start to its last result. Method and results: docs/benchmarks.md, "Placement". No
thresholds. Run from the repository root::

    .venv/bin/python -m bench.placement_bench [--samples 2] [--slots 4] [--blob-mb 32] [--mbps 8] [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import docker
import docker.errors
from temporalio.client import Client

from bench.harness.rollout_stack import (
    bench_budgets,
    example_rows,
    oracle_policy,
    running_servers,
    sandbox_gateway,
    stack_env,
)
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.trainer_client.local_services import worker_process
from durable_rollouts.trainer_client.rollout_runs import rollout_input, run_rollouts
from testbed.local_registry import LocalRegistry, ThrottledFront, build_with_random_layer

WORKERS = ("a", "b")
ARMS = {"affinity": "1", "first_poller": "0"}


def push_copies(client: docker.DockerClient, registry: LocalRegistry, images: list[str], blob_bytes: int) -> None:
    """``a/X`` and ``b/X`` in the registry for every image X, each with a random layer of its own."""
    for image in images:
        for worker in WORKERS:
            local = build_with_random_layer(client, image, blob_bytes)
            try:
                registry.push(client, local, f"{worker}/{image}")
            finally:
                client.images.remove(local, force=True)


def reset_engine(
    client: docker.DockerClient, registry: LocalRegistry, front: str, halves: dict[str, list[str]], images: list[str]
) -> None:
    """The engine holds ``<front>/a/X`` for X in a's half and ``<front>/b/X`` for b's, and no other copy."""
    for worker in WORKERS:
        for image in images:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(f"{front}/{worker}/{image}", force=True)
    for worker, held in halves.items():
        for image in held:
            direct = f"{registry.address}/{worker}/{image}"
            client.images.pull(direct, auth_config=registry.auth_config)
            repository, _, tag = f"{front}/{worker}/{image}".rpartition(":")
            client.images.get(direct).tag(repository, tag)
            client.images.remove(direct)


def copy_pulls(registry: LocalRegistry, images: list[str]) -> int:
    return sum(registry.manifest_requests(f"{w}/{image.split(':')[0]}", ("HEAD",)) for w in WORKERS for image in images)


async def agent_host(client: Client, workflow_id: str) -> str:
    """The host queue ``pick_host`` returned for the rollout's last attempt."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    picks = {
        e.event_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == "pick_host"
    }
    done = [
        e.activity_task_completed_event_attributes
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
        and e.activity_task_completed_event_attributes.scheduled_event_id in picks
    ]
    return json.loads(done[-1].result.payloads[0].data)


async def run_arm(arm: str, index: int, args: argparse.Namespace, setting: dict, tmp: Path) -> dict:
    """The ``index``-th arm of the bench's run: its rollouts are samples ``index * samples ...`` of each row, so
    every arm's workflow ids are its own under the one run id."""
    client, registry, front, halves, images, servers = (
        setting[k] for k in ("client", "registry", "front", "halves", "images", "servers")
    )
    await asyncio.to_thread(reset_engine, client, registry, front, halves, images)
    budgets = bench_budgets(300, 300)
    run_id = setting["run_id"]
    queue = f"placement-{run_id}-{index}"
    hosts = {worker: f"placement-{worker}-{run_id}-{index}" for worker in WORKERS}
    env_base = {
        **stack_env(servers.policy_url, setting["gateway"], budgets, args.slots),
        "ROLLOUT_TASK_QUEUE": queue,
        "ROLLOUT_IMAGE_AFFINITY": ARMS[arm],
        "ROLLOUT_REGISTRY": front,
        "ROLLOUT_REGISTRY_USERNAME": registry.username,
        "ROLLOUT_REGISTRY_PASSWORD": registry.password,
    }
    rows = example_rows()
    samples = range(index * args.samples, (index + 1) * args.samples)
    inputs = [
        rollout_input(row.task, sample, group, PolicySpec(), budgets)
        for group, row in enumerate(rows)
        for sample in samples
    ]
    pulls_before = copy_pulls(registry, images)
    async with contextlib.AsyncExitStack() as stack:
        for worker in WORKERS:
            env = {
                **env_base,
                "ROLLOUT_IMAGE_MIRRORS": f"docker.io/library={front}/{worker}",
                "ROLLOUT_RESULTS_DIR": str(tmp / arm / worker),
            }
            await stack.enter_async_context(
                worker_process(
                    servers.address,
                    ["--host-id", hosts[worker], "--adapter-port", "0"],
                    env=env,
                    log_path=tmp / f"{arm}-{worker}.log",
                )
            )
        started = time.monotonic()
        results = await run_rollouts(servers.env.client, inputs, run_id, concurrency=len(inputs), task_queue=queue)
        seconds = time.monotonic() - started
    holder = {image: worker for worker, held in halves.items() for image in held}
    image_of = {row.task.instance_id: row.task.image for row in rows}
    placed = [await agent_host(servers.env.client, r.workflow_id) for r in results]
    on_holder = sum(
        1 for r, host in zip(results, placed, strict=True) if host.endswith(hosts[holder[image_of[r.instance_id]]])
    )
    completed = sum(1 for r in results if r.status == "completed" and r.reward == 1.0)
    return {
        "arm": arm,
        "rollouts": len(results),
        "completed": completed,
        "on_holder": on_holder,
        "share": on_holder / len(results),
        "pulls": copy_pulls(registry, images) - pulls_before,
        "seconds": seconds,
    }


async def main(args: argparse.Namespace) -> None:
    client = docker.from_env()
    rows = example_rows()
    images = sorted({row.task.image for row in rows})
    halves = {"a": images[: len(images) // 2], "b": images[len(images) // 2 :]}
    tmp = Path(tempfile.mkdtemp(prefix="placement-bench-"))
    registry = LocalRegistry(tmp / "registry")
    registry.start()
    front = ThrottledFront(registry.port, bytes_per_s=int(args.mbps * (1 << 20)))
    await front.start()
    front_address = f"127.0.0.1:{front.port}"
    print(
        f"{len(images)} task images, two copies each with {args.blob_mb} MB of their own, behind a {args.mbps} MB/s "
        f"front"
    )
    started = time.monotonic()
    await asyncio.to_thread(push_copies, client, registry, images, args.blob_mb << 20)
    print(f"registry filled in {time.monotonic() - started:.0f} s")
    policy = await oracle_policy()
    run_id = f"pl{uuid.uuid4().hex[:6]}"
    runs: list[dict] = []
    try:
        async with running_servers(policy, run_id, tmp, lambda: sorted(tmp.glob("*.log")), keep_temp=False) as servers:
            setting = {
                "client": client,
                "registry": registry,
                "front": front_address,
                "halves": halves,
                "images": images,
                "servers": servers,
                "gateway": await sandbox_gateway(),
                "run_id": run_id,
            }
            for round_index in range(args.rounds):
                order = list(ARMS) if round_index % 2 == 0 else list(reversed(ARMS))
                for arm in order:
                    run = await run_arm(arm, len(runs), args, setting, tmp)
                    runs.append(run)
                    print(
                        f"round {round_index + 1} {arm:12s} placed on the holder {run['on_holder']}/{run['rollouts']} "
                        f"({run['share']:.0%}), "
                        f"pulls {run['pulls']}, batch {run['seconds']:.1f} s, completed "
                        f"{run['completed']}/{run['rollouts']}",
                        flush=True,
                    )
    finally:
        await front.stop()
        registry.stop()
        for worker in WORKERS:
            for image in images:
                with contextlib.suppress(docker.errors.ImageNotFound):
                    client.images.remove(f"{front_address}/{worker}/{image}", force=True)
    print()
    for arm in ARMS:
        mine = [r for r in runs if r["arm"] == arm]
        print(
            f"{arm:12s} share on the holder {statistics.mean(r['share'] for r in mine):.0%}, pulls "
            f"{statistics.mean(r['pulls'] for r in mine):.1f}, "
            f"batch {statistics.median(r['seconds'] for r in mine):.1f} s (median of {len(mine)})"
        )
    affinity = statistics.median(r["seconds"] for r in runs if r["arm"] == "affinity")
    first = statistics.median(r["seconds"] for r in runs if r["arm"] == "first_poller")
    print(f"batch time first_poller / affinity: {first / affinity:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=2, help="samples per example row (default 2)")
    parser.add_argument("--slots", type=int, default=4, help="agent slots per worker (default 4)")
    parser.add_argument(
        "--blob-mb", type=int, default=32, help="random bytes of each image copy's own layer (default 32)"
    )
    parser.add_argument(
        "--mbps", type=float, default=8.0, help="the registry front's bandwidth per connection, MB/s (default 8)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds of both arms, alternating (default 1)")
    asyncio.run(main(parser.parse_args()))
