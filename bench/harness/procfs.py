"""What the host's /proc says about its processes and the machine: CPU seconds, command lines, memory, busy time.

Every reader answers None (or zeros, where a sum wants them) for a process that is gone, never raises for it:
the benches read processes that come and go under them. Times are in seconds, memory in kB as /proc gives it.
Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import Callable

CLK_TCK = os.sysconf("SC_CLK_TCK")
# A process in a Docker container: its /proc/<pid>/cgroup names the container (cgroupfs or systemd driver).
CGROUP_DOCKER = re.compile(r"/docker[/-]([0-9a-f]{64})")


def boot_offset() -> float:
    """Wall-clock time of boot as the kernel counts process start times (CLOCK_BOOTTIME)."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, ppid, starttime ticks, utime+stime+cutime+cstime ticks) of a pid, or None if it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1]), int(fields[19]), sum(int(x) for x in fields[11:15])


def proc_argv(pid: int) -> list[str] | None:
    """A process's command line, or None if it cannot be read (gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None


def proc_cpu(pid: int) -> tuple[float, float]:
    """(own utime+stime, reaped children's cutime+cstime) in seconds; zeros if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0, 0.0
    fields = raw[raw.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK, (int(fields[13]) + int(fields[14])) / CLK_TCK


def total_cpu_s(pids: list[int]) -> float:
    """The CPU seconds of those processes, each with its reaped children's."""
    return sum(sum(proc_cpu(pid)) for pid in pids)


def pids_matching(predicate: Callable[[list[str]], bool]) -> list[int]:
    """The pids whose (non-empty) command line ``predicate`` accepts."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            argv = proc_argv(int(name))
            if argv and predicate(argv):
                found.append(int(name))
    return found


def machine_busy_s() -> float:
    """CPU seconds all cores have spent busy since boot (/proc/stat, idle and iowait left out)."""
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLK_TCK


def own_cpu_s() -> float:
    """This process's CPU seconds, user and system."""
    times = os.times()
    return times.user + times.system


def status_kb(pid: int, keys: tuple[str, ...]) -> dict[str, int] | None:
    """The ``keys`` of /proc/<pid>/status present (``VmRSS``, ``VmHWM``, ``RssAnon``...), in kB; None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f) if k in keys}
    except (FileNotFoundError, ProcessLookupError):
        return None


class RssSampler:
    """A process's ``VmRSS`` sampled every ``interval_s`` on the event loop, between ``start`` and ``stop``."""

    def __init__(self, pid: int, interval_s: float = 0.5):
        self.pid, self.interval_s = pid, interval_s
        self.samples: list[tuple[float, int]] = []  # (time, VmRSS kB)
        self._task: asyncio.Task | None = None

    def status(self) -> dict[str, int]:
        """``VmRSS`` and ``VmHWM`` (the kernel's high-water mark over the process's life) now, in kB; empty once it is
        gone."""
        return status_kb(self.pid, ("VmRSS", "VmHWM")) or {}

    async def _loop(self) -> None:
        while True:
            rss = self.status().get("VmRSS")
            if rss is not None:
                self.samples.append((time.time(), rss))
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def peak_between(self, t0: float, t1: float) -> int:
        """The largest sample taken in [t0, t1], in kB; 0 when there is none."""
        return max((kb for t, kb in self.samples if t0 <= t <= t1), default=0)
