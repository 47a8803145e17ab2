"""The scripted oracle's tasks: the reference patches of a dataset, read the way the starter reads it.

Invariants: a JSONL dataset is read with ``durable_rollouts.task_sources.dataset_rows.read_dataset`` under the same
dataset root as the starter's (``root``, else ``ROLLOUT_DATASET_ROOT``), so a row whose ``swepro`` scripts are paths in
that root is known to the oracle exactly when the starter can run it; a directory is read as Harbor tasks
(``solution/reference.patch``). A row without a reference patch, or one that cannot be read, gives no task. Each task
matches on the first non-empty line of its problem statement.
"""

from __future__ import annotations

import logging
from pathlib import Path

from durable_rollouts.scripted_policy.completions import OracleTask
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.task_sources.harbor_tasks import reference_patches

log = logging.getLogger(__name__)


def oracle_tasks_from(path: str | Path | None, root: str | Path | None = None) -> list[OracleTask]:
    """The oracle's tasks of the dataset at ``path`` (none without one); script paths resolve in ``root``."""
    if not path:
        return []
    if Path(path).is_dir():
        pairs = reference_patches(path)
    else:
        pairs = []
        for row in read_dataset(path, root):
            if not isinstance(row, DatasetRow):
                log.warning("oracle tasks: %s: %s (the oracle does not know this row)", path, row)
            elif row.task.reference_patch:
                pairs.append((row.task.problem_statement, row.task.reference_patch))
    tasks = []
    for statement, patch in pairs:
        first_line = next(line for line in statement.splitlines() if line.strip())
        tasks.append(OracleTask(match=first_line.strip(), patch=patch))
    return tasks
