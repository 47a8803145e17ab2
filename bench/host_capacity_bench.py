"""Host capacity benchmark: how many concurrent agents ONE worker host holds when agents mostly wait on the model.

In RL training an agent spends most of its life waiting for the policy: here the scripted ``oracle`` policy, served in
this process, waits ``--think-s`` seconds before every answer and holds each session's first answer until all N
agents of the step are alive. For the baseline N (default 1) and then each ``--n`` (default 16 32 64) it runs N
concurrent ``CodingAgentRollout`` workflows of the example tasks through a Temporal dev server, a fresh
``worker.py`` per step (``ROLLOUT_AGENT_SLOTS`` = N), real Docker sandboxes and the real Claude Code binary.

Per step it prints memory per agent (Claude Code's RSS, the sandbox's working set, the worker's and the host's
growth over N), the worker's event-loop lag (``bench.loop_probe`` timing the adapter's ``GET /healthz``), failures,
wall time and turns, and CPU; then each step's memory and lag as a ratio of the baseline step's, measured in the
same run, and a memory-bound estimate of the agents this host holds. Method and results: docs/benchmarks.md, "Host
capacity". No thresholds, no pass/fail. Run from the repository root (take the machine-wide lock for more than 4
agents)::

    flock /tmp/bench.lock .venv/bin/python -m bench.host_capacity_bench --n 16 32 64 [--think-s 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from bench.harness.proc_watch import ProcWatcher
from bench.harness.procfs import RssSampler, machine_busy_s, own_cpu_s, proc_argv, proc_cpu, status_kb
from bench.harness.rollout_stack import (
    TimedPolicyServer,
    bench_budgets,
    example_rows,
    oracle_policy,
    round_robin,
    running_servers,
    sandbox_gateway,
    stack_env,
)
from bench.harness.stats import mean, peak_concurrency, quantile
from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.task_sources.dataset_rows import DatasetRow
from durable_rollouts.trainer_client.local_services import free_port, worker_process
from durable_rollouts.trainer_client.rollout_runs import start_rollout

ACTIVITY_FAILURE = re.compile(r"WARNING temporalio\.activity: (\w+) failed with (\w+)")
CGROUP_ROOT = Path("/sys/fs/cgroup")
MIB = 1024 * 1024


# --------------------------------------------------------------------------- the slow policy


class ThinkingPolicyServer(TimedPolicyServer):
    """The timed scripted policy, answering ``think_s`` after each request, and a session's first answer only once
    ``expected`` sessions have asked (or ``hold_s`` after it asked). ``expect`` starts a step: it resets that count."""

    def __init__(self, *args: Any, think_s: float, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.think_s = think_s
        self.expect(0, 0.0)

    def expect(self, sessions: int, hold_s: float) -> None:
        self._expected, self._hold_s = sessions, hold_s
        self._asked: set[str | None] = set()
        self._all_asked = asyncio.Event()
        self.all_asked_at: float | None = None

    async def _answer(self, policy, generate, generation, routing_key):  # type: ignore[override]
        if routing_key not in self._asked:
            self._asked.add(routing_key)
            if len(self._asked) >= self._expected and not self._all_asked.is_set():
                self.all_asked_at = time.time()
                self._all_asked.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_asked.wait(), self._hold_s)
        await asyncio.sleep(self.think_s)
        return await super()._answer(policy, generate, generation, routing_key)


# --------------------------------------------------------------------------- memory sampling


def _meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0]) * 1024
    return out


def host_memory_used() -> int:
    info = _meminfo()
    return info["MemTotal"] - info["MemAvailable"]


def cgroup_version() -> int:
    return 2 if (CGROUP_ROOT / "cgroup.controllers").exists() else 1


def _cgroup_dir(container_id: str, version: int) -> Path | None:
    candidates = (
        [
            CGROUP_ROOT / "memory" / "docker" / container_id,
            CGROUP_ROOT / "memory" / "system.slice" / f"docker-{container_id}.scope",
        ]
        if version == 1
        else [CGROUP_ROOT / "system.slice" / f"docker-{container_id}.scope", CGROUP_ROOT / "docker" / container_id]
    )
    return next((c for c in candidates if c.is_dir()), None)


def container_memory(container_id: str, version: int) -> tuple[int, int] | None:
    """(working set, anonymous memory) of a container's memory cgroup in bytes: usage minus inactive file cache
    (``docker stats``' figure) and the anonymous pages; None once the cgroup is gone."""
    found = _cgroup_dir(container_id, version)
    if found is None:
        return None
    try:
        if version == 1:
            usage = int((found / "memory.usage_in_bytes").read_text())
            stat = dict(line.split() for line in (found / "memory.stat").read_text().splitlines())
            return usage - int(stat.get("total_inactive_file", 0)), int(stat.get("total_rss", 0))
        usage = int((found / "memory.current").read_text())
        stat = dict(line.split() for line in (found / "memory.stat").read_text().splitlines())
        return usage - int(stat.get("inactive_file", 0)), int(stat.get("anon", 0))
    except (OSError, ValueError):
        return None


@dataclass
class MemorySample:
    t: float
    live_agents: int  # Claude Code processes alive in this step's sandboxes (roots and not-yet-exec'd children alike)
    claude_rss_kb: int  # sum of their VmRSS
    sandbox_ws_bytes: int  # sum of the working sets of this run's sandboxes (agent and grading)
    host_used_bytes: int
    machine_busy_s: float  # /proc/stat busy time so far, all cores


class MemoryWatcher(ProcWatcher):
    """``ProcWatcher`` that also samples memory every ``mem_interval_s`` in its own thread: per Claude Code pid the
    peak (VmRSS, RssAnon) in kB, per container of this run (workflow id starting with ``workflow_prefix``) the peak
    (working set, anon) in bytes, and one ``MemorySample`` of the sums."""

    def __init__(self, mem_interval_s: float = 0.5, **kwargs: Any):
        super().__init__(**kwargs)
        self.mem_interval_s = mem_interval_s
        self.workflow_prefix = "\0"
        self.cgroup_version = cgroup_version()
        self.claude_peak: dict[int, tuple[int, int]] = {}
        self.container_peak: dict[str, tuple[int, int]] = {}
        self.shim_pid: dict[str, int] = {}
        self.shim_peak: dict[str, tuple[int, int]] = {}  # per container: its shim's peak (VmRSS, RssAnon) in kB
        self.samples: list[MemorySample] = []
        self._next_memory = 0.0

    def after_scan(self, now: float) -> None:
        if now >= self._next_memory:
            self._next_memory = now + self.mem_interval_s
            self._sample_memory(now)

    def _sample_memory(self, now: float) -> None:
        ours = self.containers_of_run(self.workflow_prefix)
        live = rss_sum = 0
        for span in self.open_spans("claude"):
            if span.container_id not in ours:
                continue
            status = status_kb(span.pid, ("VmRSS", "RssAnon"))
            if not status:
                continue
            live += 1
            rss_sum += status.get("VmRSS", 0)
            old = self.claude_peak.get(span.pid, (0, 0))
            self.claude_peak[span.pid] = (max(old[0], status.get("VmRSS", 0)), max(old[1], status.get("RssAnon", 0)))
        ws_sum, present = 0, []
        for cid in ours:
            found = container_memory(cid, self.cgroup_version)
            if found is None:
                continue
            present.append(cid)
            ws_sum += found[0]
            old_c = self.container_peak.get(cid, (0, 0))
            self.container_peak[cid] = (max(old_c[0], found[0]), max(old_c[1], found[1]))
        self._find_shims([cid for cid in present if cid not in self.shim_pid])
        for cid in present:
            status = status_kb(self.shim_pid.get(cid, 0), ("VmRSS", "RssAnon"))
            if status:
                old_s = self.shim_peak.get(cid, (0, 0))
                self.shim_peak[cid] = (max(old_s[0], status.get("VmRSS", 0)), max(old_s[1], status.get("RssAnon", 0)))
        self.samples.append(MemorySample(now, live, rss_sum, ws_sum, host_memory_used(), machine_busy_s()))

    def _find_shims(self, container_ids: list[str]) -> None:
        """The ``containerd-shim-runc-v2 ... -id <container id>`` process of each container (Docker runs one per
        container)."""
        if not container_ids:
            return
        wanted = set(container_ids)
        for name in os.listdir("/proc"):
            argv = proc_argv(int(name)) if name.isdigit() else None
            if argv and Path(argv[0]).name.startswith("containerd-shim") and "-id" in argv:
                found = argv[argv.index("-id") + 1] if argv.index("-id") + 1 < len(argv) else ""
                if found in wanted:
                    self.shim_pid[found] = int(name)


# --------------------------------------------------------------------------- loop-lag probe


class LagProbe:
    """``bench.loop_probe`` against a URL, as a subprocess; ``samples`` holds (sent at, latency s or None)."""

    def __init__(self, url: str, interval_s: float):
        self.url, self.interval_s = url, interval_s
        self.samples: list[tuple[float, float | None]] = []
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.loop_probe",
            self.url,
            "--interval",
            str(self.interval_s),
            stdout=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
            cwd=PROJECT_ROOT,
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            parts = line.decode().split()
            if len(parts) >= 2:
                self.samples.append((float(parts[0]), None if parts[1] == "ERR" else float(parts[1])))

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 5)
            if self._proc.returncode is None:
                self._proc.kill()
                await self._proc.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._reader, 5)

    def stats(self, t0: float, t1: float | None) -> dict[str, Any]:
        """p50/p99/max latency in ms of the probes sent in [t0, t1), and how many failed."""
        if t1 is None or t1 <= t0:
            return {"n": 0, "errors": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
        window = [lat for t, lat in self.samples if t0 <= t < t1]
        ok = [lat * 1000 for lat in window if lat is not None]
        return {
            "n": len(window),
            "errors": len(window) - len(ok),
            "p50_ms": quantile(ok, 0.5),
            "p99_ms": quantile(ok, 0.99),
            "max_ms": max(ok, default=None),
        }


# --------------------------------------------------------------------------- one step


@dataclass
class RolloutOutcome:
    workflow_id: str
    status: str  # completed | aborted | failed | error (the result could not be read)
    reason: str | None = None
    turns: int = 0
    attempts: int = 0  # agent attempts (>1: the agent was retried)
    generate_calls: int = 0
    claude_rss_mb: float | None = None  # peak VmRSS of its Claude Code process
    claude_anon_mb: float | None = None
    sandbox_ws_mb: float | None = None  # peak working set of its agent sandbox
    sandbox_anon_mb: float | None = None
    shim_rss_mb: float | None = None  # peak VmRSS of its agent sandbox's containerd shim (outside the cgroup)
    shim_anon_mb: float | None = None
    grading_ws_mb: float | None = None  # peak working set of its grading sandbox(es), summed
    claude_cpu_s: float | None = None  # its Claude Code process's CPU, reaped children (tool shells) included
    sandbox_cpu_s: float | None = None  # its agent sandbox's cpuacct (Claude Code and every harness exec)
    grading_cpu_s: float | None = None  # its grading sandbox(es)' cpuacct
    client_gaps_s: list[float] = field(default_factory=list)
    agent_start: float | None = None
    agent_gone: float | None = None


def outcome_of(
    handle: WorkflowHandle, got: RolloutResult | BaseException, watcher: MemoryWatcher, policy: ThinkingPolicyServer
) -> RolloutOutcome:
    if isinstance(got, BaseException):
        out = RolloutOutcome(handle.id, "error", f"{type(got).__name__}: {got}"[:200])
    else:
        out = RolloutOutcome(
            handle.id,
            got.status,
            got.abort_reason or (got.error[:200] if got.error else None),
            turns=got.turns,
            attempts=got.attempts,
        )
        if got.agent is not None:
            timings = sorted(policy.for_session(got.agent.session_id))
            out.generate_calls = len(timings)
            out.client_gaps_s = [nxt[0] - cur[1] for cur, nxt in zip(timings, timings[1:], strict=False)]
    for cid in watcher.containers_of(handle.id, "agent"):
        if cid in watcher.container_peak:
            ws, anon = watcher.container_peak[cid]
            out.sandbox_ws_mb, out.sandbox_anon_mb = ws / MIB, anon / MIB
        if cid in watcher.shim_peak:
            rss, anon = watcher.shim_peak[cid]
            out.shim_rss_mb, out.shim_anon_mb = rss / 1024, anon / 1024
        out.sandbox_cpu_s = watcher.container_cpu_s.get(cid)
        span = watcher.first_span(cid, "claude")
        if span is not None:
            out.agent_start, out.agent_gone, out.claude_cpu_s = span.start, span.gone, span.cpu_s
            if span.pid in watcher.claude_peak:
                rss, anon = watcher.claude_peak[span.pid]
                out.claude_rss_mb, out.claude_anon_mb = rss / 1024, anon / 1024
    grading = [
        watcher.container_peak[c][0] for c in watcher.containers_of(handle.id, "grading") if c in watcher.container_peak
    ]
    if grading:
        out.grading_ws_mb = sum(grading) / MIB
    grading_cpu = [
        watcher.container_cpu_s[c] for c in watcher.containers_of(handle.id, "grading") if c in watcher.container_cpu_s
    ]
    if grading_cpu:
        out.grading_cpu_s = sum(grading_cpu)
    return out


def busy_share(samples: list[MemorySample], t0: float | None, t1: float | None) -> float | None:
    """The machine's busy share of all its cores between the first and last sample in [t0, t1]."""
    inside = [s for s in samples if t0 is not None and t1 is not None and t0 <= s.t <= t1]
    if len(inside) < 2:
        return None
    return (inside[-1].machine_busy_s - inside[0].machine_busy_s) / (inside[-1].t - inside[0].t) / (os.cpu_count() or 1)


@dataclass
class Stack:
    """What every step shares: the dev server's client and address, the policy, the sampler, the run's names."""

    client: Client
    address: str
    policy: ThinkingPolicyServer
    watcher: MemoryWatcher
    rows: list[DatasetRow]
    run_id: str
    tmp: Path
    gateway: str
    budgets: RolloutBudgets
    args: argparse.Namespace
    policy_url: str


async def run_step(n: int, stack: Stack) -> dict[str, Any]:
    args, policy, watcher = stack.args, stack.policy, stack.watcher
    sub_run = f"{stack.run_id}-n{n}"
    host_id = f"bench-{sub_run}"
    task_queue = f"bench-capacity-{sub_run}"
    port = free_port()
    worker_env = {
        **stack_env(stack.policy_url, stack.gateway, stack.budgets, max(n, args.agent_slots or 0)),
        "ROLLOUT_TASK_QUEUE": task_queue,
        "ROLLOUT_RESULTS_DIR": str(stack.tmp / f"results-n{n}"),
    }
    rollouts = round_robin(stack.rows, n, stack.budgets)
    print(
        f"\n=== N={n}: worker with {worker_env['ROLLOUT_AGENT_SLOTS']} agent slots, adapter :{port} (run id {sub_run}) "
        f"===",
        flush=True,
    )
    watcher.workflow_prefix = f"rollout-{sub_run}-"
    policy.expect(n, args.hold_s)
    worker_log = stack.tmp / f"worker-n{n}.log"
    probe = LagProbe(f"http://{stack.gateway}:{port}/healthz", args.probe_interval)
    async with contextlib.AsyncExitStack() as exits:
        proc = await exits.enter_async_context(
            worker_process(
                stack.address, ["--adapter-port", str(port), "--host-id", host_id], env=worker_env, log_path=worker_log
            )
        )
        rss = RssSampler(proc.pid)
        rss.start()
        exits.push_async_callback(rss.stop)
        await probe.start()
        exits.push_async_callback(probe.stop)
        idle_at = time.time()
        await asyncio.sleep(args.idle_s)
        worker_rss_ready_kb = rss.status().get("VmRSS", 0)
        host_used_before = host_memory_used()
        busy0, worker_cpu0, bench_cpu0 = machine_busy_s(), sum(proc_cpu(proc.pid)), own_cpu_s()
        t0 = time.time()
        handles = await asyncio.gather(*(start_rollout(stack.client, r, sub_run, task_queue) for r in rollouts))
        done = 0

        async def wait(handle: WorkflowHandle) -> RolloutResult:
            nonlocal done
            line = "cancelled"
            try:
                result = await handle.result()
                line = f"{result.status} turns={result.turns} {result.abort_reason or ''}"
                return result
            except Exception as error:  # noqa: BLE001 - reported as this rollout's failure; the step goes on
                line = f"result unreadable: {type(error).__name__}: {error}"
                raise
            finally:
                done += 1
                print(f"  [{time.time() - t0:6.1f}s] {done}/{n} {handle.id}: {line}", flush=True)

        got = await asyncio.gather(*(wait(h) for h in handles), return_exceptions=True)
        t1 = time.time()
        busy1, worker_cpu1, bench_cpu1 = machine_busy_s(), sum(proc_cpu(proc.pid)), own_cpu_s()
        worker_status = rss.status()
        await asyncio.sleep(max(1.0, args.mem_interval))  # the sampler's last look at the grading sandboxes
    outcomes = [outcome_of(h, g, watcher, policy) for h, g in zip(handles, got, strict=True)]
    activity_failures = collections.Counter(ACTIVITY_FAILURE.findall(worker_log.read_text(errors="replace")))
    wall = t1 - t0
    # The window with all N agents live: from the last session's first request to the next agent exit (an agent whose
    # session was lost and retried may have exited before it).
    first_exit = min(
        (o.agent_gone for o in outcomes if o.agent_gone and o.agent_gone > (policy.all_asked_at or t1)), default=None
    )
    in_step = [s for s in watcher.samples if t0 <= s.t <= t1]
    worker_peak_kb = max((kb for t, kb in rss.samples if t0 <= t <= t1), default=worker_rss_ready_kb)
    host_peak = max((s.host_used_bytes for s in in_step), default=host_used_before)
    failures = [o for o in outcomes if o.status != "completed"]
    gaps = [g for o in outcomes for g in o.client_gaps_s]
    summary = {
        "n": n,
        "wall_s": wall,
        "completed": n - len(failures),
        "failures": [{"workflow_id": o.workflow_id, "status": o.status, "reason": o.reason} for o in failures],
        "retried": sum(o.attempts > 1 for o in outcomes),
        "activity_failures": {f"{activity} {error}": count for (activity, error), count in activity_failures.items()},
        "turns_mean": mean([o.turns for o in outcomes]),
        "turns_per_s": sum(o.generate_calls for o in outcomes) / wall,
        "generate_calls": sum(o.generate_calls for o in outcomes),
        "client_gap_p50_s": quantile(gaps, 0.5),
        "client_gap_p95_s": quantile(gaps, 0.95),
        "max_concurrent_agents": peak_concurrency(
            [(o.agent_start, o.agent_gone) for o in outcomes if o.agent_start and o.agent_gone]
        ),
        "all_asked_after_s": None if policy.all_asked_at is None else policy.all_asked_at - t0,
        "claude_rss_mb": mean([o.claude_rss_mb for o in outcomes]),
        "claude_rss_max_mb": max((o.claude_rss_mb for o in outcomes if o.claude_rss_mb), default=None),
        "claude_anon_mb": mean([o.claude_anon_mb for o in outcomes]),
        "sandbox_ws_mb": mean([o.sandbox_ws_mb for o in outcomes]),
        "sandbox_ws_max_mb": max((o.sandbox_ws_mb for o in outcomes if o.sandbox_ws_mb), default=None),
        "sandbox_anon_mb": mean([o.sandbox_anon_mb for o in outcomes]),
        "shim_rss_mb": mean([o.shim_rss_mb for o in outcomes]),
        "shim_anon_mb": mean([o.shim_anon_mb for o in outcomes]),
        "grading_ws_mb": mean([o.grading_ws_mb for o in outcomes]),
        "peak_live_agents_sampled": max((s.live_agents for s in in_step), default=0),
        "peak_sum_claude_rss_mb": max((s.claude_rss_kb for s in in_step), default=0) / 1024,
        "peak_sum_sandbox_ws_mb": max((s.sandbox_ws_bytes for s in in_step), default=0) / MIB,
        "worker_rss_ready_mb": worker_rss_ready_kb / 1024,
        "worker_rss_peak_mb": worker_peak_kb / 1024,
        "worker_vmhwm_mb": worker_status.get("VmHWM", 0) / 1024,
        "worker_share_mb": (worker_peak_kb - worker_rss_ready_kb) / 1024 / n,
        "host_used_before_mb": host_used_before / MIB,
        "host_used_peak_mb": host_peak / MIB,
        "host_per_agent_mb": (host_peak - host_used_before) / MIB / n,
        "mem_available_before_mb": (_meminfo()["MemTotal"] - host_used_before) / MIB,
        "lag_idle": probe.stats(idle_at + 1.0, t0),
        "lag_run": probe.stats(t0, t1),
        "lag_all_live": probe.stats(policy.all_asked_at or t1, first_exit),
        "machine_cpu_share": (busy1 - busy0) / wall / (os.cpu_count() or 1),
        "machine_cpu_share_all_live": busy_share(watcher.samples, policy.all_asked_at, first_exit),
        "turns_all_live": sum(
            1
            for _, _, answered, _ in policy.timings
            if policy.all_asked_at and first_exit and policy.all_asked_at <= answered <= first_exit
        ),
        "claude_cpu_s": mean([o.claude_cpu_s for o in outcomes]),
        "sandbox_cpu_s": mean([o.sandbox_cpu_s for o in outcomes]),
        "grading_cpu_s": mean([o.grading_cpu_s for o in outcomes]),
        "worker_cpu_cores": (worker_cpu1 - worker_cpu0) / wall,
        "bench_cpu_cores": (bench_cpu1 - bench_cpu0) / wall,
        "loadavg_1m_after": os.getloadavg()[0],
        "outcomes": [asdict(o) for o in outcomes],
    }
    parts = (summary["sandbox_ws_mb"], summary["shim_anon_mb"] or 0.0, summary["worker_share_mb"])
    summary["footprint_mb"] = None if parts[0] is None else sum(parts)
    live_window = (first_exit - policy.all_asked_at) if policy.all_asked_at and first_exit else 0.0
    share = summary["machine_cpu_share_all_live"]
    summary["core_s_per_turn_all_live"] = (
        share * (os.cpu_count() or 1) * live_window / summary["turns_all_live"]
        if share is not None and summary["turns_all_live"]
        else None
    )
    print_step(summary)
    return summary


# --------------------------------------------------------------------------- output


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def _lag(stats: dict[str, Any]) -> str:
    return f"{_f(stats['p50_ms'])}/{_f(stats['p99_ms'])}/{_f(stats['max_ms'])}" + (
        f" ({stats['errors']} err)" if stats["errors"] else ""
    )


def _ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"×{value / base:.2f}"


def print_step(s: dict[str, Any]) -> None:
    print(f"--- N={s['n']} ---")
    print(
        f"  wall {s['wall_s']:.1f} s; completed {s['completed']}/{s['n']}; turns mean {_f(s['turns_mean'])}, /generate "
        f"{s['generate_calls']}; "
        f"max concurrent Claude Code {s['max_concurrent_agents']} (all {s['n']} sessions asked after "
        f"{_f(s['all_asked_after_s'])} s)"
    )
    for failure in s["failures"]:
        print(f"  FAILED {failure['workflow_id']}: {failure['status']} {failure['reason'] or ''}")
    if s["retried"] or s["activity_failures"]:
        kinds = ", ".join(f"{kind} ×{count}" for kind, count in s["activity_failures"].items())
        print(
            f"  rollouts whose agent was retried: {s['retried']}; activity failures in the worker log: "
            f"{kinds or 'none'}"
        )
    print(
        f"  per agent: Claude Code RSS {_f(s['claude_rss_mb'])} MB (max {_f(s['claude_rss_max_mb'])}, anon "
        f"{_f(s['claude_anon_mb'])}); "
        f"sandbox working set {_f(s['sandbox_ws_mb'])} MB (max {_f(s['sandbox_ws_max_mb'])}, anon "
        f"{_f(s['sandbox_anon_mb'])}); "
        f"shim {_f(s['shim_rss_mb'])} MB (anon {_f(s['shim_anon_mb'])}); worker share {_f(s['worker_share_mb'], 2)} "
        f"MB; "
        f"-> footprint {_f(s['footprint_mb'])} MB (sandbox WS + shim anon + worker share); host used Δ/N "
        f"{_f(s['host_per_agent_mb'])} MB; "
        f"grading sandbox WS {_f(s['grading_ws_mb'])} MB (after the agent)"
    )
    print(
        f"  peaks: {s['peak_live_agents_sampled']} live agents sampled, sum Claude RSS "
        f"{s['peak_sum_claude_rss_mb']:.0f} MB, "
        f"sum sandbox WS {s['peak_sum_sandbox_ws_mb']:.0f} MB; worker RSS {s['worker_rss_ready_mb']:.0f} -> "
        f"{s['worker_rss_peak_mb']:.0f} MB "
        f"(VmHWM {s['worker_vmhwm_mb']:.0f}); host used {s['host_used_before_mb']:.0f} -> {s['host_used_peak_mb']:.0f} "
        f"MB"
    )
    print(
        f"  /healthz ms p50/p99/max: idle {_lag(s['lag_idle'])} (n={s['lag_idle']['n']}), run {_lag(s['lag_run'])} "
        f"(n={s['lag_run']['n']}), "
        f"all live {_lag(s['lag_all_live'])} (n={s['lag_all_live']['n']})"
    )
    print(
        f"  CPU: machine {s['machine_cpu_share'] * 100:.0f}% of {os.cpu_count()} cores, worker "
        f"{s['worker_cpu_cores']:.2f} cores, "
        f"this process (policy, samplers) {s['bench_cpu_cores']:.2f} cores; machine while all {s['n']} agents were "
        f"live "
        f"{_pct(s['machine_cpu_share_all_live'])}; per rollout (core-s): Claude Code {_f(s['claude_cpu_s'], 2)}, agent "
        f"sandbox "
        f"{_f(s['sandbox_cpu_s'], 2)}, grading sandbox {_f(s['grading_cpu_s'], 2)}; all-live window: "
        f"{s['turns_all_live']} answers, "
        f"{_f(s['core_s_per_turn_all_live'], 3)} machine core-s per turn; "
        f"client gap per turn p50/p95 {_f(s['client_gap_p50_s'], 2)}/{_f(s['client_gap_p95_s'], 2)} s; load "
        f"{s['loadavg_1m_after']:.1f}",
        flush=True,
    )


def print_table(steps: list[dict[str, Any]], think_s: float) -> None:
    if not steps:
        return
    base = steps[0]
    print(f"\nbaseline: N={base['n']} of this run; every turn's answer waits {think_s:g} s (the model)")
    print(
        "\n| N | completed (retried) | wall s | turns | turns/s | max live | Claude RSS (anon) MB | sandbox WS MB | "
        "worker share MB | footprint MB | host Δ/N MB "
        "| lag run p50/p99/max ms | lag all-live p50/p99/max ms | machine CPU run (all live) | worker CPU cores | "
        "Claude Code core-s/rollout | machine core-s/turn (all live) "
        "| client gap p50/p95 s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in steps:
        print(
            f"| {s['n']} | {s['completed']}/{s['n']} ({s['retried']}) | {s['wall_s']:.0f} | {_f(s['turns_mean'])} | "
            f"{s['turns_per_s']:.2f} "
            f"| {s['max_concurrent_agents']} "
            f"| {_f(s['claude_rss_mb'])} ({_f(s['claude_anon_mb'])}) | {_f(s['sandbox_ws_mb'])} | "
            f"{_f(s['worker_share_mb'], 2)} "
            f"| {_f(s['footprint_mb'])} | {_f(s['host_per_agent_mb'])} "
            f"| {_lag(s['lag_run'])} | {_lag(s['lag_all_live'])} | {_pct(s['machine_cpu_share'])} "
            f"({_pct(s['machine_cpu_share_all_live'])}) "
            f"| {s['worker_cpu_cores']:.2f} | {_f(s['claude_cpu_s'], 2)} | {_f(s['core_s_per_turn_all_live'], 3)} "
            f"| {_f(s['client_gap_p50_s'], 2)}/{_f(s['client_gap_p95_s'], 2)} |"
        )
    print(f"\nratio to the baseline (N={base['n']})")
    print(
        "\n| N | Claude RSS/agent | sandbox WS/agent | worker share | footprint/agent | lag run p50 | lag run p99 | "
        "client gap p50 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s in steps:
        print(
            f"| {s['n']} | {_ratio(s['claude_rss_mb'], base['claude_rss_mb'])} | "
            f"{_ratio(s['sandbox_ws_mb'], base['sandbox_ws_mb'])} "
            f"| {_ratio(s['worker_share_mb'], base['worker_share_mb'])} | "
            f"{_ratio(s['footprint_mb'], base['footprint_mb'])} "
            f"| {_ratio(s['lag_run']['p50_ms'], base['lag_run']['p50_ms'])} "
            f"| {_ratio(s['lag_run']['p99_ms'], base['lag_run']['p99_ms'])} | "
            f"{_ratio(s['client_gap_p50_s'], base['client_gap_p50_s'])} |"
        )
    for s in steps:
        if s["failures"]:
            reasons: dict[str, int] = {}
            for failure in s["failures"]:
                key = f"{failure['status']}: {failure['reason']}"
                reasons[key] = reasons.get(key, 0) + 1
            print(f"N={s['n']} failures: " + "; ".join(f"{k} ×{v}" for k, v in reasons.items()))
    largest = max(steps, key=lambda s: s["n"])
    per_agent = largest["footprint_mb"]
    if per_agent:
        available = largest["mem_available_before_mb"]
        grading = largest["grading_ws_mb"] or 0.0
        print(
            f"\nmemory-bound estimate: {available / 1024:.1f} GiB available before N={largest['n']}; footprint "
            f"{per_agent:.0f} MB per agent at that N "
            f"(+ {grading:.0f} MB while its grading sandbox runs) -> about "
            f"{int(available * 0.8 / (per_agent + grading))} agents in 80% of it "
            "with every grading sandbox up at once (CPU and lag above say whether CPU binds first)"
        )


# --------------------------------------------------------------------------- main


async def main_async(args: argparse.Namespace) -> int:
    run_id = f"cap{time.strftime('%H%M%S')}{uuid.uuid4().hex[:4]}"
    budgets = bench_budgets(args.agent_budget, args.eval_timeout)
    rows = example_rows()
    tmp = Path(tempfile.mkdtemp(prefix=f"host-capacity-bench-{run_id}-"))
    steps_n = [args.baseline, *args.n] if args.baseline else list(args.n)
    info = _meminfo()
    print(
        f"run id {run_id}; temp dir {tmp}; {os.cpu_count()} CPUs, {info['MemTotal'] / 2**30:.1f} GiB "
        f"({info['MemAvailable'] / 2**30:.1f} available); cgroup v{cgroup_version()}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    print(
        f"tasks: {[r.task.instance_id for r in rows]} (round-robin); steps N = {steps_n}; think {args.think_s:g} s per "
        f"turn",
        flush=True,
    )
    gateway = await sandbox_gateway()
    policy = await oracle_policy(ThinkingPolicyServer, think_s=args.think_s)
    watcher = MemoryWatcher(mem_interval_s=args.mem_interval)
    steps: list[dict[str, Any]] = []
    async with running_servers(
        policy, run_id, tmp, lambda: sorted(tmp.glob("worker-n*.log")), args.keep_temp
    ) as servers:
        print(
            f"temporal dev server {servers.address}; policy server {servers.policy_url}; adapter binds {gateway}",
            flush=True,
        )
        watcher.start()
        try:
            stack = Stack(
                servers.env.client,
                servers.address,
                policy,
                watcher,
                rows,
                run_id,
                tmp,
                gateway,
                budgets,
                args,
                servers.policy_url,
            )
            for n in steps_n:
                try:
                    steps.append(await run_step(n, stack))
                except Exception as error:  # noqa: BLE001
                    # A step that could not run is reported; the next one still runs.
                    print(f"N={n}: step failed: {type(error).__name__}: {error}", flush=True)
                await asyncio.sleep(2)
        finally:
            watcher.stop()
    print_table(steps, args.think_s)
    if args.json:
        Path(args.json).write_text(json.dumps(steps, indent=1, default=str))
        print(f"json: {args.json}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[16, 32, 64], help="concurrent rollouts per step")
    parser.add_argument(
        "--baseline", type=int, default=1, help="the step run first, that the ratios compare with (0: the first --n)"
    )
    parser.add_argument("--think-s", type=float, default=3.0, help="seconds the policy waits before every answer")
    parser.add_argument(
        "--hold-s",
        type=float,
        default=300.0,
        help="at most this long a session's first answer waits for the step's other sessions",
    )
    parser.add_argument("--idle-s", type=float, default=5.0, help="seconds the worker is probed idle before each step")
    parser.add_argument("--probe-interval", type=float, default=0.05, help="seconds between /healthz probes")
    parser.add_argument("--mem-interval", type=float, default=0.5, help="seconds between memory samples")
    parser.add_argument("--agent-budget", type=int, default=900, help="SWE_TIME_BUDGET_SEC for every rollout")
    parser.add_argument("--eval-timeout", type=int, default=300, help="SWE_EVAL_TIMEOUT_SEC for every rollout")
    parser.add_argument("--agent-slots", type=int, help="ROLLOUT_AGENT_SLOTS for the worker (default: the step's N)")
    parser.add_argument("--json", help="also write the step summaries (with per-rollout outcomes) here")
    parser.add_argument("--keep-temp", action="store_true", help="keep the temp dir (worker logs, results)")
    return parser.parse_args(argv)


def main() -> None:
    sys.exit(asyncio.run(main_async(parse_args())))


if __name__ == "__main__":
    main()
