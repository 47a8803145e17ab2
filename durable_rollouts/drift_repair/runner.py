"""Run Python scripts on given stdin inputs, each in its own forked interpreter, with a time limit.

A standalone, stdlib-only program: the sandbox runner copies this file into the container and runs it with the
image's ``python3``; the local runner runs it on the host in a subprocess. Both therefore execute scripts the same
way::

    python3 runner.py JOBS.json RESULTS.json

``JOBS.json``: ``{"timeout_s": 5, "parallel": 4, "jobs": [{"script": PATH, "stdin": TEXT}, ...]}``.
``RESULTS.json``: one object per job, in job order: ``exit_code``, ``timed_out``, ``stdout``, ``stderr``,
``duration_s``.

Invariant: each job behaves like ``python3 PATH < stdin`` (``__main__``, ``sys.argv == [PATH]``, UTF-8 streams, the
usual traceback and exit codes, a signal giving ``-signum``), in its own process group in a child forked from this
runner, which never runs a script itself; at most ``parallel`` run at once, and a job still running at
``timeout_s`` has its process group killed (``timed_out`` true, ``exit_code`` -9).
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import tempfile
import time

OUTPUT_LIMIT = 16384  # a job's stdout and stderr keep their last OUTPUT_LIMIT characters
# Imported before forking (each skipped if this Python lacks it): the stdlib modules drift scripts commonly use. A
# job finds them loaded, as it finds the modules the runner itself uses: the same modules a fresh import would give
# (each job's folder holds only its script, so nothing of the job's own is shadowed), without importing them again
# in every job.
PRELOADED = (
    "calendar",
    "collections",
    "configparser",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "enum",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "math",
    "operator",
    "re",
    "statistics",
    "string",
    "textwrap",
    "traceback",
)


def _exit_code_of(exit: SystemExit) -> int:
    code = exit.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _execute(path: str) -> int:
    """Run the script at ``path`` as ``__main__`` in this (child) process; return its exit code."""
    sys.argv = [path]
    sys.path[0] = os.path.dirname(os.path.abspath(path))
    namespace = {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__, "__cached__": None}
    try:
        with open(path, encoding="utf-8") as handle:
            code = compile(handle.read(), path, "exec", dont_inherit=True)  # not this runner's __future__ flags
        exec(code, namespace)
        return 0
    except SystemExit as exit:
        return _exit_code_of(exit)
    except BaseException as error:
        # The usual traceback (a syntax error's message included), from the script's own frame: the runner's are cut.
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        sys.__excepthook__(type(error), error.with_traceback(tb), tb)
        return 1


def _child(path: str, stdin_fd: int, stdout_fd: int, stderr_fd: int) -> None:
    code = 1
    try:
        os.setpgid(0, 0)
        for fd, inherited in ((0, stdin_fd), (1, stdout_fd), (2, stderr_fd)):
            os.dup2(inherited, fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
        code = _execute(path)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(code & 0xFF if code >= 0 else 1)


def _scratch_file(path: str, content: bytes = b"") -> int:
    """A new file at ``path`` holding ``content``, open for reading and writing at offset 0."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _tail(fd: int) -> str:
    size = os.fstat(fd).st_size
    os.lseek(fd, max(0, size - 4 * OUTPUT_LIMIT), os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")[-OUTPUT_LIMIT:]


class _Running:
    def __init__(self, index: int, job: dict, workdir: str, timeout_s: float):
        self.index = index
        base = os.path.join(workdir, str(index))
        self.files = [
            _scratch_file(base + ".in", job.get("stdin", "").encode("utf-8")),
            _scratch_file(base + ".out"),
            _scratch_file(base + ".err"),
        ]
        sys.stdout.flush()
        sys.stderr.flush()
        self.started = time.monotonic()
        self.deadline = self.started + timeout_s
        self.pid = os.fork()
        if self.pid == 0:
            _child(job["script"], *self.files)
        self.pidfd = os.pidfd_open(self.pid)
        self.timed_out = False

    def kill(self) -> None:
        self.timed_out = True
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass

    def reap(self) -> dict:
        _, status = os.waitpid(self.pid, 0)
        os.close(self.pidfd)
        _, stdout, stderr = self.files
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        result = {
            "exit_code": os.waitstatus_to_exitcode(status),
            "timed_out": self.timed_out,
            "stdout": _tail(stdout),
            "stderr": _tail(stderr),
            "duration_s": round(time.monotonic() - self.started, 4),
        }
        for fd in self.files:
            os.close(fd)
        return result


def run_jobs(jobs: list[dict], timeout_s: float, parallel: int = 4) -> list[dict]:
    """Run every job (see the module docstring); results in job order."""
    results: list[dict | None] = [None] * len(jobs)
    pending = list(enumerate(jobs))
    running: list[_Running] = []
    with tempfile.TemporaryDirectory(prefix="drift-runner-") as workdir:
        while pending or running:
            while pending and len(running) < max(1, parallel):
                index, spec = pending.pop(0)
                running.append(_Running(index, spec, workdir, timeout_s))
            now = time.monotonic()
            for job in running:
                if not job.timed_out and job.deadline <= now:
                    job.kill()
            wait = max(0.0, min(job.deadline for job in running) - now)
            ready, _, _ = select.select([job.pidfd for job in running], [], [], wait)
            for job in [job for job in running if job.pidfd in ready]:
                results[job.index] = job.reap()
                running.remove(job)
    return [result for result in results if result is not None]


def _preload() -> None:
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def main(argv: list[str]) -> int:
    jobs_path, results_path = argv
    _preload()
    with open(jobs_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    results = run_jobs(spec["jobs"], float(spec.get("timeout_s", 5.0)), int(spec.get("parallel", 4)))
    with open(results_path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(results, handle)
    os.replace(results_path + ".tmp", results_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
