"""The drift → repair task corpus shipped under ``examples/drift_tasks`` (see its ``make_corpus.py``).

``corpus.json`` lists each task's id, difficulty, target drift category,
versions, script file, visible case and held-out cases (expected stdout
included); scripts live in ``scripts/``. ``load_corpus`` validates every
entry into a ``DriftTask`` and is cached per directory.

``sample_task`` is deterministic: a named task, or the ``seed``-th (modulo)
task of the requested difficulty in corpus order; an unknown id or an empty
difficulty is ``UnknownTask``.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from durable_rollouts.contracts.drift_repair import Difficulty, DriftTask, SampleRequest
from durable_rollouts.paths import PROJECT_ROOT

CORPUS_DIR = PROJECT_ROOT / "examples" / "drift_tasks"


class UnknownTask(LookupError):
    pass


@lru_cache(maxsize=4)
def load_corpus(root: Path = CORPUS_DIR) -> dict[str, DriftTask]:
    entries = json.loads((root / "corpus.json").read_text())
    tasks = {}
    for entry in entries:
        script = (root / entry.pop("file")).read_text()
        task = DriftTask(script=script, **entry)
        tasks[task.task_id] = task
    return tasks


def tasks_of(corpus: dict[str, DriftTask], difficulty: Difficulty | None) -> list[DriftTask]:
    return [task for task in corpus.values() if difficulty is None or task.difficulty == difficulty]


def sample_task(corpus: dict[str, DriftTask], request: SampleRequest) -> DriftTask:
    if request.task_id is not None:
        if request.task_id not in corpus:
            raise UnknownTask(f"no task {request.task_id!r} in the corpus")
        return corpus[request.task_id]
    pool = tasks_of(corpus, request.difficulty)
    if not pool:
        raise UnknownTask(f"no task of difficulty {request.difficulty!r}")
    return pool[request.seed % len(pool)]
