"""The sandboxes' processes as the host sees them: when each Claude Code process, its detached runner and each grader
runner started and ended, their CPU, and every sandbox's cgroup CPU.

The sandboxes' processes are visible in the host's /proc (their cgroup names the container). A thread scans /proc
for new candidates every ``scan_interval_s`` and checks the tracked ones every ``live_interval_s``: a start time is
exact (``/proc/<pid>/stat`` starttime, 10 ms ticks), an exit is the first check that finds the process gone, a
zombie or exec'd into something else, so it lies in (last alive, first gone]. A container's labels (its workflow id
and purpose) are looked up once, off the scanning thread.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import docker

from bench.harness.procfs import CGROUP_DOCKER, CLK_TCK, boot_offset, proc_argv, proc_stat
from durable_rollouts.docker_sandbox.container_layout import CLAUDE_MOUNT_PATH, LABEL_PREFIX
from durable_rollouts.docker_sandbox.git_workspace import HARNESS_DIR

CPUACCT_DOCKER = Path("/sys/fs/cgroup/cpuacct/docker")  # cgroup v1, cgroupfs driver (this host); absent elsewhere


@dataclass
class ProcSpan:
    kind: str  # "claude" | "claude_runner" | "grade_runner"
    pid: int
    ppid: int
    container_id: str
    start: float  # wall clock, from /proc/<pid>/stat starttime (exact to 1/CLK_TCK; fork time, exec follows at once)
    first_seen: float
    last_alive: float
    gone: float | None = None  # first check that found it dead, a zombie, or exec'd into something else
    cpu_s: float = 0.0  # utime+stime (+ reaped children) at the last check it was alive


@dataclass
class _Tracked:
    pid: int
    ppid: int
    container_id: str
    start: float
    span: ProcSpan | None = None


def _interesting(argv: list[str]) -> bool:
    """A process of interest, or one about to exec into one (the launch script, the runner, ``bash -l claude.sh``)."""
    return bool(argv) and (argv[0] == CLAUDE_MOUNT_PATH or any(HARNESS_DIR in a for a in argv))


def _classify(argv: list[str]) -> str | None:
    if not argv:
        return None
    if argv[0] == CLAUDE_MOUNT_PATH and "-p" in argv:
        return "claude"
    if len(argv) >= 2 and argv[0].endswith("bash"):
        if argv[1] == f"{HARNESS_DIR}/claude.run":
            return "claude_runner"
        if argv[1] == f"{HARNESS_DIR}/grade.run":
            return "grade_runner"
    return None


class ProcWatcher(threading.Thread):
    """Tracks sandbox processes of interest from the host's /proc (module docstring).

    A forked process shows its parent's command line until it execs, so every candidate (anything mentioning
    /tmp/rollout, or the Claude binary) is re-read on every scan until it dies; a span opens when its command line
    becomes one of the tracked kinds and closes when it dies or execs away. ``after_scan`` runs on this thread after
    every scan: a subclass samples more there.
    """

    def __init__(self, scan_interval_s: float = 0.1, live_interval_s: float = 0.02):
        super().__init__(name="proc-watcher", daemon=True)
        self.scan_interval_s, self.live_interval_s = scan_interval_s, live_interval_s
        self.spans: list[ProcSpan] = []
        self.labels: dict[str, dict[str, str]] = {}
        self._seen: set[int] = set()
        self._tracked: dict[int, _Tracked] = {}
        self.container_cpu_s: dict[str, float] = {}  # last cpuacct.usage seen per container (whole container life)
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._resolve_q: queue.Queue[str | None] = queue.Queue()
        self._resolver = threading.Thread(target=self._resolve_loop, name="label-resolver", daemon=True)

    def start(self) -> None:
        self._resolver.start()
        super().start()

    def stop(self) -> None:
        self._halt.set()
        self._resolve_q.put(None)
        if self.is_alive():
            self.join(5)
        if self._resolver.is_alive():
            self._resolver.join(5)

    def _resolve_loop(self) -> None:
        client = docker.from_env()
        while (cid := self._resolve_q.get()) is not None:
            try:
                labels = client.containers.get(cid).labels or {}
            except Exception:  # noqa: BLE001 - the container may already be gone
                labels = {}
            with self._lock:
                self.labels[cid] = labels

    def run(self) -> None:
        next_scan = 0.0
        while not self._halt.is_set():
            now = time.time()
            if now >= next_scan:
                self._scan(now)
                self.after_scan(now)
                next_scan = now + self.scan_interval_s
            self._check_live()
            self._halt.wait(self.live_interval_s)

    def after_scan(self, now: float) -> None:
        """Called on this thread after every scan; nothing here."""

    def _container_cpu(self) -> None:
        with contextlib.suppress(OSError):
            for entry in os.scandir(CPUACCT_DOCKER):
                if entry.is_dir() and len(entry.name) == 64:
                    with contextlib.suppress(OSError, ValueError):
                        with open(f"{entry.path}/cpuacct.usage") as f:
                            self.container_cpu_s[entry.name] = int(f.read()) / 1e9

    def _scan(self, now: float) -> None:
        self._container_cpu()
        pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
        self._seen &= pids
        offset = boot_offset()
        for pid in pids - self._seen:
            self._seen.add(pid)
            argv = proc_argv(pid)
            if not argv or not _interesting(argv):
                continue
            try:
                with open(f"/proc/{pid}/cgroup") as f:
                    found = CGROUP_DOCKER.search(f.read())
            except (FileNotFoundError, ProcessLookupError):
                continue
            stat = proc_stat(pid)
            if found is None or stat is None:
                continue
            cid = found.group(1)
            self._tracked[pid] = _Tracked(pid, stat[1], cid, offset + stat[2] / CLK_TCK)
            with self._lock:
                new_container = cid not in self.labels
                if new_container:
                    self.labels[cid] = {}
            if new_container:
                self._resolve_q.put(cid)
        for tracked in list(self._tracked.values()):
            argv = proc_argv(tracked.pid)
            if argv is None:
                continue  # gone: _check_live closes it
            kind = _classify(argv)
            current = tracked.span.kind if tracked.span is not None and tracked.span.gone is None else None
            if kind == current:
                continue
            if tracked.span is not None and tracked.span.gone is None:
                tracked.span.gone = now  # exec'd into something else
            tracked.span = None
            if kind is not None:
                tracked.span = ProcSpan(kind, tracked.pid, tracked.ppid, tracked.container_id, tracked.start, now, now)
                with self._lock:
                    self.spans.append(tracked.span)

    def _check_live(self) -> None:
        now = time.time()
        offset = boot_offset()
        for pid, tracked in list(self._tracked.items()):
            stat = proc_stat(pid)
            dead = stat is None or stat[0] in ("Z", "X") or abs(offset + stat[2] / CLK_TCK - tracked.start) > 1.0
            if dead:
                if tracked.span is not None and tracked.span.gone is None:
                    tracked.span.gone = now
                del self._tracked[pid]
            elif tracked.span is not None:
                tracked.span.last_alive = now
                tracked.span.cpu_s = stat[3] / CLK_TCK

    def open_spans(self, kind: str) -> list[ProcSpan]:
        """The spans of ``kind`` whose process was alive at the last check; call it from ``after_scan`` (this
        thread)."""
        return [
            t.span for t in self._tracked.values() if t.span is not None and t.span.kind == kind and t.span.gone is None
        ]

    def first_span(self, container_id: str, kind: str) -> ProcSpan | None:
        """The earliest-started process of ``kind`` in the container whose parent is not itself of that kind
        (a child forked by the agent or the runner shows their command line until it execs)."""
        with self._lock:
            spans = [s for s in self.spans if s.container_id == container_id and s.kind == kind]
        pids = {s.pid for s in spans}
        roots = [s for s in spans if s.ppid not in pids]
        return min(roots or spans, key=lambda s: s.start, default=None)

    def containers_of(self, workflow_id: str, purpose: str) -> list[str]:
        """The containers of one workflow with that purpose (``agent`` or ``grading``), by their labels."""
        with self._lock:
            return [
                cid
                for cid, labels in self.labels.items()
                if labels.get(f"{LABEL_PREFIX}.workflow_id") == workflow_id
                and labels.get(f"{LABEL_PREFIX}.purpose") == purpose
            ]

    def containers_of_run(self, workflow_prefix: str) -> set[str]:
        """The containers whose workflow id starts with ``workflow_prefix`` (one run's, or one step's)."""
        with self._lock:
            return {
                cid
                for cid, labels in self.labels.items()
                if labels.get(f"{LABEL_PREFIX}.workflow_id", "").startswith(workflow_prefix)
            }
