"""What Temporal costs: the same rollouts driven by a plain asyncio driver and by the workflows, in one run.

For each N (default 1, 8, 32) the bundled example tasks run as N concurrent rollouts, ``--rounds`` times per driver:
``plain`` (``bench.plain_rollouts``: the libraries the activities call, wired as ``worker.py`` wires them, no
Temporal) and ``workflows`` (``CodingAgentRollout`` through a Temporal dev server and ONE ``worker.py``). Both get
the same environment, the same rows, real Docker sandboxes, the real Claude Code binary and the scripted ``oracle``
policy from one ``ScriptedPolicyServer`` in this process; batches run one at a time, and each round runs both
drivers on the same rows, alternating which goes first.

Per N and driver it prints wall time per rollout, throughput, CPU core-seconds per rollout (**stack** = driver +
Temporal + Docker daemons + sandboxes; **orchestration** = driver + Temporal), failures and the driver's RSS peak.
The ratio workflows / plain is the price of durability measured in the same run. Method and results:
docs/benchmarks.md, "What Temporal costs". No thresholds, no assertions. From the repository root::

    .venv/bin/python -m bench.temporal_cost_bench --n 1 8 32 [--rounds 3] [--json out.json] [--keep-temp]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from bench.harness.docker_events import DockerEvents
from bench.harness.proc_watch import ProcWatcher
from bench.harness.procfs import CGROUP_DOCKER, RssSampler, machine_busy_s, own_cpu_s, proc_argv, proc_cpu, total_cpu_s
from bench.harness.rollout_stack import (
    bench_budgets,
    dev_server_pids,
    docker_daemon_pids,
    example_rows,
    oracle_policy,
    round_robin,
    running_servers,
    sandbox_gateway,
    stack_env,
)
from bench.harness.stats import quantile
from bench.plain_rollouts import PlainDriver
from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollouts import RolloutInput
from durable_rollouts.task_sources.dataset_rows import DatasetRow
from durable_rollouts.trainer_client.local_services import worker_process
from durable_rollouts.trainer_client.rollout_runs import start_rollout, workflow_id_for

PLAIN, WORKFLOWS = "plain", "workflows"
STACK_PARTS = ("driver", "driver_children", "temporal", "docker_daemons", "sandboxes")
# Docker calls that show as events of a batch's containers, by kind (inspections, lists and size queries do not).
DOCKER_CALLS = {
    "execs": ("exec_create",),
    "archives": ("extract-to-dir", "archive-path"),
    "lifecycle": ("create", "start", "kill", "die", "destroy"),
}
# The breakdown's components, in the order its table prints them: (key in cpu_s_per_rollout, heading).
COMPONENTS = (
    ("claude_code", "Claude Code"),
    ("agent_rest", "rest of agent sandbox"),
    ("grading_sandboxes", "grading sandbox"),
    ("docker_daemons", "dockerd + containerd"),
    ("driver_all", "driver (worker) + children"),
    ("temporal", "Temporal server"),
    ("stack", "stack"),
)


# --------------------------------------------------------------------------- CPU accounting


def _host_processes(skip: set[int]) -> dict[int, tuple[str, float]]:
    """Every host process outside a container and outside ``skip``, but init: pid -> (name, CPU seconds incl. reaped
    children). Init is left out because it reaps the sandboxes' shims, so its children's time repeats the sandboxes'.
    The name is the script for an interpreter, else the executable's."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip or entry == "1":
            continue
        try:
            with open(f"/proc/{entry}/cgroup") as f:
                if CGROUP_DOCKER.search(f.read()):
                    continue
        except OSError:
            continue
        argv = proc_argv(int(entry))
        if not argv:
            continue
        name = Path(argv[0]).name
        if name.startswith("python") and len(argv) > 1:
            name = Path(argv[1]).name
        found[int(entry)] = (name, sum(proc_cpu(int(entry))))
    return found


class StackCpu:
    """Cumulative CPU seconds of the long-lived processes (drivers, dev server, Docker daemons), this process and the
    machine; ``snapshot`` also reads every other host process, to say what "other" was."""

    def __init__(self, drivers: dict[str, int], temporal_address: str):
        self.drivers = drivers
        self.daemons = docker_daemon_pids()
        self.temporal = dev_server_pids(temporal_address)
        self.known = {os.getpid(), *drivers.values(), *self.daemons, *self.temporal}

    def others(self) -> dict[int, tuple[str, float]]:
        return _host_processes(self.known)

    @staticmethod
    def top_others(
        before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], top: int = 3
    ) -> list[tuple[str, float]]:
        """The names that used the most CPU between two ``others()`` readings (a process born between them counts in
        full; one that died between them is lost unless a process read here reaped it)."""
        used: collections.Counter[str] = collections.Counter()
        for pid, (name, cpu_s) in after.items():
            used[name] += cpu_s - (before[pid][1] if pid in before and before[pid][0] == name else 0.0)
        return [(name, cpu_s) for name, cpu_s in used.most_common(top) if cpu_s >= 0.05]

    def snapshot(self) -> dict[str, float]:
        out = {
            "machine": machine_busy_s(),
            "temporal": total_cpu_s(self.temporal),
            "docker_daemons": total_cpu_s(self.daemons),
            "bench": own_cpu_s(),
        }
        for name, pid in self.drivers.items():
            own, children = proc_cpu(pid)
            out[f"{name}_own"], out[f"{name}_children"] = own, children
        return out


# --------------------------------------------------------------------------- one batch


@dataclass
class Outcome:
    workflow_id: str
    status: str
    reason: str | None = None
    reward: float = 0.0
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def _batch(
    rows: list[DatasetRow], n: int, offset: int, sub_run: str, budgets: RolloutBudgets
) -> list[tuple[str, RolloutInput]]:
    """N rollouts of the rows taken round-robin from ``offset`` (both drivers get the same batch for one round)."""
    return [
        (workflow_id_for(sub_run, r.task, r.sample_index, r.group_index), r)
        for r in round_robin(rows, n, budgets, offset)
    ]


async def _drive_workflows(
    client: Client, batch: list[tuple[str, RolloutInput]], sub_run: str, task_queue: str, t0: float
) -> list[Outcome]:
    async def one(rollout: RolloutInput) -> Outcome:
        handle: WorkflowHandle | None = None
        wid = workflow_id_for(sub_run, rollout.task, rollout.sample_index, rollout.group_index)
        try:
            handle = await start_rollout(client, rollout, sub_run, task_queue)
            result = await handle.result()
        except Exception as error:  # noqa: BLE001 - a rollout that cannot be collected is a failure, reported
            return Outcome(wid, "failed", f"{type(error).__name__}: {error}"[:300], wall_s=time.time() - t0)
        return Outcome(
            wid,
            result.status,
            result.abort_reason,
            result.reward,
            time.time() - t0,
            {
                "elapsed_s": result.elapsed_s,
                "turns": result.turns,
                "sampled_tokens": sum(s.n_sampled for s in result.segments),
            },
        )

    return list(await asyncio.gather(*(one(r) for _, r in batch)))


async def _drive_plain(driver: PlainDriver, batch: list[tuple[str, RolloutInput]], t0: float) -> list[Outcome]:
    outcomes: list[Outcome] = []

    def arrived(wid: str, result: dict[str, Any]) -> None:
        reason = result.get("abort_reason") or result.get("error")
        extra = {
            k: v for k, v in result.items() if k not in ("workflow_id", "status", "abort_reason", "error", "reward")
        }
        outcomes.append(
            Outcome(wid, result["status"], reason, float(result.get("reward", 0.0)), time.time() - t0, extra)
        )

    await driver.run(batch, arrived)
    return outcomes


def _stats(values: list[float]) -> dict[str, float | None]:
    return {
        "mean": statistics.fmean(values) if values else None,
        "p50": quantile(values, 0.5),
        "max": max(values, default=None),
    }


@dataclass
class Batch:
    """One driver's run of one round's batch: its outcomes and the CPU seconds it used, by part (totals)."""

    n: int
    driver: str
    wall_s: float
    outcomes: list[Outcome]
    cpu_s: dict[str, float]
    rss_peak_kb: int
    notes: list[str]
    top_others: list[tuple[str, float]]


async def run_batch(
    name: str,
    n: int,
    round_index: int,
    run_id: str,
    rows: list[DatasetRow],
    budgets: RolloutBudgets,
    drive,
    cpu: StackCpu,
    rss: RssSampler,
    watcher: ProcWatcher,
    events: DockerEvents,
) -> Batch:
    sub_run = f"{run_id}-{name}-n{n}r{round_index}"
    batch = _batch(rows, n, round_index * n, sub_run, budgets)
    print(
        f"\n=== N={n} round {round_index + 1} {name}: {n} rollouts (run id {sub_run}, load {os.getloadavg()[0]:.1f}) "
        f"===",
        flush=True,
    )
    others0 = cpu.others()
    cpu0 = cpu.snapshot()
    t0 = time.time()
    outcomes = await drive(batch, sub_run, t0)
    t1 = time.time()
    cpu1 = cpu.snapshot()
    top_others = cpu.top_others(others0, cpu.others())
    await asyncio.sleep(0.5)  # the watcher's last cgroup reading of the batch's last sandboxes
    used = {k: cpu1[k] - cpu0[k] for k in cpu0}
    prefix = f"rollout-{sub_run}-"
    containers = {
        e.container_id: e.purpose for e in events.events if e.action == "create" and e.workflow_id.startswith(prefix)
    }
    claude = [watcher.first_span(c, "claude") for c, purpose in containers.items() if purpose == "agent"]
    parts = {
        "driver": used[f"{name}_own"],
        "driver_children": used[f"{name}_children"],
        "temporal": used["temporal"] if name == WORKFLOWS else 0.0,
        "docker_daemons": used["docker_daemons"],
        "sandboxes": sum(watcher.container_cpu_s.get(c, 0.0) for c in containers),
        "agent_sandboxes": sum(
            watcher.container_cpu_s.get(c, 0.0) for c, purpose in containers.items() if purpose == "agent"
        ),
    }
    parts["grading_sandboxes"] = parts["sandboxes"] - parts["agent_sandboxes"]
    parts["claude_code"] = sum(s.cpu_s for s in claude if s is not None)
    parts["agent_rest"] = parts["agent_sandboxes"] - parts["claude_code"]
    for kind, actions in DOCKER_CALLS.items():
        parts[f"docker_{kind}"] = float(sum(e.action in actions for e in events.events if e.container_id in containers))
    parts["turns"] = float(sum(o.extra.get("turns", 0) for o in outcomes))
    parts["stack"] = sum(parts[k] for k in STACK_PARTS)
    parts["driver_all"] = parts["driver"] + parts["driver_children"]
    parts["orchestration"] = parts["driver_all"] + parts["temporal"]
    parts["bench"] = used["bench"]
    parts["machine"] = used["machine"]
    parts["other"] = used["machine"] - parts["stack"] - used["bench"]
    notes = []
    missing = sum(c not in watcher.container_cpu_s for c in containers)
    if missing:
        notes.append(f"{missing} of {len(containers)} sandboxes had no cgroup reading")
    agents = sum(p == "agent" for p in containers.values())
    if sum(s is not None for s in claude) < agents:
        notes.append(f"Claude Code seen in {sum(s is not None for s in claude)} of {agents} agent sandboxes")
    result = Batch(n, name, t1 - t0, outcomes, parts, rss.peak_between(t0, t1 + 0.5), notes, top_others)
    failed = [o for o in outcomes if o.status != "completed"]
    walls = [o.wall_s for o in outcomes]
    print(
        f"  batch {t1 - t0:.1f} s; wall/rollout mean {statistics.fmean(walls):.1f} s, max {max(walls):.1f} s; "
        f"failures {len(failed)} {dict(collections.Counter(o.reason or o.status for o in failed)) or ''}"
        + (f"; note: {'; '.join(notes)}" if notes else ""),
        flush=True,
    )
    for o in failed:
        print(f"    {o.workflow_id}: {o.status} {o.reason or ''}", flush=True)
    print("  CPU core-s per rollout: " + ", ".join(f"{k} {v / n:.2f}" for k, v in parts.items()), flush=True)
    print(
        "  other, top host processes (core-s in the batch): "
        + (", ".join(f"{k} {v:.2f}" for k, v in top_others) or "none"),
        flush=True,
    )
    return result


def summarize(batches: list[Batch]) -> dict[str, Any]:
    """One (N, driver) over its rounds: wall stats over every rollout, CPU per rollout = total / rollouts,
    throughput = rollouts / summed batch wall time."""
    outcomes = [o for b in batches for o in b.outcomes]
    rollouts = len(outcomes)
    failed = [o for o in outcomes if o.status != "completed"]
    return {
        "n": batches[0].n,
        "driver": batches[0].driver,
        "rounds": len(batches),
        "rollouts": rollouts,
        "batch_wall_s": [b.wall_s for b in batches],
        "rollouts_per_min": rollouts / sum(b.wall_s for b in batches) * 60,
        "wall_per_rollout_s": _stats([o.wall_s for o in outcomes]),
        "cpu_s_per_rollout": {k: sum(b.cpu_s[k] for b in batches) / rollouts for k in batches[0].cpu_s},
        "completed": rollouts - len(failed),
        "solved": sum(o.reward >= 1.0 for o in outcomes),
        "failures": len(failed),
        "failure_reasons": dict(collections.Counter(o.reason or o.status for o in failed)),
        "driver_rss_peak_mb": max(b.rss_peak_kb for b in batches) / 1024,
        "notes": [note for b in batches for note in b.notes],
        "top_others": [b.top_others for b in batches],
        "outcomes": [o.__dict__ for o in outcomes],
    }


# --------------------------------------------------------------------------- report


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}x"


def _paired(summaries: list[dict]) -> list[tuple[int, dict, dict]]:
    """(N, plain summary, workflows summary) for every N both drivers ran, in order of N."""
    by = {(s["n"], s["driver"]): s for s in summaries}
    return [
        (n, by[n, PLAIN], by[n, WORKFLOWS])
        for n in sorted({s["n"] for s in summaries})
        if (n, PLAIN) in by and (n, WORKFLOWS) in by
    ]


def print_tables(summaries: list[dict]) -> None:
    print(
        "\n| N | driver | rollouts ok / failed | wall/rollout mean / p50 / max s | rollouts/min | CPU s/rollout: stack "
        "(driver + children, "
        "Temporal, daemons, sandboxes [Claude Code]) | orchestration | this process | other | driver RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in summaries:
        w, c = s["wall_per_rollout_s"], s["cpu_s_per_rollout"]
        reasons = f" {s['failure_reasons']}" if s["failures"] else ""
        print(
            f"| {s['n']} | {s['driver']} | {s['completed']} / {s['failures']}{reasons} | {_f(w['mean'])} / "
            f"{_f(w['p50'])} / {_f(w['max'])} "
            f"| {s['rollouts_per_min']:.2f} | **{c['stack']:.2f}** ({c['driver']:.2f} + {c['driver_children']:.2f}, "
            f"{c['temporal']:.2f}, "
            f"{c['docker_daemons']:.2f}, {c['sandboxes']:.2f} [{c['claude_code']:.2f}]) | {c['orchestration']:.2f} | "
            f"{c['bench']:.2f} "
            f"| {c['other']:.2f} | {s['driver_rss_peak_mb']:.0f} |"
        )
    print("\nworkflows / plain, same run:\n")
    print("| N | wall/rollout mean | p50 | max | CPU/rollout (stack) | CPU/rollout (orchestration) | throughput |")
    print("|---|---|---|---|---|---|---|")
    for n, plain, wf in _paired(summaries):
        ww, pw = wf["wall_per_rollout_s"], plain["wall_per_rollout_s"]
        wc, pc = wf["cpu_s_per_rollout"], plain["cpu_s_per_rollout"]
        print(
            f"| {n} | {_ratio(ww['mean'], pw['mean'])} | {_ratio(ww['p50'], pw['p50'])} | "
            f"{_ratio(ww['max'], pw['max'])} "
            f"| {_ratio(wc['stack'], pc['stack'])} | {_ratio(wc['orchestration'], pc['orchestration'])} "
            f"| {_ratio(wf['rollouts_per_min'], plain['rollouts_per_min'])} |"
        )


def print_breakdown(summaries: list[dict]) -> None:
    """Per N: each component's core-seconds per rollout and per turn for both drivers, and the Docker calls per
    rollout."""
    print("\nper component, core-s per rollout (per turn), workflows against the same run's plain driver:\n")
    print("| N | turns/rollout | component | plain | workflows | workflows / plain |")
    print("|---|---|---|---|---|---|")
    for n, plain, wf in _paired(summaries):
        wc, pc = wf["cpu_s_per_rollout"], plain["cpu_s_per_rollout"]
        turns = f"{pc['turns']:.1f} / {wc['turns']:.1f}"
        for key, heading in COMPONENTS:
            cells = [f"{c[key]:.2f} ({c[key] / c['turns']:.3f})" if c["turns"] else f"{c[key]:.2f}" for c in (pc, wc)]
            print(f"| {n} | {turns} | {heading} | {cells[0]} | {cells[1]} | {_ratio(wc[key], pc[key])} |")
        calls = [" + ".join(f"{c[f'docker_{kind}']:.1f}" for kind in DOCKER_CALLS) for c in (pc, wc)]
        print(
            f"| {n} | {turns} | Docker calls seen as events ({' + '.join(DOCKER_CALLS)}) | {calls[0]} | {calls[1]} | |"
        )


# --------------------------------------------------------------------------- main


async def main_async(args: argparse.Namespace) -> int:
    run_id = f"tcost{time.strftime('%H%M%S')}{uuid.uuid4().hex[:4]}"
    task_queue = f"bench-rollouts-{run_id}"
    budgets = bench_budgets(args.agent_budget, args.eval_timeout)
    rows = example_rows()
    tmp = Path(tempfile.mkdtemp(prefix=f"temporal-cost-bench-{run_id}-"))
    print(f"run id {run_id}; temp dir {tmp}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}", flush=True)
    print(f"tasks: {[r.task.instance_id for r in rows]} (repeated round-robin); N = {args.n}", flush=True)

    gateway = await sandbox_gateway()
    policy = await oracle_policy(oracle_explore_turns=args.explore_turns)
    watcher = ProcWatcher()
    events = DockerEvents()
    summaries: list[dict] = []
    logs = [tmp / "worker.log", tmp / "plain.log"]
    async with (
        running_servers(policy, run_id, tmp, lambda: logs, args.keep_temp) as servers,
        contextlib.AsyncExitStack() as stack,
    ):
        print(
            f"temporal dev server {servers.address}; policy server {servers.policy_url}; adapters bind {gateway}",
            flush=True,
        )
        common = stack_env(servers.policy_url, gateway, budgets, max(args.n))
        stack.push_async_callback(events.stop)
        stack.callback(watcher.stop)
        watcher.start()
        await events.start()
        worker = await stack.enter_async_context(
            worker_process(
                servers.address,
                ["--adapter-port", "0", "--host-id", f"bench-{run_id}"],
                env={**common, "ROLLOUT_TASK_QUEUE": task_queue, "ROLLOUT_RESULTS_DIR": str(tmp / "results")},
                log_path=tmp / "worker.log",
            )
        )
        plain_env = {
            **common,
            "ROLLOUT_HOST_ID": f"plain-{run_id}",
            "ROLLOUT_RESULTS_DIR": str(tmp / "plain"),
            "SHIM_PORT": "0",
        }
        plain = await stack.enter_async_context(PlainDriver(plain_env, tmp / "plain.log"))
        assert plain.proc is not None
        print(f"worker pid {worker.pid}; plain driver pid {plain.proc.pid}", flush=True)
        cpu = StackCpu({WORKFLOWS: worker.pid, PLAIN: plain.proc.pid}, servers.address)
        samplers = {WORKFLOWS: RssSampler(worker.pid), PLAIN: RssSampler(plain.proc.pid)}
        for sampler in samplers.values():
            sampler.start()
            stack.push_async_callback(sampler.stop)

        async def drive_workflows(batch, sub_run, t0):
            return await _drive_workflows(servers.env.client, batch, sub_run, task_queue, t0)

        async def drive_plain(batch, sub_run, t0):
            return await _drive_plain(plain, batch, t0)

        drivers = {WORKFLOWS: drive_workflows, PLAIN: drive_plain}
        for n in args.n:
            batches: dict[str, list[Batch]] = {PLAIN: [], WORKFLOWS: []}
            for r in range(args.rounds):
                for name in (PLAIN, WORKFLOWS) if r % 2 == 0 else (WORKFLOWS, PLAIN):
                    batches[name].append(
                        await run_batch(
                            name, n, r, run_id, rows, budgets, drivers[name], cpu, samplers[name], watcher, events
                        )
                    )
                    await asyncio.sleep(2)
            summaries.extend(summarize(batches[name]) for name in (PLAIN, WORKFLOWS))

    print_tables(summaries)
    print_breakdown(summaries)
    print(
        "\nwall/rollout = batch handed over -> that rollout's result in this process; stack CPU = driver process (+ "
        "reaped children) "
        "+ Temporal dev server + dockerd/containerd + the batch's sandbox cgroups; orchestration = driver + children + "
        "Temporal; "
        "'this process' = policy server, /proc watcher, workflow client (not compared)."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=1, default=str))
        print(f"json: {args.json}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--n", type=int, nargs="+", default=[1, 8, 32], help="concurrent rollouts per step (each driver)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="batches per N and driver; the drivers alternate, plain first in odd rounds",
    )
    parser.add_argument("--agent-budget", type=int, default=600, help="SWE_TIME_BUDGET_SEC for every rollout")
    parser.add_argument("--eval-timeout", type=int, default=300, help="SWE_EVAL_TIMEOUT_SEC for every rollout")
    parser.add_argument(
        "--explore-turns",
        type=int,
        default=0,
        help="read-only turns the oracle takes before its patch (40: a 43-turn rollout)",
    )
    parser.add_argument("--json", help="also write the summaries (with per-rollout outcomes) here")
    parser.add_argument("--keep-temp", action="store_true", help="keep the temp dir (worker and plain driver logs)")
    return parser.parse_args(argv)


def main() -> None:
    sys.exit(asyncio.run(main_async(parse_args())))


if __name__ == "__main__":
    main()
