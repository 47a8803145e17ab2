"""A run of groups into a results file: the one way the starter runs dataset rows and drift → repair episodes.

``dataset_groups`` turns a dataset's rows into ``RolloutGroup`` inputs (one group of K samples per row, plus
an impossible-task probe group for the rows the run's share picks); ``run_groups`` runs any list of groups,
rollouts or episodes, into a results file.

Invariants of ``run_groups``:
* only groups without a final line in the file are started or attached to (workflow ids are fixed per run,
  group and sample), so a re-run of the same run id collects what is missing and nothing twice;
* at most ``max(1, concurrency // K)`` groups are in flight (``concurrency`` counts samples), and with
  ``Placement.prefetch`` the images of as many groups after them are announced to the fleet
  (``image_prefetch``) as they come up, so hosts pull them while the current groups run;
* each group is appended as one line as soon as it finishes; a line that cannot be written is reported on
  stderr and the run goes on (that group then has no final line, so the run is not complete);
* the run is complete when every group has a final line with status ``completed``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from durable_rollouts.config.settings import RolloutBudgets, images_from_env
from durable_rollouts.contracts.rollout_group import GroupFilter, GroupInput, GroupResult
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.task_sources.dataset_rows import DatasetRow, RowError, read_dataset
from durable_rollouts.task_sources.harbor_tasks import read_harbor_tasks
from durable_rollouts.task_sources.impossible_probes import ProbeUnavailable, probe_for_slot
from durable_rollouts.trainer_client.image_prefetch import ImagePrefetch
from durable_rollouts.trainer_client.results_file import (
    GroupProgressLine,
    ResultSink,
    group_record_with_segments,
    record_key,
)
from durable_rollouts.trainer_client.rollout_groups import group_id, stream_groups
from durable_rollouts.trainer_client.rollout_runs import rollout_input


@dataclass(frozen=True)
class GroupOptions:
    """How each row's group is run: ``samples`` rollouts, refills and the group filter (None: the group's size)."""

    run_id: str
    samples: int
    refill_budget: int | None
    min_valid: int | None
    filter: GroupFilter


@dataclass(frozen=True)
class Placement:
    """Where a run's groups go and how many of their samples run at once."""

    task_queue: str
    concurrency: int
    server_wait_s: float
    # Tell the fleet the images of the next round of groups while the current one runs (``image_prefetch``).
    prefetch: bool = True


@dataclass(frozen=True)
class BatchRun:
    """The groups that finished in this call (in finish order) and whether the whole run is complete."""

    results: list[GroupResult]
    complete: bool


def read_rows(path: Path, root: str | None = None) -> tuple[list[DatasetRow], list[RowError]]:
    """The dataset's usable rows and its bad ones; each bad one is reported on stderr with its line and field.

    A directory is read as Harbor tasks (``durable_rollouts.task_sources.harbor_tasks``: one task, or one per
    subdirectory; their images found, pulled (as the worker's ``ROLLOUT_PULL_POLICY``, mirror and registry settings say)
    or built on this Docker engine), a row's ``line`` then being its task directory. Script paths in JSONL rows resolve
    inside ``root`` (default: ``ROLLOUT_DATASET_ROOT``; with neither they are refused)."""
    rows, errors = [], []
    items = read_harbor_tasks(path, image_settings=images_from_env()) if path.is_dir() else read_dataset(path, root)
    for item in items:
        if isinstance(item, RowError):
            print(f"{path}: skipping bad row: {item}", file=sys.stderr)
            errors.append(item)
        else:
            rows.append(item)
    return rows, errors


def invalid_row_record(error: RowError) -> dict[str, Any]:
    """The results line of a dataset row (or Harbor task directory) that never became a rollout (sample and group -1);
    its reason is ``invalid_row:<field>``, a ``/`` in the field (``tests/test.sh``) written as ``.``."""
    reason = "invalid_row:" + re.sub(r"[^\w.:]", ".", error.field)
    result = RolloutResult(
        workflow_id="",
        instance_id="",
        sample_index=-1,
        group_index=-1,
        status="failed",
        abort_reason=reason,
        error=str(error),
    )
    return {**result.model_dump(mode="json"), "segments": [], "line": error.line}


def group_input(
    task: TaskSpec, group_index: int, policy: PolicySpec, budgets: RolloutBudgets, options: GroupOptions
) -> GroupInput:
    """The row's group: ``options.samples`` rollouts (sample index 0..K-1) under the run's group options."""
    return GroupInput(
        run_id=options.run_id,
        group_index=group_index,
        rollouts=[rollout_input(task, sample, group_index, policy, budgets) for sample in range(options.samples)],
        refill_budget=options.refill_budget,
        min_valid=options.min_valid,
        filter=options.filter,
    )


def dataset_groups(
    rows: list[DatasetRow],
    policy: PolicySpec,
    budgets: RolloutBudgets,
    options: GroupOptions,
    impossible_share: float,
    source: str,
) -> tuple[list[GroupInput], dict[str, int | str]]:
    """One group per row (group index = row index), then a probe group for each row ``impossible_share`` picks (same
    group index and line, never kept); and each group's dataset line by group id. A row that cannot be made a probe
    is reported on stderr (after ``source``, the dataset's name) and runs only as itself."""
    groups = [group_input(row.task, index, policy, budgets, options) for index, row in enumerate(rows)]
    lines = {group_id(group): row.line for group, row in zip(groups, rows, strict=True)}
    for index, row in enumerate(rows):
        try:
            probe = probe_for_slot(row.task, options.run_id, index, impossible_share)
        except ProbeUnavailable as error:
            print(f"{source}: no impossible-task probe of {row.line}: {error}", file=sys.stderr)
            continue
        if probe is not None:
            groups.append(group_input(probe, index, policy, budgets, options))
            lines[group_id(groups[-1])] = row.line
    return groups, lines


def groups_in_flight(concurrency: int, group_size: int) -> int:
    """``concurrency`` counts samples: as many whole groups as fit, at least one."""
    return max(1, concurrency // group_size)


async def run_groups(
    client: Client,
    groups: list[GroupInput],
    out: Path,
    placement: Placement,
    what: str,
    record: Callable[[GroupResult], dict[str, Any]] = group_record_with_segments,
    before: Iterable[dict[str, Any]] = (),
) -> BatchRun:
    """Run the groups without a final line in ``out``, appending each one as it finishes (``record`` makes its line).
    ``before`` holds lines written first, each once: one whose key (``results_file.record_key``) is already in the
    file is not written again."""
    with ResultSink(out, record, GroupProgressLine) as sink:
        for line in before:
            if record_key(line) not in sink.done:
                sink.write_record(line)
        todo = sink.pending(groups, group_id, what)
        in_flight = groups_in_flight(placement.concurrency, max((group.size for group in groups), default=1))
        prefetch = ImagePrefetch(client, todo[0].run_id, placement.task_queue) if todo and placement.prefetch else None
        upcoming = prefetch.announce_groups if prefetch is not None else None
        results = []
        async for result in stream_groups(
            client,
            todo,
            placement.task_queue,
            in_flight,
            server_wait_s=placement.server_wait_s,
            child_logs=True,
            upcoming=upcoming,
        ):
            _write(sink, result)
            results.append(result)
        if prefetch is not None:
            await prefetch.settle()
    return BatchRun(results, all(sink.final_status.get(group_id(group)) == "completed" for group in groups))


def _write(sink: ResultSink, group: GroupResult) -> None:
    try:
        sink.write(group)
    except OSError as error:
        print(
            f"{sink.path}: could not write group {group.workflow_id}: {type(error).__name__}: {error}",
            file=sys.stderr,
            flush=True,
        )
