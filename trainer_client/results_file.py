"""The starter's results JSONL: appended to, never truncated, so a re-run with the same run id completes it.

Each line is one result record (``record_with_segments``: a ``RolloutResult``
dump, with its oldest and newest weight version and its version changes, or an
``EpisodeResult`` dump, plus its ``segments`` with their
``weight_version_spans``, and extras such as ``line``).
A line's key is its ``workflow_id``, or ``line:<n>`` for a dataset row that
never became a workflow. ``ResultSink.done`` holds the keys whose last line is
final: every line except a ``failed`` one with a reason in
``RETRYABLE_REASONS`` (the workflow may still run, or its trajectory was not
readable), which a re-run collects again and appends. A torn last line (the
starter killed mid-write) is cut off before appending. One starter writes one
file at a time.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from policy.trajectory_store import TrajectoryStore

T = TypeVar("T")

RETRYABLE_REASONS = ("server_unavailable", "wait_failed:", "trajectory_unreadable")


def record_with_segments(result: Any) -> dict[str, Any]:
    """The result plus its segments loaded from the trajectory store; one the starter cannot read (not the
    workers' results directory, a corrupt file) makes the line ``failed: trajectory_unreadable``."""
    record = result.model_dump(mode="json")
    try:
        segments = TrajectoryStore.load(result.trajectory) if result.trajectory else []
    except (OSError, ValueError) as error:
        record.update(status="failed", abort_reason="trajectory_unreadable", error=f"{type(error).__name__}: {error}")
        segments = []
    record["segments"] = [s.model_dump(mode="json") for s in segments]
    return record


def record_key(record: dict[str, Any]) -> str:
    return record.get("workflow_id") or f"line:{record.get('line')}"


def is_final(record: dict[str, Any]) -> bool:
    return not (record.get("status") == "failed" and str(record.get("abort_reason") or "").startswith(RETRYABLE_REASONS))


class Progress:
    """The progress line; its mean reward is over completed results only (an aborted or failed one was never scored)."""

    def __init__(self, total: int):
        self.total, self.done, self.aborted, self.failed, self.rewards = total, 0, 0, 0, []
        self.started = time.monotonic()

    def update(self, result: Any) -> None:
        self.done += 1
        self.aborted += result.status == "aborted"
        self.failed += result.status == "failed"
        if result.status == "completed":
            self.rewards.append(result.reward)
        mean = f"{statistics.fmean(self.rewards):.3f}" if self.rewards else "-"
        line = (
            f"[{time.monotonic() - self.started:6.0f}s] done {self.done}/{self.total}  running {self.total - self.done}"
            f"  aborted {self.aborted}  failed {self.failed}  mean reward (completed) {mean}"
        )
        print(("\r" + line) if sys.stdout.isatty() else line, end="" if sys.stdout.isatty() else "\n", flush=True)


class ResultSink:
    """Appends one JSON line per result (flushed at once) and moves the progress bar (``pending`` sets its total)."""

    def __init__(self, path: Path, record: Callable[[Any], dict]):
        self.path, self.record = path, record
        self.done: set[str] = set()
        self.progress = Progress(0)

    def __enter__(self) -> ResultSink:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.done = self._read_existing()
        self._file = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()

    def pending(self, items: list[T], key: Callable[[T], str], what: str) -> list[T]:
        """The items whose key has no final line yet (said when some have); the progress bar counts those."""
        todo = [item for item in items if key(item) not in self.done]
        if len(todo) < len(items):
            print(f"{self.path}: {len(items) - len(todo)} of {len(items)} {what} already there; running the other {len(todo)}", flush=True)
        self.progress = Progress(len(todo))
        return todo

    def write(self, result: Any) -> None:
        self.write_record(self.record(result))
        self.progress.update(result)

    def write_record(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if is_final(record):
            self.done.add(record_key(record))

    def _read_existing(self) -> set[str]:
        if not self.path.exists():
            return set()
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with self.path.open("r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
            data = data[: data.rfind(b"\n") + 1]
        last: dict[str, dict[str, Any]] = {}
        for text in data.decode("utf-8", errors="replace").split("\n"):
            try:
                record = json.loads(text)
            except ValueError:
                continue
            if isinstance(record, dict):
                last[record_key(record)] = record
        return {key for key, record in last.items() if is_final(record)}
