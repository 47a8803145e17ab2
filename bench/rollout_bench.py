"""End-to-end rollout benchmark: N concurrent rollouts through the real stack on this one host.

For each N (default 1, 8, 32) the bundled example tasks run as N concurrent ``CodingAgentRollout`` workflows
through a Temporal dev server, ONE ``worker.py`` subprocess that serves every N, real Docker sandboxes, the real
Claude Code binary and the scripted ``oracle`` policy served in THIS process, so every ``/generate`` is timed on
arrival and on answer. Per N it prints rollouts/min, sandbox boot, spawn -> first model request, agent exit ->
detection, worker RSS, CPU per rollout and the orchestration share, all read from outside the project code
(Temporal histories, a /proc watcher, Docker events, the policy server's timings).

Baselines: for throughput, the run's first N; for exit detection, the reference (slime), which polls the agent every
5 s: a constant (2.5 s mean, 5 s worst), not measured. How each number is derived, and the
results: docs/benchmarks.md, "End-to-end rollouts". No thresholds, no pass/fail. Run from the repository root::

    .venv/bin/python -m bench.rollout_bench --n 1 8 32 [--json out.json] [--keep-temp]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from bench.harness.docker_events import DockerEvents
from bench.harness.proc_watch import ProcWatcher
from bench.harness.procfs import RssSampler, machine_busy_s, own_cpu_s, proc_cpu, total_cpu_s
from bench.harness.rollout_stack import (
    TimedPolicyServer,
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
from bench.harness.stats import mean, peak_concurrency, quantile
from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.task_sources.dataset_rows import DatasetRow
from durable_rollouts.trainer_client.local_services import worker_process
from durable_rollouts.trainer_client.rollout_runs import start_rollout

REFERENCE_POLL_S = 5.0  # slime's coding-agent example polls the agent every 5 s (constant, not measured)


# --------------------------------------------------------------------------- CPU accounting


class CpuAccount:
    """CPU seconds of the stack's host processes, snapshotted around each N."""

    def __init__(self, worker_pid: int, temporal_address: str):
        self.worker_pid = worker_pid
        self.daemons = docker_daemon_pids()
        self.temporal = dev_server_pids(temporal_address)

    def snapshot(self) -> dict[str, float]:
        own, children = proc_cpu(self.worker_pid)
        return {
            "machine": machine_busy_s(),
            "worker": own,
            "worker_children": children,  # the docker CLI processes it ran (reaped)
            "docker_daemons": total_cpu_s(self.daemons),
            "temporal": total_cpu_s(self.temporal),
            "bench": own_cpu_s(),  # this process: policy server, /proc watcher, history fetches
        }


# --------------------------------------------------------------------------- history


def _ts(event) -> float:
    return event.event_time.seconds + event.event_time.nanos / 1e9


_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "completed",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "failed",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "timed_out",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "canceled",
}


@dataclass
class ActivitySpan:
    name: str
    scheduled: float
    started: float | None = None
    closed: float | None = None
    outcome: str = ""
    attempt: int = 0
    result: Any = None


@dataclass
class WorkflowTimeline:
    start: float
    end: float
    activities: list[ActivitySpan]

    def first(self, name: str) -> ActivitySpan | None:
        return next((a for a in self.activities if a.name == name), None)


async def fetch_timeline(handle: WorkflowHandle) -> WorkflowTimeline:
    history = await handle.fetch_history()
    events = list(history.events)
    by_scheduled: dict[int, ActivitySpan] = {}
    spans: list[ActivitySpan] = []
    for e in events:
        t = e.event_type
        if t == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            span = ActivitySpan(e.activity_task_scheduled_event_attributes.activity_type.name, _ts(e))
            by_scheduled[e.event_id] = span
            spans.append(span)
        elif t == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = e.activity_task_started_event_attributes
            span = by_scheduled[attrs.scheduled_event_id]
            span.started, span.attempt = _ts(e), attrs.attempt
        elif t in _CLOSED:
            attrs = {
                EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: e.activity_task_completed_event_attributes,
                EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: e.activity_task_failed_event_attributes,
                EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: e.activity_task_timed_out_event_attributes,
                EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: e.activity_task_canceled_event_attributes,
            }[t]
            span = by_scheduled[attrs.scheduled_event_id]
            span.closed, span.outcome = _ts(e), _CLOSED[t]
            if t == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED and attrs.result.payloads:
                with contextlib.suppress(ValueError):
                    span.result = json.loads(attrs.result.payloads[0].data)
    return WorkflowTimeline(_ts(events[0]), _ts(events[-1]), spans)


# --------------------------------------------------------------------------- per-rollout measurements


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if current_end is None or a > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = a, b
        else:
            current_end = max(current_end, b)
    if current_end is not None:
        total += current_end - current_start
    return total


def _stream_json_result(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    last = None
    with contextlib.suppress(OSError):
        for line in Path(path).read_text(errors="replace").splitlines():
            if line.startswith("{") and '"type":"result"' in line.replace(" ", ""):
                with contextlib.suppress(json.JSONDecodeError):
                    last = json.loads(line)
    return last


@dataclass
class RolloutMeasure:
    workflow_id: str
    status: str
    abort_reason: str | None
    reward: float
    elapsed_s: float  # history: WorkflowExecutionStarted -> last event
    result_elapsed_s: float
    boot_s: float | None = None  # boot_sandbox scheduled -> completed
    boot_exec_s: float | None = None  # boot_sandbox started -> completed
    launch_to_first_req_s: float | None = None
    proc_to_first_req_s: float | None = None
    exit_to_detect_s: float | None = None
    runner_exit_to_detect_s: float | None = None
    agent_proc_s: float | None = None
    agent_duration_ms_s: float | None = None  # stream-json result duration_ms
    agent_time_to_request_s: float | None = None  # stream-json result time_to_request_ms (Claude Code's own clock)
    agent_activity_s: float | None = None  # run_claude_code started -> completed
    pre_launch_s: float | None = None  # run_claude_code started -> claude process start
    grade_run_s: float | None = None
    evaluate_s: float | None = None
    policy_s: float = 0.0
    n_generate: int = 0
    orchestration_s: float | None = None
    orchestration_share: float | None = None
    queue_wait_s: float = 0.0  # sum of activity scheduled -> started
    wf_task_gaps_s: float = 0.0  # time between activities (workflow tasks, scheduling)
    activity_exec_s: dict[str, float] = field(default_factory=dict)
    # docker events attribution
    boot_to_create_s: float | None = None  # boot_sandbox Started -> agent container "create" event
    create_to_start_s: float | None = None  # "create" -> "start"
    start_to_booted_s: float | None = None  # "start" -> boot_sandbox Completed (workspace preparation execs)
    launch_to_first_exec_s: float | None = None  # run_claude_code Started -> first exec_create in the agent container
    agent_execs: int = 0  # docker execs in the agent container (whole life)
    agent_archives: int = 0  # put_archive / get_archive calls on the agent container
    grading_execs: int = 0
    grading_archives: int = 0
    runner_exit_to_wait_exec_die_s: float | None = None  # exit marker -> the waiting docker exec ends
    wait_exec_die_to_log_read_s: float | None = None  # -> get_archive of claude.out (docker "archive-path" event)
    log_read_to_completed_s: float | None = None  # -> run_claude_code ActivityTaskCompleted (store log, RPC)
    agent_cpu_s: float | None = None  # Claude Code process CPU (incl. reaped children: its tool shells)
    grader_cpu_s: float | None = None  # grader runner CPU incl. the test processes it reaped
    agent_container_cpu_s: float | None = None  # cpuacct of the agent sandbox (Claude Code + every harness exec)
    grading_container_cpu_s: float | None = None  # cpuacct of the grading sandbox(es)


def measure(
    result: RolloutResult,
    timeline: WorkflowTimeline,
    watcher: ProcWatcher,
    policy: TimedPolicyServer,
    events: DockerEvents,
) -> RolloutMeasure:
    m = RolloutMeasure(
        workflow_id=result.workflow_id,
        status=result.status,
        abort_reason=result.abort_reason,
        reward=result.reward,
        elapsed_s=timeline.end - timeline.start,
        result_elapsed_s=result.elapsed_s,
    )
    acts = timeline.activities
    for a in acts:
        if a.started is not None:
            m.queue_wait_s += a.started - a.scheduled
        if a.started is not None and a.closed is not None:
            m.activity_exec_s[a.name] = m.activity_exec_s.get(a.name, 0.0) + a.closed - a.started
    # Activities of this workflow run one after another: the rest of the elapsed time is between them.
    busy = _union_length([(a.scheduled, a.closed) for a in acts if a.closed is not None])
    m.wf_task_gaps_s = m.elapsed_s - busy

    boot = next((a for a in acts if a.name == "boot_sandbox" and a.outcome == "completed"), None)
    if boot is not None:
        m.boot_s = boot.closed - boot.scheduled
        m.boot_exec_s = boot.closed - boot.started
    runs = [a for a in acts if a.name == "run_claude_code"]
    run = runs[-1] if runs else None
    intervals: list[tuple[float, float]] = []

    agent_cid = boot.result.get("container_id") if boot is not None and isinstance(boot.result, dict) else None
    claude = watcher.first_span(agent_cid, "claude") if agent_cid else None
    runner = watcher.first_span(agent_cid, "claude_runner") if agent_cid else None
    if claude is not None:
        if claude.gone is not None:
            m.agent_proc_s = claude.gone - claude.start
            intervals.append((claude.start, claude.gone))
        if run is not None and run.started is not None:
            m.pre_launch_s = claude.start - run.started
        if run is not None and run.outcome == "completed" and claude.gone is not None:
            m.exit_to_detect_s = run.closed - claude.gone
        if run is not None and run.outcome == "completed" and runner is not None and runner.gone is not None:
            m.runner_exit_to_detect_s = run.closed - runner.gone
    if run is not None and run.started is not None and run.closed is not None:
        m.agent_activity_s = run.closed - run.started

    if result.agent is not None:
        generate = policy.for_session(result.agent.session_id)
        m.n_generate = len(generate)
        m.policy_s = sum(b - a for a, b in generate)
        intervals.extend(generate)
        if generate:
            first = min(a for a, _ in generate)
            if run is not None and run.started is not None:
                m.launch_to_first_req_s = first - run.started
            if claude is not None:
                m.proc_to_first_req_s = first - claude.start
        stream_result = _stream_json_result(result.agent.log_path)
        if stream_result and isinstance(stream_result.get("duration_ms"), (int, float)):
            m.agent_duration_ms_s = stream_result["duration_ms"] / 1000
        if stream_result and isinstance(stream_result.get("time_to_request_ms"), (int, float)):
            m.agent_time_to_request_s = stream_result["time_to_request_ms"] / 1000

    grade_spans = [
        watcher.first_span(cid, "grade_runner") for cid in watcher.containers_of(result.workflow_id, "grading")
    ]
    grade_spans = [s for s in grade_spans if s is not None and s.gone is not None]
    if grade_spans:
        m.grade_run_s = sum(s.gone - s.start for s in grade_spans)
        intervals.extend((s.start, s.gone) for s in grade_spans)
    evaluate = [a for a in acts if a.name == "evaluate" and a.closed is not None and a.started is not None]
    if evaluate:
        m.evaluate_s = sum(a.closed - a.started for a in evaluate)

    agent_events = events.of(result.workflow_id, "agent")
    grading_events = events.of(result.workflow_id, "grading")
    create = next((e.t for e in agent_events if e.action == "create"), None)
    start = next((e.t for e in agent_events if e.action == "start"), None)
    if boot is not None and create is not None:
        m.boot_to_create_s = create - boot.started
        if start is not None:
            m.create_to_start_s = start - create
            m.start_to_booted_s = boot.closed - start
    if run is not None and run.started is not None:
        first_exec = min((e.t for e in agent_events if e.action == "exec_create" and e.t >= run.started), default=None)
        if first_exec is not None:
            m.launch_to_first_exec_s = first_exec - run.started
    if runner is not None and runner.gone is not None and run is not None and run.outcome == "completed":
        wait_die = min(
            (e.t for e in agent_events if e.action == "exec_die" and e.t >= runner.gone - 0.05), default=None
        )
        if wait_die is not None:
            m.runner_exit_to_wait_exec_die_s = wait_die - runner.gone
            read = min((e.t for e in agent_events if e.action == "archive-path" and e.t >= wait_die), default=None)
            if read is not None:
                m.wait_exec_die_to_log_read_s = read - wait_die
                m.log_read_to_completed_s = run.closed - read
    if claude is not None:
        m.agent_cpu_s = claude.cpu_s
    if grade_spans:
        m.grader_cpu_s = sum(g.cpu_s for g in grade_spans)
    if agent_cid in watcher.container_cpu_s:
        m.agent_container_cpu_s = watcher.container_cpu_s[agent_cid]
    grading_cpu = [
        watcher.container_cpu_s[c]
        for c in watcher.containers_of(result.workflow_id, "grading")
        if c in watcher.container_cpu_s
    ]
    if grading_cpu:
        m.grading_container_cpu_s = sum(grading_cpu)
    m.agent_execs = sum(e.action == "exec_create" for e in agent_events)
    m.agent_archives = sum(e.action in ("extract-to-dir", "archive-path") for e in agent_events)
    m.grading_execs = sum(e.action == "exec_create" for e in grading_events)
    m.grading_archives = sum(e.action in ("extract-to-dir", "archive-path") for e in grading_events)

    if claude is not None and claude.gone is not None:
        outside = _union_length([(max(a, timeline.start), min(b, timeline.end)) for a, b in intervals])
        m.orchestration_s = m.elapsed_s - outside
        m.orchestration_share = m.orchestration_s / m.elapsed_s if m.elapsed_s > 0 else None
    return m


# --------------------------------------------------------------------------- one N


async def run_n(
    n: int,
    client: Client,
    rows: list[DatasetRow],
    run_id: str,
    task_queue: str,
    budgets: RolloutBudgets,
    watcher: ProcWatcher,
    policy: TimedPolicyServer,
    rss: RssSampler,
    events: DockerEvents,
    cpu: CpuAccount,
) -> dict[str, Any]:
    rollouts = round_robin(rows, n, budgets)
    sub_run = f"{run_id}-n{n}"
    print(f"\n=== N={n}: starting {n} rollouts (run id {sub_run}) ===", flush=True)
    load_before = os.getloadavg()[0]
    cpu0 = cpu.snapshot()
    t0 = time.time()
    handles = await asyncio.gather(*(start_rollout(client, r, sub_run, task_queue) for r in rollouts))
    done_count = 0

    async def wait(handle: WorkflowHandle) -> RolloutResult:
        nonlocal done_count
        result = await handle.result()
        done_count += 1
        print(
            f"  [{time.time() - t0:6.1f}s] {done_count}/{n} {result.instance_id} s{result.sample_index}: "
            f"{result.status} reward={result.reward} {result.abort_reason or ''}",
            flush=True,
        )
        return result

    results = await asyncio.gather(*(wait(h) for h in handles))
    t1 = time.time()
    cpu1 = cpu.snapshot()
    await asyncio.sleep(0.5)  # let the watcher see the last grading runners go
    timelines = await asyncio.gather(*(fetch_timeline(h) for h in handles))
    measures = [measure(r, tl, watcher, policy, events) for r, tl in zip(results, timelines, strict=True)]
    wall = t1 - t0
    status = rss.status()
    aborted = [m for m in measures if m.status == "aborted"]
    summary = {
        "n": n,
        "wall_s": wall,
        "rollouts_per_min": n / wall * 60,
        "completed": sum(m.status == "completed" for m in measures),
        "solved": sum(r.solved for r in results),
        "aborted": len(aborted),
        "abort_reasons": dict(collections.Counter(m.abort_reason for m in aborted)),
        "retried_attempts": sum(r.attempts > 1 for r in results),
        "worker_rss_peak_mb": rss.peak_between(t0, t1 + 0.5) / 1024,
        "worker_vmhwm_mb": status.get("VmHWM", 0) / 1024,
        "worker_rss_after_mb": status.get("VmRSS", 0) / 1024,
        "loadavg_1m_before": load_before,
        "loadavg_1m_after": os.getloadavg()[0],
        "measures": [asdict(m) for m in measures],
    }
    used = {k: cpu1[k] - cpu0[k] for k in cpu0}
    used["claude"] = sum(m.agent_cpu_s or 0.0 for m in measures)
    used["grader"] = sum(m.grader_cpu_s or 0.0 for m in measures)
    # Everything else inside this run's sandboxes: boot preparation, snapshots, git diff, patch apply, wait loops.
    used["sandbox_harness"] = (
        sum((m.agent_container_cpu_s or 0.0) + (m.grading_container_cpu_s or 0.0) for m in measures)
        - used["claude"]
        - used["grader"]
    )
    used["other"] = used["machine"] - sum(v for k, v in used.items() if k != "machine")
    summary["cpu_core_s_per_rollout"] = {k: v / n for k, v in used.items()}
    agent_containers = set()
    for tl in timelines:
        for a in tl.activities:
            if a.name == "boot_sandbox" and isinstance(a.result, dict) and a.result.get("container_id"):
                agent_containers.add(a.result["container_id"])
    agent_spans = [watcher.first_span(c, "claude") for c in agent_containers]
    summary["max_concurrent_agents"] = peak_concurrency([(sp.start, sp.gone) for sp in agent_spans if sp and sp.gone])
    summary["cpu_utilisation"] = used["machine"] / (wall * (os.cpu_count() or 1))
    for key in (
        "boot_s",
        "boot_exec_s",
        "launch_to_first_req_s",
        "proc_to_first_req_s",
        "exit_to_detect_s",
        "runner_exit_to_detect_s",
        "agent_proc_s",
        "agent_duration_ms_s",
        "agent_time_to_request_s",
        "agent_activity_s",
        "pre_launch_s",
        "grade_run_s",
        "evaluate_s",
        "policy_s",
        "orchestration_s",
        "orchestration_share",
        "elapsed_s",
        "queue_wait_s",
        "wf_task_gaps_s",
        "boot_to_create_s",
        "create_to_start_s",
        "start_to_booted_s",
        "launch_to_first_exec_s",
        "agent_execs",
        "agent_archives",
        "grading_execs",
        "grading_archives",
        "runner_exit_to_wait_exec_die_s",
        "wait_exec_die_to_log_read_s",
        "log_read_to_completed_s",
        "agent_cpu_s",
        "grader_cpu_s",
        "agent_container_cpu_s",
        "grading_container_cpu_s",
    ):
        values = [getattr(m, key) for m in measures]
        summary[key] = {
            "p50": quantile(values, 0.5),
            "p95": quantile(values, 0.95),
            "mean": mean(values),
            "n": sum(v is not None for v in values),
        }
    names = sorted({name for m in measures for name in m.activity_exec_s})
    summary["activity_exec_mean_s"] = {name: mean([m.activity_exec_s.get(name) for m in measures]) for name in names}
    print_block(summary)
    return summary


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pp(summary: dict, key: str, digits: int = 2) -> str:
    s = summary[key]
    return f"{_f(s['p50'], digits)} / {_f(s['p95'], digits)}"


def print_block(s: dict) -> None:
    ref_mean = REFERENCE_POLL_S / 2
    exit_p50 = s["exit_to_detect_s"]["p50"]
    print(f"--- N={s['n']} ---")
    print(f"  wall {s['wall_s']:.1f} s  ->  {s['rollouts_per_min']:.2f} rollouts/min   (first start -> last result)")
    print(
        f"  completed {s['completed']}/{s['n']}  solved {s['solved']}  aborted {s['aborted']} "
        f"{s['abort_reasons'] or ''}"
        f"  rollouts needing >1 agent attempt {s['retried_attempts']}  max concurrent Claude Code processes "
        f"{s['max_concurrent_agents']}"
    )
    print(
        f"  sandbox boot p50/p95             {_pp(s, 'boot_s')} s   (history: boot_sandbox Scheduled->Completed; "
        f"Started->Completed {_pp(s, 'boot_exec_s')} s)"
    )
    print(
        f"  launch -> first /generate        {_pp(s, 'launch_to_first_req_s')} s   (history: run_claude_code Started "
        f"-> policy-server arrival)"
    )
    print(
        f"  claude proc -> first /generate   {_pp(s, 'proc_to_first_req_s')} s   (/proc starttime -> policy-server "
        f"arrival; "
        f"Claude Code's own time_to_request_ms {_pp(s, 'agent_time_to_request_s')} s)"
    )
    print(
        f"  agent exit -> activity returns   {_pp(s, 'exit_to_detect_s')} s   (/proc exit, {s['n']} samples -> history "
        f"Completed)"
        f"   baseline: reference 5 s poll = {ref_mean:.1f} s mean / 5.0 s worst (constant)"
        + (f"  -> {exit_p50 / ref_mean:.2f}x of the reference mean" if exit_p50 is not None else "")
    )
    print(
        f"  runner exit -> activity returns  {_pp(s, 'runner_exit_to_detect_s')} s   (exit marker written ~ runner "
        f"exit)"
    )
    print(
        f"  worker RSS peak {s['worker_rss_peak_mb']:.0f} MB (VmRSS samples this N), VmHWM {s['worker_vmhwm_mb']:.0f} "
        f"MB (process life), "
        f"RSS after {s['worker_rss_after_mb']:.0f} MB"
    )
    print(
        f"  orchestration share p50/p95      {_pp(s, 'orchestration_share', 3)}   mean "
        f"{_f(s['orchestration_share']['mean'], 3)}"
        f"   = {_f(s['orchestration_s']['mean'])} s of {_f(s['elapsed_s']['mean'])} s elapsed (mean)"
    )
    print(
        f"    agent process {_pp(s, 'agent_proc_s')} s (stream-json duration_ms {_pp(s, 'agent_duration_ms_s')} s), "
        f"policy {_pp(s, 'policy_s', 3)} s, grader run {_pp(s, 'grade_run_s')} s"
    )
    print(
        f"    queue waits (Scheduled->Started, sum) {_pp(s, 'queue_wait_s')} s, between activities "
        f"{_pp(s, 'wf_task_gaps_s')} s, "
        f"pre-launch {_pp(s, 'pre_launch_s')} s"
    )
    print(
        f"  docker events: boot Started->create {_pp(s, 'boot_to_create_s')} s, create->start "
        f"{_pp(s, 'create_to_start_s')} s, "
        f"start->booted {_pp(s, 'start_to_booted_s')} s; run_claude_code Started->first exec_create "
        f"{_pp(s, 'launch_to_first_exec_s')} s"
    )
    print(
        f"    per rollout: {_f(s['agent_execs']['mean'], 1)} docker execs + {_f(s['agent_archives']['mean'], 1)} "
        f"archive calls (agent sandbox), "
        f"{_f(s['grading_execs']['mean'], 1)} + {_f(s['grading_archives']['mean'], 1)} (grading sandbox)"
    )
    print("    activity exec mean: " + ", ".join(f"{k} {_f(v)}" for k, v in s["activity_exec_mean_s"].items()))
    cpu = s["cpu_core_s_per_rollout"]
    print(
        f"  CPU core-s per rollout (machine busy {s['cpu_utilisation'] * 100:.0f}% of {os.cpu_count()} CPUs over the "
        f"wall time): " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
    )
    print(
        f"  exit detection split: runner exit -> wait exec ends {_pp(s, 'runner_exit_to_wait_exec_die_s')} s, -> log "
        f"get_archive "
        f"{_pp(s, 'wait_exec_die_to_log_read_s')} s, -> activity completed {_pp(s, 'log_read_to_completed_s')} s"
    )
    print(f"  load average (1 min) before {s['loadavg_1m_before']:.1f}, after {s['loadavg_1m_after']:.1f}", flush=True)


def print_table(summaries: list[dict]) -> None:
    base = summaries[0]["rollouts_per_min"] if summaries else None
    print(
        f"\nthroughput baseline: N={summaries[0]['n'] if summaries else '-'} of this run; exit-detection baseline: the "
        f"reference's 5 s poll (constant)"
    )
    print(
        "\n| N | wall s | rollouts/min (× first N) | aborted | boot p50/p95 s | launch→1st req p50/p95 s | proc→1st "
        "req p50/p95 s "
        "| exit→detect p50/p95 s (ref 5 s poll: 2.5 mean) | worker RSS peak MB | orchestration share p50 (mean s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in summaries:
        reasons = ", ".join(f"{k}×{v}" for k, v in s["abort_reasons"].items())
        print(
            f"| {s['n']} | {s['wall_s']:.1f} | {s['rollouts_per_min']:.2f} (×{s['rollouts_per_min'] / base:.2f}) | "
            f"{s['aborted']}{(' (' + reasons + ')') if reasons else ''} "
            f"| {_pp(s, 'boot_s')} | {_pp(s, 'launch_to_first_req_s')} | {_pp(s, 'proc_to_first_req_s')} "
            f"| {_pp(s, 'exit_to_detect_s')} | {s['worker_rss_peak_mb']:.0f} "
            f"| {_f(s['orchestration_share']['p50'], 3)} ({_f(s['orchestration_s']['mean'], 1)} of "
            f"{_f(s['elapsed_s']['mean'], 1)}) |"
        )


# --------------------------------------------------------------------------- main


async def main_async(args: argparse.Namespace) -> int:
    run_id = f"bench{time.strftime('%H%M%S')}{uuid.uuid4().hex[:4]}"
    host_id = f"bench-{run_id}"
    task_queue = f"bench-rollouts-{run_id}"
    budgets = bench_budgets(args.agent_budget, args.eval_timeout)
    rows = example_rows()
    tmp = Path(tempfile.mkdtemp(prefix=f"rollout-bench-{run_id}-"))
    print(f"run id {run_id}; temp dir {tmp}; {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}", flush=True)
    print(f"tasks: {[r.task.instance_id for r in rows]} (repeated round-robin); N = {args.n}", flush=True)

    gateway = await sandbox_gateway()
    policy = await oracle_policy(TimedPolicyServer)
    watcher = ProcWatcher(live_interval_s=args.live_interval)
    events = DockerEvents()
    summaries: list[dict] = []
    async with (
        running_servers(policy, run_id, tmp, lambda: [tmp / "worker.log"], args.keep_temp) as servers,
        contextlib.AsyncExitStack() as stack,
    ):
        print(
            f"temporal dev server {servers.address}; policy server {servers.policy_url}; adapter binds {gateway}",
            flush=True,
        )
        worker_env = {
            **stack_env(servers.policy_url, gateway, budgets, args.agent_slots or max(args.n)),
            "ROLLOUT_TASK_QUEUE": task_queue,
            "ROLLOUT_RESULTS_DIR": str(tmp / "results"),
        }
        stack.push_async_callback(events.stop)
        stack.callback(watcher.stop)
        watcher.start()
        await events.start()
        proc = await stack.enter_async_context(
            worker_process(
                servers.address,
                ["--adapter-port", "0", "--host-id", host_id],
                env=worker_env,
                log_path=tmp / "worker.log",
            )
        )
        rss = RssSampler(proc.pid)
        rss.start()
        stack.push_async_callback(rss.stop)
        cpu = CpuAccount(proc.pid, servers.address)
        print(f"worker pid {proc.pid}, RSS at ready {rss.status().get('VmRSS', 0) / 1024:.0f} MB", flush=True)
        for n in args.n:
            summaries.append(
                await run_n(n, servers.env.client, rows, run_id, task_queue, budgets, watcher, policy, rss, events, cpu)
            )
            await asyncio.sleep(2)

    print_table(summaries)
    print(
        "\nDerivations: boot = history boot_sandbox Scheduled->Completed; launch = run_claude_code "
        "ActivityTaskStarted; "
        "first request = arrival at the in-process scripted policy server (after the adapter rendered the prompt); "
        f"agent exit = /proc watcher (checks every {args.live_interval * 1000:.0f} ms); detection = run_claude_code "
        f"ActivityTaskCompleted; "
        "reference exit detection = 5 s polling (constant: 2.5 s mean, 5 s worst), not measured; "
        "orchestration share = 1 - |agent process ∪ grader run ∪ policy calls| / workflow elapsed."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=1, default=str))
        print(f"json: {args.json}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[1, 8, 32], help="concurrent rollouts per step")
    parser.add_argument("--agent-budget", type=int, default=600, help="SWE_TIME_BUDGET_SEC for every rollout")
    parser.add_argument("--eval-timeout", type=int, default=300, help="SWE_EVAL_TIMEOUT_SEC for every rollout")
    parser.add_argument("--agent-slots", type=int, help="ROLLOUT_AGENT_SLOTS for the worker (default: max N)")
    parser.add_argument(
        "--live-interval", type=float, default=0.02, help="/proc liveness check period (exit resolution)"
    )
    parser.add_argument("--json", help="also write the summaries (with per-rollout measures) here")
    parser.add_argument(
        "--keep-temp", action="store_true", help="keep the temp dir (worker log, stream-json logs, trajectories)"
    )
    return parser.parse_args(argv)


def main() -> None:
    sys.exit(asyncio.run(main_async(parse_args())))


if __name__ == "__main__":
    main()
