"""Docker costs: what each kind of Docker call costs the host, and what watching N sandboxes' disk budget costs.

Everything runs against agent sandboxes booted by the library (``DockerSandboxes.boot``, no Temporal) from the
bench's own image (``bench.harness.repo_image``: a repository of ``--files`` files, which the boot's ``chown -R``
copies whole into the writable layer). Three parts, each with its baseline in the same run:

* **calls**: the host CPU of each kind of call, one at a time; the ``docker exec`` CLI is the baseline of the
  engine's API (shipped);
* **disk watch**: ``--sandboxes`` idle sandboxes with no watch (the baseline), with the watch sampling Docker alone
  every 5 s (before the write counter) and as shipped; a watch's cost is its CPU over the no-watch phase's;
* **overshoot**: a fast writer past a ``--budget`` budget; per variant, the layer's size over the budget when the
  watch fired.

Method and results: docs/benchmarks.md, "Docker costs". No thresholds. From the repository root (about 10 minutes
with the defaults)::

    flock /tmp/bench.lock .venv/bin/python -m bench.docker_costs_bench [--files 5000] [--sandboxes 32] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import statistics
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import docker

from bench.harness.procfs import machine_busy_s, own_cpu_s, pids_matching, total_cpu_s
from bench.harness.repo_image import build_repo_image, repo_task
from bench.harness.rollout_stack import docker_daemon_pids
from durable_rollouts.contracts.sandboxes import SandboxHandle, SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.disk_watch import DiskWatch
from durable_rollouts.docker_sandbox.engine_exec import exec_output
from durable_rollouts.docker_sandbox.limits import SandboxLimits, SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.docker_sandbox.write_counter import WriteCounter

WATCH_VARIANTS = {"docker-only": False, "write-counter": True}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _shim_of(container_id: str) -> list[int]:
    return pids_matching(lambda argv: "containerd-shim" in argv[0] and container_id in argv)


class Meter:
    """CPU seconds of dockerd + containerd, a container's shim, this process, its reaped children and the machine."""

    def __init__(self, shim: list[int] | None = None):
        self.daemons = docker_daemon_pids()
        self.shim = shim or []

    def read(self) -> dict[str, float]:
        return {
            "daemons": total_cpu_s(self.daemons),
            "shim": total_cpu_s(self.shim),
            "own": own_cpu_s(),
            "children": _children_cpu_s(),
            "machine": machine_busy_s(),
        }

    @staticmethod
    def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        return {key: after[key] - before[key] for key in before}


async def boot(sandboxes: DockerSandboxes, task: TaskSpec, run_id: str, index: int) -> SandboxHandle:
    request = SandboxRequest(task=task, workflow_id=f"bench-docker-costs-{run_id}-{index}", attempt=0, purpose="agent")
    return await sandboxes.boot(request)


# --------------------------------------------------------------------------- calls


async def measure_calls(
    sandboxes: DockerSandboxes, handle: SandboxHandle, task: TaskSpec, run_id: str, calls: int, boots: int
) -> dict[str, Any]:
    shim = _shim_of(handle.container_id)
    init_pid = await sandboxes.init_pid(handle.container_id)
    counter = WriteCounter.for_container(handle.container_id, init_pid)
    assert counter is not None, "the write counter needs the engine on this host"
    await sandboxes.write_file(handle, "/tmp/one-kb.txt", "x" * 1024)

    async def cli_exec() -> None:
        await asyncio.to_thread(
            subprocess.run, ["docker", "exec", handle.container_id, "true"], check=True, capture_output=True
        )

    async def api_exec() -> None:
        await exec_output(sandboxes.endpoint, handle.container_id, ["true"], user="root", cwd="/", env=None)

    async def put() -> None:
        await sandboxes.write_file(handle, "/tmp/put.txt", "y" * 1024)

    async def get() -> None:
        await sandboxes.read_file(handle, "/tmp/one-kb.txt", 4096)

    async def size() -> None:
        await sandboxes.layer_bytes(handle.container_id)

    async def count() -> None:
        counter.read()

    kinds: dict[str, Callable[[], Awaitable[None]]] = {
        "exec (docker CLI)": cli_exec,
        "exec (engine API)": api_exec,
        "put_archive 1 KB": put,
        "get_archive 1 KB": get,
        "exact layer size": size,
        "write counter read": count,
    }
    meter = Meter(shim)
    results: dict[str, Any] = {}
    for name, call in kinds.items():
        await call()
        before, started = meter.read(), time.perf_counter()
        for _ in range(calls):
            await call()
        used = Meter.delta(before, meter.read())
        results[name] = {key: value / calls for key, value in used.items()} | {
            "wall_s": (time.perf_counter() - started) / calls
        }
        print(f"  {name:20s} " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in results[name].items()), flush=True)
    lifecycle = Meter()
    before, started = lifecycle.read(), time.perf_counter()
    for index in range(boots):
        await sandboxes.destroy(await boot(sandboxes, task, run_id, 1000 + index))
    used = Meter.delta(before, lifecycle.read())
    results["boot + destroy"] = {key: value / boots for key, value in used.items()} | {
        "wall_s": (time.perf_counter() - started) / boots
    }
    print(
        "  boot + destroy       " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in results["boot + destroy"].items()),
        flush=True,
    )
    return results


# --------------------------------------------------------------------------- disk watch


async def watch_phase(
    sandboxes: DockerSandboxes, handles: list[SandboxHandle], variant: str | None, seconds: float
) -> dict[str, float]:
    meter = Meter()
    async with contextlib.AsyncExitStack() as stack:
        watches = []
        if variant is not None:
            for handle in handles:
                watches.append(
                    await stack.enter_async_context(
                        DiskWatch(sandboxes, handle, 10 << 30, use_write_counter=WATCH_VARIANTS[variant])
                    )
                )
        before = meter.read()
        await asyncio.sleep(seconds)
        used = Meter.delta(before, meter.read())
    return {
        "cpu_s": used["daemons"] + used["own"],
        "machine_s": used["machine"],
        "exact_sizes": float(sum(w.exact_samples for w in watches)),
    }


async def measure_watch(
    sandboxes: DockerSandboxes, handles: list[SandboxHandle], seconds: float, rounds: int
) -> dict[str, Any]:
    phases: dict[str, list[dict[str, float]]] = {"none": [], **{v: [] for v in WATCH_VARIANTS}}
    order = ["none", *WATCH_VARIANTS]
    for round_index in range(rounds):
        for name in order if round_index % 2 == 0 else list(reversed(order)):
            phase = await watch_phase(sandboxes, handles, None if name == "none" else name, seconds)
            phases[name].append(phase)
            print(
                f"  round {round_index + 1} {name:13s} dockerd+containerd+watches {phase['cpu_s']:.2f} core-s, exact "
                f"sizes {phase['exact_sizes']:.0f}",
                flush=True,
            )
    baseline = statistics.fmean(p["cpu_s"] for p in phases["none"])
    out: dict[str, Any] = {"baseline_core_s": baseline, "seconds": seconds, "sandboxes": len(handles)}
    for variant in WATCH_VARIANTS:
        cost = statistics.fmean(p["cpu_s"] for p in phases[variant]) - baseline
        out[variant] = {
            "cost_core_s": cost,
            "share_of_one_core": cost / seconds,
            "exact_sizes_per_sandbox_min": statistics.fmean(p["exact_sizes"] for p in phases[variant])
            / len(handles)
            / seconds
            * 60,
        }
    return out


# --------------------------------------------------------------------------- overshoot


async def measure_overshoot(
    sandboxes: DockerSandboxes, handle: SandboxHandle, budget: int, rounds: int
) -> dict[str, Any]:
    out: dict[str, list[dict[str, float]]] = {v: [] for v in WATCH_VARIANTS}
    for round_index in range(rounds):
        for variant in WATCH_VARIANTS if round_index % 2 == 0 else list(reversed(WATCH_VARIANTS)):
            name = f"fill{round_index}{variant[0]}"
            async with DiskWatch(sandboxes, handle, budget, use_write_counter=WATCH_VARIANTS[variant]) as watch:
                started = time.monotonic()
                await sandboxes.start_detached(handle, name, f"head -c {4 * budget} /dev/zero > /tmp/fill.bin")
                finished = await watch.first(sandboxes.wait_detached(handle, name, timeout_s=600))
                took = time.monotonic() - started
            await sandboxes.kill_detached(handle, name)
            await sandboxes.exec(handle, "rm -f /tmp/fill.bin", user="root")
            over = watch.used - budget
            out[variant].append(
                {"over_bytes": float(over), "fired": float(finished is None), "rate_bps": watch.used / took}
            )
            print(
                f"  round {round_index + 1} {variant:13s} over the budget by {over / 1e6:.0f} MB when it fired "
                f"({watch.used / took / 1e6:.0f} MB/s)",
                flush=True,
            )
    return {
        variant: {"over_mb_median": statistics.median(r["over_bytes"] for r in rows) / 1e6, "runs": rows}
        for variant, rows in out.items()
    }


# --------------------------------------------------------------------------- main


async def main_async(args: argparse.Namespace) -> int:
    run_id = uuid.uuid4().hex[:6]
    client = docker.from_env()
    image = await build_repo_image(client, args.files)
    task = repo_task(image, "docker-costs-bench")
    sandboxes = DockerSandboxes(SandboxSettings(lifetime_s=3600, limits=SandboxLimits(disk_bytes=10 << 30)))
    handles: list[SandboxHandle] = []
    report: dict[str, Any] = {"files": args.files}
    try:
        print(f"\n== calls ({args.calls} each; boots {args.boots})", flush=True)
        handles.append(await boot(sandboxes, task, run_id, 0))
        report["calls"] = await measure_calls(sandboxes, handles[0], task, run_id, args.calls, args.boots)
        print(f"\n== overshoot ({args.budget >> 20} MiB budget, {args.overshoot_rounds} rounds)", flush=True)
        report["overshoot"] = await measure_overshoot(sandboxes, handles[0], args.budget, args.overshoot_rounds)
        print(f"\n== disk watch over {args.sandboxes} idle sandboxes, {args.seconds:g} s a phase", flush=True)
        for index in range(1, args.sandboxes):
            handles.append(await boot(sandboxes, task, run_id, index))
        report["watch"] = await measure_watch(sandboxes, handles, args.seconds, args.rounds)
    finally:
        await asyncio.gather(*(sandboxes.destroy(h) for h in handles), return_exceptions=True)
        client.images.remove(image, force=True)
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


def print_report(report: dict[str, Any]) -> None:
    print(f"\nper call ({report['files']}-file repository in the layer), ms of CPU:\n")
    print("| call | dockerd + containerd | shim (+ runc) | this process | its children | machine busy | wall |")
    print("|---|---|---|---|---|---|---|")
    for name, c in report["calls"].items():
        print(
            f"| {name} | {c['daemons'] * 1e3:.1f} | {c['shim'] * 1e3:.1f} | {c['own'] * 1e3:.1f} | "
            f"{c['children'] * 1e3:.1f} | {c['machine'] * 1e3:.1f} | {c['wall_s'] * 1e3:.1f} |"
        )
    calls = report["calls"]
    cli, api = calls["exec (docker CLI)"], calls["exec (engine API)"]
    print(f"\nexec, machine busy per call: docker CLI / engine API = {cli['machine'] / api['machine']:.2f}x")
    w = report["watch"]
    print(
        f"\ndisk watch, {w['sandboxes']} idle sandboxes, cost over the no-watch baseline ({w['baseline_core_s']:.2f} "
        f"core-s in {w['seconds']:g} s):\n"
    )
    print("| variant | share of one core | exact sizes per sandbox per minute |")
    print("|---|---|---|")
    for variant in WATCH_VARIANTS:
        v = w[variant]
        print(f"| {variant} | {v['share_of_one_core'] * 100:.2f} % | {v['exact_sizes_per_sandbox_min']:.2f} |")
    o = report["overshoot"]
    print(
        "\novershoot when the watch fired, median MB: "
        + ", ".join(f"{variant} {o[variant]['over_mb_median']:.0f}" for variant in WATCH_VARIANTS)
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=5000, help="files in the bench image's repository")
    parser.add_argument("--calls", type=int, default=40, help="repeats of each kind of call")
    parser.add_argument("--boots", type=int, default=3, help="boot + destroy cycles measured")
    parser.add_argument("--sandboxes", type=int, default=32, help="idle sandboxes watched at once")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of one disk-watch phase")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three disk-watch phases")
    parser.add_argument("--budget", type=int, default=1 << 30, help="disk budget of the overshoot runs, bytes")
    parser.add_argument("--overshoot-rounds", type=int, default=2, help="overshoot runs per variant")
    parser.add_argument("--json", help="also write the report here")
    return parser.parse_args(argv)


def main() -> None:
    raise SystemExit(asyncio.run(main_async(parse_args())))


if __name__ == "__main__":
    main()
