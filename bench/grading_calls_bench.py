"""Grading calls: how many Docker calls a grading makes and what they cost the host, a worker's first grading of
an image against the ones after it.

The bench grades the reference patch of each row of the example dataset with the library (``durable_rollouts.grading.graders.evaluate``
over ``DockerSandboxes``, no Temporal), one grading at a time, ``--rounds`` times per task, each round one grading
per variant back to back so drift on a shared machine hits both alike:

* ``first`` (the baseline): the Python-environment probe's memory forgotten just before
  (``python_envs.forget``), as on a worker's first grading of an image;
* ``remembered`` (shipped, every later grading): right after it, the probe answered from memory.

Per grading it prints the engine calls (execs, archives written and read, container creates and removals: every
call this process makes through ``DockerSandboxes``), the seconds from ``evaluate`` called to returned, the CPU of
dockerd + containerd, and the machine's busy CPU (containers, shims and ``runc`` included), medians per variant,
and the ratio first / remembered. Every grading must solve its task. No thresholds. From the repository root
(about 3 minutes with the defaults)::

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

from bench.harness.call_counts import CountingSandboxes
from bench.harness.procfs import machine_busy_s, total_cpu_s
from bench.harness.rollout_stack import docker_daemon_pids, example_rows
from durable_rollouts.contracts.rollout import EvalRequest, TaskSpec
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.grading import graders, python_envs

VARIANTS = ("first", "remembered")


async def grade(sandboxes: CountingSandboxes, task: TaskSpec, run_id: str, variant: str) -> dict[str, Any]:
    """One grading of ``task``'s reference patch under ``variant``: its calls, seconds and CPU."""
    if variant == "first":
        python_envs.forget()
    daemons = docker_daemon_pids()
    sandboxes.calls.clear()
    request = EvalRequest(task=task, diff=task.reference_patch, workflow_id=f"bench-grading-calls-{run_id}-{uuid.uuid4().hex[:6]}", timeout_s=300)
    daemons_before, machine_before, started = total_cpu_s(daemons), machine_busy_s(), time.monotonic()
    graded = await graders.evaluate(sandboxes, request)
    seconds = time.monotonic() - started
    if not graded.result.solved:
        raise RuntimeError(f"{task.instance_id}: the reference patch did not solve it ({variant}): {graded.result.log_tail[-2000:]}")
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
    sandboxes = CountingSandboxes(SandboxSettings(lifetime_s=900))
    run_id = uuid.uuid4().hex[:6]
    gradings = []
    for task in tasks:  # warm-up, untimed: the image's pages in the cache
        await grade(sandboxes, task, run_id, "first")
    for round_index in range(rounds):
        for task in tasks:
            for variant in VARIANTS:
                result = await grade(sandboxes, task, run_id, variant)
                gradings.append(result)
                print(
                    f"round {round_index + 1} {variant:10s} {task.instance_id:28s} {sum(result['calls'].values()):3d} calls"
                    f" {result['seconds']:6.2f} s  daemons {result['daemons_cpu_s']:5.2f} s  machine {result['machine_cpu_s']:5.2f} s"
                )
    return {"rounds": rounds, "tasks": [task.instance_id for task in tasks], "gradings": gradings, "summary": summary(gradings)}


def print_report(report: dict[str, Any]) -> None:
    medians = report["summary"]
    print(f"\nmedian per grading over {len(report['tasks'])} tasks x {report['rounds']} rounds")
    for measure in medians["first"]:
        first, remembered = medians["first"][measure], medians["remembered"].get(measure, 0.0)
        ratio = f"{first / remembered:5.2f}x" if remembered else "   - "
        print(f"  {measure:24s} first {first:7.2f}  remembered {remembered:7.2f}  first / remembered {ratio}")


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
