"""Offline-grading benchmark: grading a row whose eval script reinstalls its package, the old way and the new.

The row is ``tempconv-reinstall`` (``examples/tasks/reinstall_dataset.jsonl``), whose ``eval_cmd`` runs
``pip install -e .`` before pytest, as a SWE-bench eval script does. Its reference patch is graded ``--rounds`` times
per variant with the library (``graders.evaluate`` over ``DockerSandboxes``, no Temporal), one grading at a time,
the variants alternating: ``old`` (the baseline: the grading sandbox on the sandbox network and no offline
environment, so pip waits on an index it cannot reach), ``new`` (as shipped: no network and
``durable_rollouts.docker_sandbox.offline_tools``' environment) and, with ``--variants``, ``no-network`` /
``offline-env`` (one change alone). It prints each grading's seconds, the median, whether the reinstall succeeded and
the verdict, then the ratio old / new of the medians. Method and results: docs/benchmarks.md, "Offline grading". No
thresholds. Run from the repository root (the task image is built by ``scripts/build_task_images.sh``)::

    .venv/bin/python -m bench.grading_offline_bench [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker

from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.network import ensure_network
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import graders
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset

DATASET = PROJECT_ROOT / "examples" / "tasks" / "reinstall_dataset.jsonl"
INSTANCE = "tempconv-reinstall"
# variant -> (grading sandboxes without a network, offline environment)
VARIANTS = {"old": (False, False), "new": (True, True), "no-network": (True, False), "offline-env": (False, True)}
REINSTALLED = "Successfully installed tempconv"


def reinstall_task() -> TaskSpec:
    for item in read_dataset(DATASET):
        if isinstance(item, DatasetRow) and item.task.instance_id == INSTANCE:
            return item.task
    raise SystemExit(f"{DATASET}: no usable row {INSTANCE} (run examples/tasks/make_dataset.py)")


async def grade_once(sandboxes: DockerSandboxes, task: TaskSpec, workflow_id: str, timeout_s: int) -> dict[str, Any]:
    started = time.perf_counter()
    graded = await graders.evaluate(
        sandboxes, EvalRequest(task=task, diff=task.reference_patch or "", workflow_id=workflow_id, timeout_s=timeout_s)
    )
    seconds = time.perf_counter() - started
    pip_errors = [line.strip() for line in graded.log.splitlines() if line.strip().startswith("ERROR:")]
    return {
        "seconds": round(seconds, 2),
        "solved": graded.result.solved,
        "reinstalled": REINSTALLED in graded.log,
        "pip_error": pip_errors[-1] if pip_errors else "",
        "log_bytes": len(graded.log.encode()),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    task = reinstall_task()
    network = await asyncio.to_thread(ensure_network, docker.from_env())
    sandboxes = {
        name: DockerSandboxes(
            SandboxSettings(network=network.name, grading_offline=offline, offline_tools=env, lifetime_s=1800)
        )
        for name, (offline, env) in VARIANTS.items()
        if name in args.variants
    }
    prefix = f"bench-grading-offline-{uuid.uuid4().hex[:8]}"
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sandboxes}
    for round_index in range(args.rounds):
        for name, boxes in sandboxes.items():
            outcome = await grade_once(boxes, task, f"{prefix}-{name}-{round_index}", args.timeout)
            runs[name].append(outcome)
            print(
                f"round {round_index} {name:12} {outcome['seconds']:7.2f} s  solved {outcome['solved']}  reinstalled "
                f"{outcome['reinstalled']}",
                flush=True,
            )
    summary = {
        name: {"median_s": statistics.median(r["seconds"] for r in found), "runs": found}
        for name, found in runs.items()
    }
    report(summary)
    return summary


def report(summary: dict[str, dict[str, Any]]) -> None:
    print()
    print(f"{'variant':12} {'median s':>9}  per-row seconds            reinstall  solved  last pip error")
    for name, found in summary.items():
        seconds = ", ".join(f"{r['seconds']:.1f}" for r in found["runs"])
        reinstalled = sum(r["reinstalled"] for r in found["runs"])
        solved = sum(r["solved"] for r in found["runs"])
        error = next((r["pip_error"] for r in reversed(found["runs"]) if r["pip_error"]), "")
        count = len(found["runs"])
        print(
            f"{name:12} {found['median_s']:9.2f}  {seconds:26} {reinstalled}/{count}        {solved}/{count}     "
            f"{error[:90]}"
        )
    if "old" in summary and "new" in summary and summary["new"]["median_s"] > 0:
        print(f"old / new: {summary['old']['median_s'] / summary['new']['median_s']:.1f}x")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="gradings per variant (default 3)")
    parser.add_argument(
        "--variants",
        type=lambda s: [v for v in s.split(",") if v],
        default=["old", "new"],
        help=f"comma-separated, of {', '.join(VARIANTS)} (default old,new)",
    )
    parser.add_argument(
        "--timeout", type=int, default=600, help="the grader's timeout per grading, seconds (default 600)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write raw results here")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    return args


def main() -> int:
    args = parse_args()
    results = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
