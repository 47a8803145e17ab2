"""The starter's results JSONL: appended to, never truncated, so a re-run with the same run id completes it.

Each line is one result record: a group line (``group_record_with_segments``: a ``GroupResult`` dump) or a single
result (``record_with_segments``: a ``RolloutResult`` or ``EpisodeResult`` dump), every result with its ``segments``
(and their ``weight_version_spans``) unpacked from its trajectory, plus extras such as ``line``. A line never holds a
packed trajectory or a whole log: each result's agent and grading logs go to files beside the results file
(``<results file>.logs/<workflow id>.agent.jsonl`` / ``.grading.log``), named by the line's ``log_path``.

Invariants:
* a line's key is its ``workflow_id`` (a group line's is the group's id), or ``line:<n>`` for a dataset row that
  never became a workflow; ``ResultSink.done`` holds the keys whose last line is final: every line except a ``failed``
  one with a reason in ``RETRYABLE_REASONS``, which a re-run collects again and appends;
* a torn last line (the starter killed mid-write) is cut off before appending. One starter writes one file at a time.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, KeysView
from pathlib import Path
from typing import Any, TypeVar

from durable_rollouts.contracts.rollout_group import GroupResult, ProbeTally
from durable_rollouts.policy.trajectory_packing import unpack_trajectory

T = TypeVar("T")

TRAJECTORY_UNREADABLE = "trajectory_unreadable"
# The workflow may still run, or a trajectory or payload was not readable: a re-run collects these again.
RETRYABLE_REASONS = ("server_unavailable", "wait_failed:", TRAJECTORY_UNREADABLE, "payload_unreadable")


# The logs of a result dump moved to files: (its field, the file's suffix).
LOG_FILES = (("agent", "agent.jsonl"), ("evaluation", "grading.log"))
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,119}")


def segments_of(result: Any) -> tuple[list[dict[str, Any]], str]:
    """The result's segments unpacked from its trajectory, as JSON, and ``""``; or no segments and why they could
    not be read (a trajectory recorded without its packed segments, an altered one, or one its group's result
    left to a child whose result was not read: segment summaries but no trajectory)."""
    if result.trajectory is None and getattr(result, "segments", None):
        return [], "trajectory not in this result (its group left it to the child's result, which was not read)"
    try:
        segments = unpack_trajectory(result.trajectory) if result.trajectory else []
    except (OSError, ValueError) as error:
        return [], f"{type(error).__name__}: {error}"
    return [s.model_dump(mode="json") for s in segments], ""


def record_with_segments(result: Any) -> dict[str, Any]:
    """The result plus its segments; one the starter cannot read makes the line ``failed: trajectory_unreadable``."""
    record = result.model_dump(mode="json")
    record["segments"], error = segments_of(result)
    if error:
        record.update(status="failed", abort_reason=TRAJECTORY_UNREADABLE, error=error)
    return record


def group_record_with_segments(group: GroupResult) -> dict[str, Any]:
    """The group plus, in each sample's ``rollout`` (or ``episode``), that result's segments in place of their
    summaries. One sample whose trajectory the starter cannot read makes the whole line ``failed:
    trajectory_unreadable`` (``kept`` false, the samples named in ``error``), which a re-run retries; the samples'
    own results stay as the workflow returned them."""
    record = group.model_dump(mode="json")
    unreadable = []
    for sample, dumped in zip(group.samples, record["samples"], strict=True):
        result = sample.rollout or sample.episode
        if result is None:
            continue
        dumped[group.kind]["segments"], error = segments_of(result)
        if error:
            unreadable.append(f"sample {sample.sample_index}: {error}")
    if unreadable:
        record.update(
            status="failed",
            abort_reason=TRAJECTORY_UNREADABLE,
            error="; ".join(unreadable),
            kept=False,
            dropped_by="not_completed",
        )
    return record


def record_key(record: dict[str, Any]) -> str:
    return record.get("workflow_id") or f"line:{record.get('line')}"


def is_final(record: dict[str, Any]) -> bool:
    return not (
        record.get("status") == "failed" and str(record.get("abort_reason") or "").startswith(RETRYABLE_REASONS)
    )


def file_stem(workflow_id: str) -> str:
    """A file name stem for ``workflow_id``: the id itself when plain, else an ASCII prefix plus 16 hex digits
    of its SHA-256 (distinct ids never share a file; none reaches outside the folder)."""
    if _PLAIN_NAME.fullmatch(workflow_id):
        return workflow_id
    digest = hashlib.sha256(workflow_id.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in workflow_id[:80]) + f"-{digest}"


def _results_in(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The result dumps a record holds: itself, or its group's samples' ``rollout`` / ``episode``."""
    if "samples" not in record:
        return [record]
    return [
        sample[kind]
        for sample in record["samples"]
        for kind in ("rollout", "episode")
        if isinstance(sample.get(kind), dict)
    ]


def move_out_logs(record: dict[str, Any], folder: Path | None) -> None:
    """Write each result's whole logs into ``folder`` (``<workflow id>.agent.jsonl`` / ``.grading.log``) and set
    their ``log_path`` (no folder: not written), empty their ``log``, and drop each packed trajectory (an
    episode's role turns' too: their segments are in the line)."""
    for result in _results_in(record):
        for holder in (result, result.get("drift_role"), result.get("repair_role")):
            if isinstance(holder, dict) and isinstance(holder.get("trajectory"), dict):
                holder["trajectory"].pop("packed", None)
        for field, suffix in LOG_FILES:
            part = result.get(field)
            if not isinstance(part, dict) or not part.get("log"):
                continue
            if folder is None:
                part["log"] = ""
                continue
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{file_stem(str(result.get('workflow_id', 'unnamed')))}.{suffix}"
            path.write_text(part["log"], encoding="utf-8", errors="replace")
            part.update(log="", log_path=str(path))


class Progress:
    """The progress line of single results; its mean reward is over completed results only (an aborted or failed
    one was never scored)."""

    def __init__(self, total: int):
        self.total, self.done, self.aborted, self.failed = total, 0, 0, 0
        self.rewards: list[float] = []
        self.started = time.monotonic()

    def update(self, result: Any) -> None:
        self.done += 1
        self.aborted += result.status == "aborted"
        self.failed += result.status == "failed"
        if result.status == "completed":
            self.rewards.append(result.reward)
        mean = f"{statistics.fmean(self.rewards):.3f}" if self.rewards else "-"
        self.show(
            f"done {self.done}/{self.total}  running {self.total - self.done}  aborted {self.aborted}  failed "
            f"{self.failed}  mean reward (completed) {mean}"
        )

    def show(self, text: str) -> None:
        line = f"[{time.monotonic() - self.started:6.0f}s] {text}"
        print(("\r" + line) if sys.stdout.isatty() else line, end="" if sys.stdout.isatty() else "\n", flush=True)


class GroupProgressLine(Progress):
    """The progress line of groups: groups finished of those this run started, valid samples of the finished
    groups' samples, refills, the mean reward over valid samples (an invalid one was never the policy's reward),
    the finished groups that did not complete, by status, and once any is, the samples flagged tampered and the
    impossible-task probes judged."""

    def __init__(self, total: int):
        super().__init__(total)
        self.samples, self.valid, self.refilled, self.tampered = 0, 0, 0, 0
        self.not_completed: dict[str, int] = {}
        self.probes = ProbeTally()

    def update(self, result: GroupResult) -> None:
        self.done += 1
        self.samples += len(result.samples)
        self.valid += result.n_valid
        self.refilled += result.refilled
        self.tampered += sum(result.tampered_mask)
        self.rewards += [reward for reward, valid in zip(result.rewards, result.valid_mask, strict=True) if valid]
        if result.status != "completed":
            self.not_completed[result.status] = self.not_completed.get(result.status, 0) + 1
        mean = f"{statistics.fmean(self.rewards):.3f}" if self.rewards else "-"
        others = "".join(f"  {status} {n}" for status, n in sorted(self.not_completed.items()))
        others += f"  tampered {self.tampered}" if self.tampered else ""
        self.probes += ProbeTally.of([result])
        others += f"  {self.probes.summary()}" if self.probes.summary() else ""
        self.show(
            f"groups {self.done}/{self.total}  samples valid {self.valid}/{self.samples}  refilled {self.refilled}  "
            f"mean reward (valid) {mean}{others}"
        )


class ResultSink:
    """Appends one JSON line per result (flushed at once) and moves the progress bar (``pending`` sets its total;
    ``progress`` makes it, ``Progress`` or ``GroupProgressLine``)."""

    def __init__(self, path: Path, record: Callable[[Any], dict], progress: Callable[[int], Progress] = Progress):
        self.path, self.record, self.make_progress = path, record, progress
        self.final_status: dict[str, str] = {}
        self.progress = progress(0)

    @property
    def done(self) -> KeysView[str]:
        """The keys whose last line is final (``final_status`` has that line's status)."""
        return self.final_status.keys()

    def __enter__(self) -> ResultSink:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.final_status = self._read_existing()
        self._file = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc) -> None:
        self._file.close()

    def pending(self, items: list[T], key: Callable[[T], str], what: str) -> list[T]:
        """The items whose key has no final line yet (said when some have); the progress bar counts those."""
        todo = [item for item in items if key(item) not in self.done]
        if len(todo) < len(items):
            print(
                f"{self.path}: {len(items) - len(todo)} of {len(items)} {what} already there; running the other "
                f"{len(todo)}",
                flush=True,
            )
        self.progress = self.make_progress(len(todo))
        return todo

    def write(self, result: Any) -> None:
        self.write_record(self.record(result))
        self.progress.update(result)

    @property
    def logs_folder(self) -> Path:
        return self.path.with_name(self.path.name + ".logs")

    def write_record(self, record: dict[str, Any]) -> None:
        move_out_logs(record, self.logs_folder)
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if is_final(record):
            self.final_status[record_key(record)] = str(record.get("status"))

    def _read_existing(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
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
        return {key: str(record.get("status")) for key, record in last.items() if is_final(record)}
