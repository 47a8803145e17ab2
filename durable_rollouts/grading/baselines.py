"""The row's baseline: the record of its grading on the unpatched tree, which every patched grading is judged against
(``tamper_checks``), taken once per row and image and remembered.

Invariants:

* A baseline is fixed by the image (by its ID, a content address: a rebuilt or re-tagged image is a new key) and by
  the task as the grader reads it (``fingerprint``: every field of the row); the K samples of a group and every
  later epoch of the row share one. Nothing a patch does reaches it: it is recorded in a sandbox of its own, booted
  fresh, where no diff is applied.
* Gradings that need the same baseline at once share one recording (the first starts it; a caller cancelled while
  waiting leaves it running for the others). A recording that raises is not remembered: the next grading tries again.
* At most ``MAX_REMEMBERED`` baselines are kept per worker process, the least recently used forgotten first.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.grading.run_record import RunRecord

MAX_REMEMBERED = 512

_remembered: OrderedDict[tuple[str, str], RunRecord] = OrderedDict()
_recording: dict[tuple[str, str], asyncio.Task[RunRecord]] = {}


def fingerprint(task: TaskSpec) -> str:
    """A digest of every field of the row: two rows grade alike on one image iff they have the same."""
    return hashlib.sha256(task.model_dump_json().encode()).hexdigest()


def forget() -> None:
    """Forget every remembered baseline (a benchmark of a worker's first grading of a row)."""
    _remembered.clear()


def _remember(key: tuple[str, str], baseline: RunRecord) -> None:
    _remembered[key] = baseline
    while len(_remembered) > MAX_REMEMBERED:
        _remembered.popitem(last=False)


async def baseline(image: str, task: TaskSpec, recording: Callable[[], Awaitable[RunRecord]]) -> RunRecord:
    """The row's baseline on ``image``: remembered, being recorded by another grading, or recorded now with
    ``recording``."""
    key = (image, fingerprint(task))
    if (known := _remembered.get(key)) is not None:
        _remembered.move_to_end(key)
        return known
    task_of_key = _recording.get(key)
    if task_of_key is None:

        async def record_and_remember() -> RunRecord:
            try:
                found = await recording()
            finally:
                _recording.pop(key, None)
            _remember(key, found)
            return found

        task_of_key = _recording[key] = asyncio.ensure_future(record_and_remember())
        # Its error reaches every caller still waiting; one left with no caller must not be logged as never retrieved.
        task_of_key.add_done_callback(lambda done: done.cancelled() or done.exception())
    return await asyncio.shield(task_of_key)
