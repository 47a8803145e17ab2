"""Bytes a container's processes have written, read from the host's ``/proc``: a cheap bound between two of
Docker's exact (and costly) writable-layer sizes.

The kernel counts, per process, the bytes whose page cache pages it dirtied (``write_bytes`` in ``/proc/<pid>/io``,
buffered and ``mmap`` writes alike), and adds a reaped child's count to its parent's. Every process of a container is
in the container's cgroup, and the processes ``docker exec`` starts are reaped by the container's shim (the parent of
its init), so the cgroup's processes plus the shim hold all the container has written since it started.

Invariants:
* ``read()`` never decreases;
* it over-counts, never under-counts, what reached the writable layer through ``write``/``mmap`` (a page written
  twice counts twice, writes to bind mounts count). It does not see ``fallocate`` or a file made sparse
  (``truncate -s``): those show only in Docker's size.

``for_container`` returns None where the signal cannot be trusted; the caller then samples Docker alone.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)
CGROUP_ROOT = Path("/sys/fs/cgroup")
# cgroup v1 controllers whose hierarchy lists a container's processes, in the order they are tried.
_V1_CONTROLLERS = ("pids", "memory", "cpu,cpuacct", "cpuacct")


def _write_bytes(pid: int | str) -> int | None:
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            for line in f:
                if line.startswith(b"write_bytes:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _procs_file(pid: int, container_id: str) -> Path | None:
    """The ``cgroup.procs`` of the cgroup ``pid`` is in, if that cgroup is the container's."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    paths = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        paths[controllers] = path
    candidates = [
        CGROUP_ROOT / controller / paths[controller].lstrip("/")
        for controller in _V1_CONTROLLERS
        if controller in paths
    ]
    if "" in paths:
        candidates.append(CGROUP_ROOT / paths[""].lstrip("/"))
    for candidate in candidates:
        if container_id in candidate.name and (candidate / "cgroup.procs").is_file():
            return candidate / "cgroup.procs"
    return None


class WriteCounter:
    """``read()``: bytes the container's processes have written since it started (module docstring)."""

    def __init__(self, procs_file: Path, shim_pid: int):
        self.procs_file = procs_file
        self.shim_pid = shim_pid
        self._high = 0

    @classmethod
    def for_container(cls, container_id: str, init_pid: int) -> WriteCounter | None:
        # None where the signal cannot be trusted: the engine on another host (its init pid is not a process of this
        # host's /proc in that container's cgroup), a worker without the right to read the container's init's I/O
        # counts (root's; a worker that can read those can read every process's), a /proc without I/O accounting,
        # or a cgroup layout this module does not know.
        if init_pid <= 0 or _write_bytes(init_pid) is None:
            return None
        procs = _procs_file(init_pid, container_id)
        shim = _parent(init_pid)
        if procs is None or shim is None or _write_bytes(shim) is None:
            return None
        return cls(procs, shim)

    def read(self) -> int:
        try:
            pids = self.procs_file.read_text().split()
        except OSError:
            return self._high
        total = _write_bytes(self.shim_pid) or 0
        for pid in pids:
            total += _write_bytes(pid) or 0
        # Never lower: a process caught between its exit and its reaping has its bytes in neither place for a moment.
        self._high = max(self._high, total)
        return self._high
