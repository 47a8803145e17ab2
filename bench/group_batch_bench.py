"""Group-batch benchmark: time to a batch of N GRPO groups with and without over-sampling, under heavy-tailed turns.

A batch of N groups of K samples waits for the slowest of its N·K samples. Over-sampling
(``trainer_client.rollout_groups.fill_batch``) keeps N' > N groups in flight, takes the first N that finish and cuts
the rest as stragglers. Two arms run through the real stack on this host (a Temporal dev server, one ``worker.py``,
Docker sandboxes, Claude Code, the scripted ``oracle`` policy in this process with a log-normal pace per session):
``baseline``, ``fill_batch(n_groups=N, over_sample=N)``, and ``over-sampled``,
``fill_batch(n_groups=N, over_sample=N', straggler_policy="cut")``. The arms of a trial are paired (the n-th session
of both draws the same pace) and alternate which runs first.

It prints each trial's ``time_to_batch_s`` per arm, and the ratio baseline / over-sampled of the medians, the means
and the worst trials. Method and results: docs/benchmarks.md, "Group batches". No thresholds. Run from the
repository root (the task images come from ``bash scripts/build_task_images.sh``)::

    .venv/bin/python -m bench.group_batch_bench [--groups 4 --over-sample 6 --k 2 --median 2 --sigma 1 --trials 5]
    [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.harness.rollout_stack import bench_budgets, example_rows
from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollout_group import GroupInput, GroupResult
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.docker_sandbox.container_layout import LABEL_PREFIX, OWNER_ENV
from durable_rollouts.docker_sandbox.lifecycle import ManagedContainer
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.scripted_policy.turn_delays import LogNormalSessionDelay
from durable_rollouts.task_sources.dataset_rows import DatasetRow
from durable_rollouts.trainer_client.local_services import DevServer, free_port, worker_process
from durable_rollouts.trainer_client.rollout_groups import Batch, fill_batch
from durable_rollouts.trainer_client.rollout_runs import connect, rollout_input

ARMS = ("baseline", "over-sampled")


def group_source(
    run_id: str, rows: list[DatasetRow], k: int, budgets: RolloutBudgets
) -> Callable[[int], list[GroupInput]]:
    """An endless source of groups for ``fill_batch``: group ``g`` is K samples of row ``g mod len(rows)``."""
    indices = itertools.count()
    policy = PolicySpec()

    def next_groups(n: int) -> list[GroupInput]:
        groups = []
        for g in itertools.islice(indices, n):
            task = rows[g % len(rows)].task
            groups.append(
                GroupInput(
                    run_id=run_id,
                    group_index=g,
                    rollouts=[rollout_input(task, s, g, policy, budgets) for s in range(k)],
                )
            )
        return groups

    return next_groups


def group_detail(group: GroupResult, delay: LogNormalSessionDelay) -> dict[str, Any]:
    """A group's status, elapsed time, its samples' outcomes, paces (the turn delay of each sample's session) and
    Claude Code run times."""
    agents = [s.rollout.agent for s in group.samples if s.rollout is not None and s.rollout.agent is not None]
    paces = [delay("", agent.session_id) for agent in agents]
    return {
        "workflow_id": group.workflow_id,
        "status": group.status,
        "elapsed_s": group.elapsed_s,
        "outcomes": [s.outcome for s in group.samples],
        "paces_s": paces,
        "agent_s": [agent.duration_s for agent in agents],
        "pace_s": max(paces, default=0.0),
    }


class Containers:
    """The managed containers (``io.rollouts.managed=1``) the bench's worker creates: all carry ``owner``."""

    def __init__(self, owner: str):
        self.owner = owner
        self.sandboxes = DockerSandboxes()

    def owned(self, container: ManagedContainer) -> bool:
        return container.labels.get(f"{LABEL_PREFIX}.owner") == self.owner

    async def left(self) -> list[str]:
        return [c.name for c in await self.sandboxes.list_managed() if self.owned(c)]

    async def drained(self, timeout_s: float) -> list[str]:
        """Wait until none is left, or ``timeout_s``; the names still there."""
        deadline = time.monotonic() + timeout_s
        while (left := await self.left()) and time.monotonic() < deadline:
            await asyncio.sleep(1.0)
        return left


class Bench:
    def __init__(
        self,
        args: argparse.Namespace,
        client: Client,
        policy: ScriptedPolicyServer,
        task_queue: str,
        containers: Containers,
        prefix: str,
    ):
        self.args, self.client, self.policy, self.task_queue, self.containers, self.prefix = (
            args,
            client,
            policy,
            task_queue,
            containers,
            prefix,
        )
        self.rows = example_rows()
        self.budgets = bench_budgets(args.agent_budget, args.eval_timeout)

    async def batch(self, run_id: str, n_groups: int, over_sample: int) -> tuple[Batch, float]:
        """One ``fill_batch`` and the seconds until it returned."""
        began = time.monotonic()
        source = group_source(run_id, self.rows, self.args.k, self.budgets)
        batch = await fill_batch(self.client, source, n_groups, over_sample, "cut", self.task_queue)
        return batch, time.monotonic() - began

    async def warm_up(self) -> None:
        self.policy.turn_delay = None
        batch, returned_s = await self.batch(f"{self.prefix}-warm", 1, 1)
        print(
            f"warm-up: 1 group of {self.args.k} without delay in {returned_s:.1f} s "
            f"({batch.metrics()['samples_valid']:.0f} valid)",
            flush=True,
        )
        await self.containers.drained(self.args.drain_timeout)

    async def trial(self, arm: str, index: int) -> dict[str, Any]:
        args = self.args
        delay = LogNormalSessionDelay(args.median, args.sigma, args.seed + index, by_arrival=True)
        self.policy.turn_delay = delay
        first_record = len(self.policy.records)
        over_sample = args.groups if arm == "baseline" else args.over_sample
        batch, returned_s = await self.batch(f"{self.prefix}-{arm[0]}{index}", args.groups, over_sample)
        at_return = await self.containers.left()
        left = await self.containers.drained(args.drain_timeout)
        sessions = {record.routing_key for record in self.policy.records[first_record:]}
        metrics = batch.metrics()
        row = {
            "arm": arm,
            "trial": index,
            "seed": delay.seed,
            **metrics,
            "returned_s": returned_s,
            "samples_cut": sum(s.outcome == "cut" for g in batch.cut for s in g.samples),
            "groups_detail": [group_detail(g, delay) for g in [*batch.groups, *batch.cut, *batch.dropped]],
            "sessions": len(sessions),
            "slowest_pace_s": max((delay("", key) for key in sessions), default=0.0),
            "containers_at_return": len(at_return),
            "containers_left": left,
        }
        print(
            f"{arm:>12} trial {index}: time_to_batch {metrics['time_to_batch_s']:6.1f} s, returned {returned_s:6.1f} "
            f"s, "
            f"groups started {metrics['groups_started']:.0f} cut {metrics['groups_cut']:.0f} dropped "
            f"{len(batch.dropped)}, "
            f"valid samples {metrics['samples_valid']:.0f}/{metrics['samples']:.0f}, {len(sessions)} sessions, "
            f"slowest pace {row['slowest_pace_s']:.1f} s/turn, containers at return {len(at_return)}, left {len(left)}",
            flush=True,
        )
        shown = sorted(row["groups_detail"], key=lambda g: g["elapsed_s"])
        print(
            "    groups by elapsed s [slowest pace s/turn]: "
            + ", ".join(
                f"{g['elapsed_s']:.0f}{'' if g['status'] == 'completed' else ' ' + g['status']} [{g['pace_s']:.1f}]"
                for g in shown
            ),
            flush=True,
        )
        return row


def summarise(rows: list[dict[str, Any]], arm: str) -> dict[str, Any]:
    mine = [row for row in rows if row["arm"] == arm]
    return {
        "trials": len(mine),
        "time_to_batch_s": statistics.median(row["time_to_batch_s"] for row in mine),
        "time_to_batch_s_mean": statistics.mean(row["time_to_batch_s"] for row in mine),
        "time_to_batch_s_max": max(row["time_to_batch_s"] for row in mine),
        "time_to_batch_s_per_trial": [row["time_to_batch_s"] for row in mine],
        "returned_s": statistics.median(row["returned_s"] for row in mine),
        "groups_started": sum(row["groups_started"] for row in mine),
        "groups_cut": sum(row["groups_cut"] for row in mine),
        "samples_valid": sum(row["samples_valid"] for row in mine),
        "samples": sum(row["samples"] for row in mine),
    }


def report(args: argparse.Namespace, summary: dict[str, dict[str, Any]]) -> None:
    print(
        f"\nN={args.groups} groups of K={args.k}, over-sampled N'={args.over_sample}; log-normal turn delay per "
        f"session, median "
        f"{args.median:g} s, sigma {args.sigma:g}; oracle policy, example tasks; {args.trials} trials per arm; "
        f"load average now {os.getloadavg()[0]:.2f}\n"
    )
    print(
        "| arm | in flight | time to batch s, median (per trial) | fill_batch returned s, median | groups started / "
        "cut (all trials) | valid samples |"
    )
    print("|---|---|---|---|---|---|")
    for arm in ARMS:
        s = summary[arm]
        in_flight = args.groups if arm == "baseline" else args.over_sample
        trials = ", ".join(f"{t:.1f}" for t in s["time_to_batch_s_per_trial"])
        print(
            f"| {arm} | {in_flight} | {s['time_to_batch_s']:.1f} ({trials}) | {s['returned_s']:.1f} | "
            f"{s['groups_started']:.0f} / {s['groups_cut']:.0f} | {s['samples_valid']:.0f}/{s['samples']:.0f} |"
        )
    base, over = summary["baseline"], summary["over-sampled"]
    kinds = (("medians", "time_to_batch_s"), ("means", "time_to_batch_s_mean"), ("worst trials", "time_to_batch_s_max"))
    print(
        "\ntime to batch, baseline / over-sampled: "
        + ", ".join(f"{base[key] / over[key]:.2f}x ({what})" for what, key in kinds)
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    prefix = f"gbench{time.strftime('%H%M%S')}{uuid.uuid4().hex[:4]}"
    task_queue, containers = f"bench-groups-{prefix}", Containers(f"bench-{prefix}")
    print(f"run {prefix}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}", flush=True)
    renderer = await asyncio.to_thread(PromptRenderer.from_folder, ensure_qwen_tokenizer())
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET))
    )
    policy_url = await policy.start("127.0.0.1", 0)
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix=f"{prefix}-") as results:
            server = DevServer(free_port(), free_port(), Path(results) / "temporal.db", ui=False)
            await server.start()
            try:
                worker_env = {
                    "ROLLOUT_POLICY_URL": policy_url,
                    "ROLLOUT_TASK_QUEUE": task_queue,
                    "ROLLOUT_AGENT_SLOTS": str(max(args.groups, args.over_sample) * args.k),
                    "ROLLOUT_RESULTS_DIR": results,
                    OWNER_ENV: containers.owner,
                }
                async with worker_process(server.address, ["--adapter-port", "0", "--host-id", prefix], env=worker_env):
                    bench = Bench(args, await connect(server.address), policy, task_queue, containers, prefix)
                    await bench.warm_up()
                    for index in range(args.trials):
                        for arm in ARMS if index % 2 == 0 else ARMS[::-1]:
                            rows.append(await bench.trial(arm, index))
            finally:
                await server.stop()
    finally:
        await policy.stop()
        leaked = await containers.sandboxes.reap(containers.owned)
        if leaked:
            print(f"LEAK: {len(leaked)} managed container(s) of this run were left, now removed: {leaked}", flush=True)
        else:
            print(
                f"cleanup: no container labelled {LABEL_PREFIX}.managed=1 of this run "
                f"({LABEL_PREFIX}.owner={containers.owner}) remains",
                flush=True,
            )
    summary = {arm: summarise(rows, arm) for arm in ARMS}
    report(args, summary)
    return {"args": vars(args), "summary": summary, "trials": rows}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4, help="N, groups per batch (default 4)")
    parser.add_argument(
        "--over-sample", type=int, default=6, help="N', groups in flight in the over-sampled arm (default 6)"
    )
    parser.add_argument("--k", type=int, default=2, help="K, samples per group (default 2)")
    parser.add_argument(
        "--median", type=float, default=2.0, help="median seconds per turn of the log-normal session pace (default 2)"
    )
    parser.add_argument("--sigma", type=float, default=1.0, help="sigma of the log-normal session pace (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="trial i draws with seed SEED + i (default 0)")
    parser.add_argument("--trials", type=int, default=5, help="trials per arm (default 5)")
    parser.add_argument(
        "--agent-budget", type=int, default=600, help="agent time budget of every rollout, s (default 600)"
    )
    parser.add_argument(
        "--eval-timeout", type=int, default=300, help="grading timeout of every rollout, s (default 300)"
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=120.0, help="seconds to wait for a trial's sandboxes to go (default 120)"
    )
    parser.add_argument("--json", type=Path, help="also write every trial's numbers here")
    args = parser.parse_args(argv)
    if not 1 <= args.groups <= args.over_sample:
        parser.error("need 1 <= --groups <= --over-sample")
    return args


def main() -> int:
    args = parse_args()
    results = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
