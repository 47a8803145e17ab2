"""Grading calls: how many Docker calls a grading makes and what they cost the host, a worker's first grading of
an image against the ones after it.

Every example row's reference patch is graded through ``graders.evaluate`` over ``DockerSandboxes`` (no Temporal),
one grading at a time, each round one grading per variant back to back: ``first`` (a baseline: the
Python-environment probe's memory forgotten, ``python_envs.forget``), ``split`` (a baseline: the calls cut on
2026-12-07 put back, ``SplitCalls``) and ``remembered`` (shipped). Per grading it prints the engine calls by kind,
the seconds, the CPU of dockerd + containerd and the machine's busy CPU; then medians per variant and the ratio of
each baseline to ``remembered``. Every grading must solve its task. Method and results: docs/benchmarks.md,
"Grading calls". No thresholds. From the repository root (about 3 minutes with the defaults)::

    flock /tmp/bench.lock .venv/bin/python -m bench.grading_calls_bench [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness.procfs import machine_busy_s, total_cpu_s
from bench.harness.rollout_stack import docker_daemon_pids, example_rows
from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox import workspace_diff
from durable_rollouts.docker_sandbox.commands import ExecResult
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.grading import baselines, graders, python_envs
from testbed.call_counts import CountingSandboxes

VARIANTS = ("first", "split", "remembered")


class SplitCalls(CountingSandboxes):
    """Gradings as they were before 2026-12-07: a grader started by one exec and waited for by another, and the
    grading sandbox's workspace set-up exec'd apart from the set-up steps it now hands over to."""

    async def run_detached(
        self,
        handle: SandboxHandle,
        name: str,
        cmd: str,
        timeout_s: float,
        *,
        user: str = "agent",
        env: dict[str, str] | None = None,
    ) -> int | None:
        await self.start_detached(handle, name, cmd, user=user, env=env)
        return await self.wait_detached(handle, name, timeout_s)

    async def exec_in(self, container_id: str, argv: list[str], **kwargs: Any) -> ExecResult:
        cut = (
            next((i for i in range(4, len(argv)) if argv[i : i + 3] == _STEPS_HEAD), None)
            if argv[3:4] == ["prepare"]
            else None
        )
        if cut is None:
            return await super().exec_in(container_id, argv, **kwargs)
        setup = await super().exec_in(container_id, argv[:cut], **kwargs)
        if setup.exit_code != 0:
            return setup
        workdir = argv[4]  # the prepare script's $1
        return await super().exec_in(container_id, argv[cut:], **{**kwargs, "cwd": workdir})


# How the set-up steps' command begins (``bash -c <script>``): where a grading sandbox's prepare exec hands over.
_STEPS_HEAD = workspace_diff.baseline_command([], 0.0)[0][:3]


async def grade(sandboxes: CountingSandboxes, task: TaskSpec, run_id: str, variant: str) -> dict[str, Any]:
    """One grading of ``task``'s reference patch under ``variant`` (``sandboxes`` is that variant's): its calls,
    seconds and CPU."""
    if variant == "first":
        python_envs.forget()
        baselines.forget()
    daemons = docker_daemon_pids()
    sandboxes.calls.clear()
    request = EvalRequest(
        task=task,
        diff=task.reference_patch,
        workflow_id=f"bench-grading-calls-{run_id}-{uuid.uuid4().hex[:6]}",
        timeout_s=300,
    )
    shipped_files_step = graders.files_step
    if variant == "split":  # no files step: the patch, guard files and scripts go by archives, as before 2026-12-07
        graders.files_step = lambda files: None
    try:
        daemons_before, machine_before, started = total_cpu_s(daemons), machine_busy_s(), time.monotonic()
        graded = await graders.evaluate(sandboxes, request)
        seconds = time.monotonic() - started
    finally:
        graders.files_step = shipped_files_step
    if not graded.result.solved:
        raise RuntimeError(
            f"{task.instance_id}: the reference patch did not solve it ({variant}): {graded.result.log_tail[-2000:]}"
        )
    return {
        "task": task.instance_id,
        "variant": variant,
        "calls": dict(sandboxes.calls),
        "seconds": seconds,
        "daemons_cpu_s": total_cpu_s(daemons) - daemons_before,
        "machine_cpu_s": machine_busy_s() - machine_before,
    }


def summary(gradings: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Medians per variant of each measure and of each kind of call."""
    out: dict[str, dict[str, float]] = {}
    for variant in VARIANTS:
        rows = [g for g in gradings if g["variant"] == variant]
        kinds = sorted({kind for g in rows for kind in g["calls"]})
        medians = {f"calls: {kind}": statistics.median(g["calls"].get(kind, 0) for g in rows) for kind in kinds}
        medians["calls: all"] = statistics.median(sum(g["calls"].values()) for g in rows)
        for measure in ("seconds", "daemons_cpu_s", "machine_cpu_s"):
            medians[measure] = statistics.median(g[measure] for g in rows)
        out[variant] = medians
    return out


async def main_async(rounds: int) -> dict[str, Any]:
    tasks = [row.task for row in example_rows() if row.task.grader is not None]
    settings = SandboxSettings(lifetime_s=900)
    shipped = CountingSandboxes(settings)
    sandboxes = {"first": shipped, "split": SplitCalls(settings), "remembered": shipped}
    run_id = uuid.uuid4().hex[:6]
    gradings = []
    for task in tasks:  # warm-up, untimed: the image's pages in the cache
        await grade(shipped, task, run_id, "first")
    for round_index in range(rounds):
        for task in tasks:
            for variant in VARIANTS:
                result = await grade(sandboxes[variant], task, run_id, variant)
                gradings.append(result)
                print(
                    f"round {round_index + 1} {variant:10s} {task.instance_id:28s} {sum(result['calls'].values()):3d} "
                    f"calls"
                    f" {result['seconds']:6.2f} s  daemons {result['daemons_cpu_s']:5.2f} s  machine "
                    f"{result['machine_cpu_s']:5.2f} s"
                )
    return {
        "rounds": rounds,
        "tasks": [task.instance_id for task in tasks],
        "gradings": gradings,
        "summary": summary(gradings),
    }


def print_report(report: dict[str, Any]) -> None:
    medians = report["summary"]
    print(f"\nmedian per grading over {len(report['tasks'])} tasks x {report['rounds']} rounds")
    for measure in medians["first"]:
        remembered = medians["remembered"].get(measure, 0.0)
        cells = []
        for baseline in ("first", "split"):
            value = medians[baseline].get(measure, 0.0)
            ratio = f"{value / remembered:5.2f}x" if remembered else "   - "
            cells.append(f"{baseline} {value:7.2f} ({ratio})")
        print(f"  {measure:24s} {'  '.join(cells)}  remembered {remembered:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = asyncio.run(main_async(args.rounds))
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
