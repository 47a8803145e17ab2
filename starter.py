"""The trainer's side: start rollouts, follow them, write results.

CLI::

    python starter.py run DATASET.jsonl|HARBOR_TASKS_DIR [--n-samples-per-prompt K] [--concurrency C] [--out results.jsonl]
                      [--group-filter keep_all|min_valid|nonzero_variance] [--min-valid M] [--refill-budget R]
    python starter.py demo [--policy oracle|noop] [--keep-ui]
    python starter.py status [--stale-minutes 10] [--oldest 10]     # operators: what is running, what is stuck, hosts and slots
    python starter.py show WORKFLOW_ID                              # live progress + agent log tail; grading summary + log paths
    python starter.py cancel WORKFLOW_ID [--reason R]               # graceful: sandbox destroyed, result aborted
    python starter.py episodes --n 32 --difficulty easy [--k K]     # drift -> repair self-play episodes
    python starter.py regrade --run-id R [--out F] [--dataset ROWS] # grade run R's kept patches again

``run`` needs a worker (``python worker.py``) and a Temporal server: the connection comes from a
``temporal.toml`` profile and the ``TEMPORAL_*`` variables (address, namespace, TLS, mTLS, API key;
``trainer_client.temporal_connection``); ``run`` waits ``--server-wait`` for a server unreachable at start as
for an outage mid-run, then says so in one line. ``demo`` is the embedded default: with no
``TEMPORAL_ADDRESS`` it starts a local dev server (UI on :8233) and a worker
with the scripted policy, then runs the bundled example tasks. ``episodes``
runs ``DriftRepairEpisode`` workflows over the drift corpus the same way
(embedded, with the scripted ``self_play`` policy, unless ``TEMPORAL_ADDRESS``
is set); the K episodes of a task are one ``RolloutGroup``, appended as one
line when it finishes, like ``run``'s groups.

Python API for flat rollouts: ``await start_rollout(client, rollout)`` returns a workflow handle
(re-attaching when that rollout already ran: the workflow id is derived from
instance id, sample index and group index); ``await run_rollouts(client,
rollouts)`` runs many with a concurrency limit and returns one result per
rollout, in input order: a rollout that could not be started or collected is
a ``failed`` result (``trainer_client.workflow_runs``) and the others go on, and a
Temporal restart is waited out (``server_wait_s`` per outage). GRPO groups
(``RolloutGroup`` workflows) are streamed and batched by
``trainer_client.rollout_groups`` (``stream_groups``, ``fill_batch``).

``run`` and ``demo`` read the dataset (a JSONL file, or a directory of Harbor
tasks: ``task_sources.harbor_tasks``, a bad task directory reported by its path
and field), report every bad row by line and field
(on stderr and as a ``failed`` line ``invalid_row:<field>`` in the results),
run each usable row as one group of K samples (``--n-samples-per-prompt``,
with ``--group-filter``, ``--min-valid`` and ``--refill-budget``; at most
``--concurrency`` samples, i.e. ``max(1, C // K)`` groups, in flight) and
append each group to the results file as one line as soon as it finishes: a
re-run with the same ``--run-id`` starts or attaches to only the groups
missing from it (``trainer_client.results_file``). ``run`` and ``episodes``
use the ``ROLLOUT_TASK_QUEUE`` the workers poll.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

from temporalio.client import Client
from temporalio.service import RPCError

from durable_rollouts.config.paths import PROJECT_ROOT
from durable_rollouts.config.settings import RolloutBudgets, SettingsError, budgets_from_env, impossible_share_from_env, staleness_from_env
from durable_rollouts.contracts.rollout import PinnableSamplingKey, PolicySpec, RolloutResult, SamplingParams, StalenessBound, TaskSpec
from durable_rollouts.contracts.rollout_group import GroupFilter, GroupInput, GroupResult, GroupSample, ProbeTally
from durable_rollouts.drift_repair.corpus import load_corpus, tasks_of
from durable_rollouts.task_sources.dataset_rows import DatasetRow, RowError, read_dataset
from durable_rollouts.task_sources.harbor_tasks import read_harbor_tasks
from durable_rollouts.task_sources.impossible_probes import ProbeUnavailable, probe_for_slot
from durable_rollouts.trainer_client import grading_summary, regrade_runs, rollout_queries
from durable_rollouts.trainer_client.drift_episodes import episode_groups, episode_inputs
from durable_rollouts.trainer_client.local_services import temporal_dev_server, worker_process
from durable_rollouts.trainer_client.payload_storage import PayloadStoreUnusable
from durable_rollouts.trainer_client.results_file import GroupProgressLine, ResultSink, group_record_with_segments, move_out_logs
from durable_rollouts.trainer_client.rollout_groups import group_id, stream_groups
from durable_rollouts.trainer_client.rollout_runs import (
    connect,
    rollout_input,
    task_queue_from_env,
)
from durable_rollouts.trainer_client.temporal_connection import ConnectionSettingsError, TemporalUnreachable
from durable_rollouts.trainer_client.workflow_runs import server_wait_from_env

EXAMPLE_DATASET = PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl"
MAX_RUN_ID_BYTES = 128


def group_input(task: TaskSpec, group_index: int, policy: PolicySpec, budgets: RolloutBudgets, args: argparse.Namespace) -> GroupInput:
    """The row's group: ``--n-samples-per-prompt`` rollouts (sample index 0..K-1) under the run's group flags."""
    return GroupInput(
        run_id=args.run_id,
        group_index=group_index,
        rollouts=[rollout_input(task, sample, group_index, policy, budgets) for sample in range(args.n_samples_per_prompt)],
        refill_budget=args.refill_budget,
        min_valid=args.min_valid,
        filter=args.group_filter,
    )


def groups_in_flight(concurrency: int, group_size: int) -> int:
    """``--concurrency`` counts samples: as many whole groups as fit, at least one."""
    return max(1, concurrency // group_size)


async def stream_into(client: Client, sink: ResultSink, groups: list[GroupInput], args: argparse.Namespace, what: str) -> list[GroupResult]:
    """Run the groups without a final line in ``sink`` (``--concurrency`` samples in flight) and append each one as
    it finishes; the results, in finish order."""
    todo = sink.pending(groups, group_id, what)
    in_flight = groups_in_flight(args.concurrency, max((group.size for group in groups), default=1))
    results = []
    async for result in stream_groups(client, todo, args.task_queue, in_flight, server_wait_s=args.server_wait, child_logs=True):
        write_group(sink, result)
        results.append(result)
    return results


def invalid_row_record(error: RowError) -> dict:
    """The results line of a dataset row (or Harbor task directory) that never became a rollout (sample and group -1);
    its reason is ``invalid_row:<field>``, a ``/`` in the field (``tests/test.sh``) written as ``.``."""
    reason = "invalid_row:" + re.sub(r"[^\w.:]", ".", error.field)
    result = RolloutResult(workflow_id="", instance_id="", sample_index=-1, group_index=-1, status="failed", abort_reason=reason, error=str(error))
    return {**result.model_dump(mode="json"), "segments": [], "line": error.line}


def print_summary(groups: list[GroupResult]) -> None:
    """Per group (by group index) its group line, then one line per sample; last, the totals."""
    print()
    print(f"{'instance':28} {'sample':>6} {'status':9} {'reward':>6} {'valid':>5} {'applied':>7} {'turns':>5} {'tokens':>7} {'secs':>6}  reason")
    for group in sorted(groups, key=lambda g: g.group_index):
        print(_group_line(group))
        for sample in group.samples:
            print(_sample_line(group.prompt_key, sample))
    valid_rewards = [reward for g in groups for reward, valid in zip(g.rewards, g.valid_mask, strict=True) if valid]
    by_status = {status: sum(g.status == status for g in groups) for status in ("completed", "insufficient", "cut", "failed")}
    counts = ", ".join(f"{n} {status}" for status, n in by_status.items() if n)
    mean = f"mean reward {statistics.fmean(valid_rewards):.3f}" if valid_rewards else "no valid samples"
    samples = sum(len(g.samples) for g in groups)
    graded = [sample for g in groups for sample in g.samples if sample.graded]
    tampered = f"; tampered {sum(sample.tampered for sample in graded)}/{len(graded)} graded" if graded else ""
    probes = ProbeTally.of(groups).summary()
    print(
        f"groups {len(groups)}: {counts or 'none'}, {sum(not g.kept for g in groups)} dropped; samples valid {len(valid_rewards)}/{samples}, {mean}"
        + tampered
        + (f"; {probes}" if probes else "")
    )


def _group_line(group: GroupResult) -> str:
    verdict = "kept" if group.kept else f"dropped_by {group.dropped_by}"
    why = group.abort_reason or group.note
    return (
        f"group {group.group_index} {group.prompt_key}: {group.status}  valid {group.n_valid}/{len(group.samples)}"
        f"  refilled {group.refilled}/{group.refill_budget}  {verdict}" + (f"  ({why})" if why else "")
    )


def _sample_line(prompt_key: str, sample: GroupSample) -> str:
    r = sample.rollout
    if r is None:
        return f"{prompt_key[:28]:28} {sample.sample_index:>6} {'-':9} {0.0:6.2f} {str(sample.valid):>5} {'-':>7} {'-':>5} {'-':>7} {'-':>6}  {sample.invalid_reason or ''}"
    tokens = sum(s.n_tokens for s in r.segments)
    turns = r.agent.turns if r.agent else 0
    empty = "patch: empty" if r.evaluation and grading_summary.patch_state(r.evaluation) == "empty" else ""
    tampered = "tampered" if sample.tampered else ""
    probe = f"probe: {sample.probe_verdict}" if sample.probe_verdict else ""
    reason = "  ".join(part for part in (sample.invalid_reason or r.abort_reason or "", empty, tampered, probe) if part)
    return (
        f"{r.instance_id[:28]:28} {r.sample_index:>6} {r.status:9} {sample.reward:6.2f} {str(sample.valid):>5} {str(r.applied_cleanly):>7}"
        f" {turns:>5} {tokens:>7} {r.elapsed_s:6.1f}  {reason}"
    )


def read_rows(path: Path, root: str | None = None) -> tuple[list[DatasetRow], list[RowError]]:
    """The dataset's usable rows and its bad ones; each bad one is reported on stderr with its line and field.

    A directory is read as Harbor tasks (``task_sources.harbor_tasks``: one task, or one per subdirectory; their
    images found or built on this Docker engine), a row's ``line`` then being its task directory. Script paths in
    JSONL rows resolve inside ``root`` (default: ``ROLLOUT_DATASET_ROOT``; with neither they are refused)."""
    rows, errors = [], []
    items = read_harbor_tasks(path) if path.is_dir() else read_dataset(path, root)
    for item in items:
        if isinstance(item, RowError):
            print(f"{path}: skipping bad row: {item}", file=sys.stderr)
            errors.append(item)
        else:
            rows.append(item)
    return rows, errors


def staleness_bound(args: argparse.Namespace) -> StalenessBound | None:
    """The run's staleness bound: ``--max-staleness`` / ``--staleness-policy``, each falling back to its environment variable."""
    env = staleness_from_env()
    bound = args.max_staleness if args.max_staleness is not None else env.max_staleness if env else None
    if bound is None:
        return None
    return StalenessBound(max_staleness=bound, policy=args.staleness_policy or (env.policy if env else "mask"))


async def run_dataset(client: Client, args: argparse.Namespace) -> int:
    """Run the dataset's groups missing from ``args.out``, appending each as one line when it finishes.

    With ``--impossible-share`` (``ROLLOUT_IMPOSSIBLE_SHARE``) that share of the rows also run as an
    impossible-task probe: one more group each, under the row's group index and line, never kept.

    Exit code 0 when every row is usable and every group of the run has a
    final line in the file with status ``completed`` (kept or dropped by the
    filter: a dropped group is the filter's verdict, not a loss); 1 otherwise:
    a bad row, a group ``insufficient`` / ``cut`` / ``failed`` (samples are
    missing), or a line that could not be written or whose trajectories were
    unreadable (a re-run retries those).
    """
    rows, errors = read_rows(Path(args.dataset), args.dataset_root)
    policy = PolicySpec(
        policy_url=args.policy_url,
        sampling=SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens, pinned=args.pin_sampling),
        context_budget=args.context_budget,
        staleness=staleness_bound(args),
    )
    budgets = budgets_from_env()
    groups = [group_input(row.task, index, policy, budgets, args) for index, row in enumerate(rows)]
    lines = {group_id(group): row.line for group, row in zip(groups, rows, strict=True)}
    share = impossible_share_from_env() if args.impossible_share is None else args.impossible_share
    for index, row in enumerate(rows):
        try:
            probe = probe_for_slot(row.task, args.run_id, index, share)
        except ProbeUnavailable as error:
            print(f"{args.dataset}: no impossible-task probe of {row.line}: {error}", file=sys.stderr)
            continue
        if probe is not None:
            groups.append(group_input(probe, index, policy, budgets, args))
            lines[group_id(groups[-1])] = row.line
    with ResultSink(
        Path(args.out), lambda result: {**group_record_with_segments(result), "line": lines[result.workflow_id]}, GroupProgressLine
    ) as sink:
        for error in errors:
            if f"line:{error.line}" not in sink.done:
                sink.write_record(invalid_row_record(error))
        results = await stream_into(client, sink, groups, args, f"groups of run {args.run_id}")
    print_summary(results)
    print(f"results: {args.out}")
    complete = all(sink.final_status.get(group_id(group)) == "completed" for group in groups)
    return 0 if rows and not errors and complete else 1


def write_group(sink: ResultSink, group: GroupResult) -> None:
    """Append the group's line; one that cannot be written is reported and the run goes on (the group then has no
    final line, so the exit code is 1 and a re-run collects it again)."""
    try:
        sink.write(group)
    except OSError as error:
        print(f"{sink.path}: could not write group {group.workflow_id}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)


@asynccontextmanager
async def embedded_cluster(worker_args: list[str], log_path: Path, address: str | None = None) -> AsyncIterator[Client]:
    """A worker with the scripted policy, on ``address`` or on a local dev server (UI on :8233), its log in
    ``log_path`` (the console keeps the progress lines and the table); yields a client."""
    async with temporal_dev_server() if not address else nullcontext(address) as server:
        print(f"Temporal UI: http://127.0.0.1:8233/namespaces/default/workflows (server {server})", flush=True)
        print(f"worker log: {log_path}", flush=True)
        async with worker_process(server, [*worker_args, "--adapter-port", "0"], log_path=log_path):
            yield await connect(server)


def worker_log_path(results: str) -> Path:
    """Where an embedded worker's log goes: beside the results file."""
    path = Path(results)
    return path.with_name(f"{path.stem}.worker.log")


async def demo(args: argparse.Namespace) -> int:
    args.dataset = args.dataset or str(EXAMPLE_DATASET)
    worker_args = ["--scripted-policy", args.policy, "--oracle-tasks", args.dataset]
    if args.dataset_root:
        worker_args += ["--dataset-root", args.dataset_root]
    async with embedded_cluster(worker_args, worker_log_path(args.out), os.environ.get("TEMPORAL_ADDRESS")) as client:
        code = await run_dataset(client, args)
        if args.keep_ui:
            print("--keep-ui: the dev server and worker keep running; press Ctrl-C (or send SIGTERM) to stop them.", flush=True)
            await asyncio.Event().wait()
    return code


def print_episode_summary(groups: list[GroupResult]) -> None:
    """Per group (by group index) its group line, then one line per episode; last, the completed episodes' rates."""
    print()
    print(
        f"{'task':22} {'grp':>3} {'smp':>3} {'status':9} {'primitive':22} {'spec':8} {'breaks':>6} {'reward':>6} {'success':>7} {'drift_r':>7}  reason"
    )
    for group in sorted(groups, key=lambda g: g.group_index):
        print(_group_line(group))
        for sample in group.samples:
            r = sample.episode
            if r is None:
                print(f"{group.prompt_key[:22]:22} {group.group_index:>3} {sample.sample_index:>3} {'-':9}  {sample.invalid_reason or ''}")
                continue
            primitive = r.spec.primitive_type if r.spec else "-"
            print(
                f"{r.task_id[:22]:22} {r.group_index:>3} {r.sample_index:>3} {r.status:9} {primitive:22} {r.spec_source or '-':8} "
                f"{str(r.breakage_valid):>6} {r.reward:6.2f} {str(r.success):>7} {r.role_rewards.drift:7.2f}  {sample.invalid_reason or r.abort_reason or ''}"
            )
    scored = [s.episode for g in groups for s in g.samples if s.episode is not None and s.episode.status == "completed"]
    if scored:
        print(
            f"{len(scored)} completed episodes (of {sum(len(g.samples) for g in groups)}): success {statistics.fmean(r.success for r in scored):.0%}, "
            f"breakage valid {statistics.fmean(r.breakage_valid for r in scored):.0%}, "
            f"mean repair reward {statistics.fmean(r.reward for r in scored):.3f}, "
            f"mean drift reward {statistics.fmean(r.role_rewards.drift for r in scored):.3f}"
        )


async def run_episode_batch(client: Client, args: argparse.Namespace) -> int:
    model = PolicySpec(
        policy_url=args.policy_url,
        sampling=SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens),
        context_budget=args.context_budget,
    )
    tasks = tasks_of(load_corpus(), args.difficulty)
    episodes = episode_inputs(
        tasks,
        args.n,
        args.k,
        args.seed,
        args.drift_policy,
        args.repair_policy,
        model,
        args.difficulty,
        drift_reward=args.drift_reward,
        run_timeout_s=args.run_timeout,
    )
    groups = episode_groups(episodes, args.run_id, args.group_filter, args.min_valid, args.refill_budget)
    with ResultSink(Path(args.out), group_record_with_segments, GroupProgressLine) as sink:
        results = await stream_into(client, sink, groups, args, f"groups of episodes of run {args.run_id}")
    print_episode_summary(results)
    print(f"results: {args.out}")
    return 0 if all(sink.final_status.get(group_id(group)) == "completed" for group in groups) else 1


async def episodes(args: argparse.Namespace) -> int:
    """Against ``TEMPORAL_ADDRESS`` if set; otherwise a local dev server and a worker with the scripted ``self_play`` policy."""
    address = os.environ.get("TEMPORAL_ADDRESS")
    if address:
        return await run_episode_batch(await connect(server_wait_s=args.server_wait), args)
    async with embedded_cluster(["--scripted-policy", "self_play"], worker_log_path(args.out)) as client:
        return await run_episode_batch(client, args)


async def status(client: Client, args: argparse.Namespace) -> int:
    counts = await rollout_queries.stage_counts(client)
    print("running by stage: " + "  ".join(f"{stage} {n}" for stage, n in counts.items()))
    print(_groups_line(await rollout_queries.group_counts(client)))
    print(_hosts_line(*await rollout_queries.host_slots(client, args.task_queue)))
    rollouts = await rollout_queries.running_rollouts(client)
    now = datetime.now(UTC)
    print(f"\noldest {min(args.oldest, len(rollouts))} of {len(rollouts)} running:")
    for r in rollouts[: args.oldest]:
        print(_running_line(r, now))
    stuck = rollout_queries.stale(rollouts, args.stale_minutes, now)
    print(f"\nno model turn for > {args.stale_minutes:g} min: {len(stuck)}")
    for r in stuck:
        print(_running_line(r, now))
    return 0


def _groups_line(g: rollout_queries.GroupCounts) -> str:
    closed = "  ".join(f"{status} {n}" for status, n in g.closed.items())
    return (
        f"groups: running {g.running} (samples done {g.done}, valid {g.valid}, refilled {g.refilled}; {g.answered} answered)"
        f"  closed: {closed}  without a result {g.no_result}"
    )


def _hosts_line(hosts: list[rollout_queries.HostSlots], booting: int) -> str:
    """``hosts: <queue> <in use>/<slots> slots, ...; <n> booting``; a queue no worker polls shows ``?`` slots and says so."""
    shown = [
        f"{h.host_queue} {h.in_use}/{h.agent_slots if h.agent_slots is not None else '?'} slots" + ("" if h.pollers else " (not polling)")
        for h in hosts
    ]
    return f"hosts: {', '.join(shown) or 'none'}; {booting} booting (host not yet recorded)"


def _running_line(r: rollout_queries.RunningRollout, now: datetime) -> str:
    age = (now - r.started).total_seconds() / 60
    p = r.progress
    idle = r.idle_minutes(now)
    detail = f"attempt {p.attempt} turns {p.turns} host {p.host_queue or '-'}" if p else "(no progress answer)"
    idle_text = f"{idle:.1f}m" if idle is not None else "-"
    return f"  {r.workflow_id:50} {r.stage:8} age {age:6.1f}m  idle {idle_text:>6}  {detail}"


async def show(client: Client, args: argparse.Namespace) -> int:
    state, detail, log_lines = await rollout_queries.rollout_details(client, args.workflow_id)
    print(f"{args.workflow_id}: {state}")
    record = detail.model_dump(mode="json")
    if isinstance(detail, RolloutResult):
        move_out_logs(record, Path(args.save_logs) if args.save_logs else None)
    print(json.dumps(record, indent=2))
    print(f"--- last {len(log_lines)} lines of the agent's stream-json log ---")
    print("\n".join(log_lines))
    if isinstance(detail, RolloutResult):
        print("\n".join(grading_summary.summary_lines(RolloutResult.model_validate(record) if args.save_logs else detail)))
    return 0


async def regrade(client: Client, args: argparse.Namespace) -> int:
    """Re-grade run ``--run-id``'s kept patches (``trainer_client.regrade_runs``); exit 1 for an unknown run or a
    re-grade that did not grade."""
    current = None
    try:
        if args.dataset:
            rows, _ = read_rows(Path(args.dataset), args.dataset_root)
            current = {row.task.instance_id: row.task for row in rows}
        summary = await regrade_runs.regrade_run(
            client, args.run_id, args.regrade_id, Path(args.out), args.task_queue, current, args.concurrency, args.server_wait
        )
    except (regrade_runs.UnknownRun, ValueError, OSError, RPCError) as error:
        print(f"starter: {error}", file=sys.stderr)
        return 1
    print(
        f"re-graded {len(summary.rows)} (regrade id {args.regrade_id}), {summary.changed} verdicts changed, {summary.not_graded} not graded;"
        f" {len(summary.skipped)} skipped; {summary.already_there} already in the file"
    )
    print(f"results: {args.out}")
    return 0 if summary.not_graded == 0 else 1


async def cancel(client: Client, args: argparse.Namespace) -> int:
    await rollout_queries.request_abort(client, args.workflow_id, args.reason)
    print(f"asked {args.workflow_id} to stop ({args.reason}); its result will be aborted: {args.reason}")
    return 0


def run_id_arg(value: str) -> str:
    """A run id names workflows: printable, valid Unicode, at most ``MAX_RUN_ID_BYTES`` of UTF-8."""
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("not valid Unicode") from None
    if not value or size > MAX_RUN_ID_BYTES or not value.isprintable():
        raise argparse.ArgumentTypeError(f"must be 1 to {MAX_RUN_ID_BYTES} bytes of printable text (it is part of every workflow id)")
    return value


def share_arg(value: str) -> float:
    """A share flag's type: a number from 0 to 1."""
    try:
        share = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"{share} is not between 0 and 1")
    return share


def count_arg(least: int) -> Callable[[str], int]:
    """An integer flag's type: at least ``least``."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
        if number < least:
            raise argparse.ArgumentTypeError(f"{number} is less than {least}")
        return number

    return parse


def add_run_options(sub: argparse.ArgumentParser, name: str) -> None:
    sub.add_argument(
        "--run-id", type=run_id_arg, default=time.strftime("%Y%m%d-%H%M%S"), help="names the workflows; reuse it to re-attach and complete --out"
    )
    sub.add_argument("--concurrency", type=count_arg(1), default=8, help="samples in flight (default 8)")
    sub.add_argument("--out", help=f"results JSONL, appended to (never truncated); default results/{name}-<run id>.jsonl, one file per run")
    sub.add_argument("--task-queue", default=task_queue_from_env(), help="the queue the workers poll (default: ROLLOUT_TASK_QUEUE or rl-rollouts)")
    sub.add_argument(
        "--server-wait",
        type=float,
        default=server_wait_from_env(),
        help="seconds to wait out one Temporal outage before a rollout is failed: server_unavailable (default: ROLLOUT_SERVER_WAIT_S or 300)",
    )


def add_group_options(sub: argparse.ArgumentParser) -> None:
    """The rules every group of the run gets (K is ``--n-samples-per-prompt``, or ``--k`` for episodes)."""
    sub.add_argument(
        "--group-filter",
        type=GroupFilter,
        choices=list(GroupFilter),
        default=GroupFilter.KEEP_ALL,
        help="which finished groups are kept (the line says kept / dropped_by): keep_all (default), min_valid, nonzero_variance",
    )
    sub.add_argument("--min-valid", type=count_arg(0), help="valid samples a group needs, else it ends insufficient (default: K)")
    sub.add_argument("--refill-budget", type=count_arg(0), help="fresh samples a group may start to replace infrastructure failures (default: K)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    status_cmd = commands.add_parser("status", help="counts by stage, oldest running, stale agents")
    status_cmd.add_argument("--stale-minutes", type=float, default=10.0)
    status_cmd.add_argument("--oldest", type=int, default=10)
    status_cmd.add_argument(
        "--task-queue", default=task_queue_from_env(), help="the shared queue whose workers are listed (default: ROLLOUT_TASK_QUEUE)"
    )
    show_cmd = commands.add_parser("show", help="one rollout's progress and agent log tail")
    show_cmd.add_argument("workflow_id")
    show_cmd.add_argument("--save-logs", metavar="DIR", help="write a finished rollout's whole agent and grading logs into DIR")
    cancel_cmd = commands.add_parser("cancel", help="stop one rollout gracefully")
    cancel_cmd.add_argument("workflow_id")
    cancel_cmd.add_argument("--reason", default="cancelled")
    for name in ("run", "demo"):
        sub = commands.add_parser(name)
        if name == "run":
            sub.add_argument("dataset", help="a JSONL dataset, or a directory of Harbor tasks (one task, or one per subdirectory)")
        else:
            sub.add_argument("--dataset", help="a JSONL dataset or a directory of Harbor tasks (default: the bundled example tasks)")
            sub.add_argument("--policy", default="oracle", help="scripted policy: oracle (reward 1), noop (reward 0), ...")
            sub.add_argument("--keep-ui", action="store_true", help="keep the dev server (and its UI) up afterwards")
        add_run_options(sub, name)
        sub.add_argument(
            "--dataset-root",
            help="folder that rows' script paths resolve in; nothing outside it is read (default: ROLLOUT_DATASET_ROOT; with neither, rows naming script paths are refused)",
        )
        sub.add_argument("--n-samples-per-prompt", type=count_arg(1), default=1, help="K, the samples of one group (default 1)")
        add_group_options(sub)
        sub.add_argument(
            "--impossible-share",
            type=share_arg,
            help="share of rows that also run as an impossible-task probe, never trained on (default: ROLLOUT_IMPOSSIBLE_SHARE or 0)",
        )
        sub.add_argument("--policy-url", help="SGLang URL (default: the worker's)")
        sub.add_argument("--temperature", type=float, default=1.0)
        sub.add_argument(
            "--pin-sampling",
            action="append",
            default=[],
            choices=list(get_args(PinnableSamplingKey)),
            metavar="KEY",
            help="a sampling key Claude Code may not change (temperature, top_p, top_k, stop_sequences); repeat for more",
        )
        sub.add_argument("--max-new-tokens", type=int, default=8192)
        sub.add_argument("--context-budget", type=int, default=65536)
        sub.add_argument(
            "--max-staleness",
            type=int,
            help="versions a sampled token may lie behind the policy server's at merge time (default: ROLLOUT_MAX_STALENESS; unset: no bound)",
        )
        sub.add_argument(
            "--staleness-policy",
            choices=["mask", "drop"],
            help="what a stale sample gets: mask its stale turns (loss_mask 0) or drop it (aborted: stale_policy); default ROLLOUT_STALENESS_POLICY or mask",
        )
    regrade_cmd = commands.add_parser("regrade", help="grade a finished run's kept patches again, in fresh sandboxes, with the current graders")
    regrade_cmd.add_argument("--run-id", type=run_id_arg, required=True, help="the run whose rollouts are re-graded")
    regrade_cmd.add_argument(
        "--regrade-id",
        type=run_id_arg,
        default=time.strftime("%Y%m%d-%H%M%S"),
        help="names the re-grade workflows; reuse it to attach to a re-grade and complete --out (default: a new one, so it grades again)",
    )
    regrade_cmd.add_argument("--out", help="results JSONL, appended to; default results/regrade-<run id>-<regrade id>.jsonl")
    regrade_cmd.add_argument("--dataset", help="take each task's current grader spec from this dataset's row of the same instance id")
    regrade_cmd.add_argument("--dataset-root", help="folder the --dataset rows' script paths resolve in (default: ROLLOUT_DATASET_ROOT)")
    regrade_cmd.add_argument("--concurrency", type=count_arg(1), default=8, help="re-grades in flight (default 8)")
    regrade_cmd.add_argument("--task-queue", default=task_queue_from_env(), help="the queue the workers poll (default: ROLLOUT_TASK_QUEUE)")
    regrade_cmd.add_argument("--server-wait", type=float, default=server_wait_from_env(), help="seconds to wait out one Temporal outage")
    episodes_cmd = commands.add_parser("episodes", help="drift -> repair self-play episodes over the drift corpus")
    episodes_cmd.add_argument("--n", type=int, default=32, help="number of episodes")
    episodes_cmd.add_argument("--k", type=count_arg(1), default=1, help="episodes per task (one GRPO group)")
    episodes_cmd.add_argument("--difficulty", choices=["easy", "medium", "hard"], help="default: any")
    episodes_cmd.add_argument("--seed", type=int, default=0, help="task order and drift seeds")
    episodes_cmd.add_argument("--drift-policy", choices=["model", "baseline", "noop"], default="model")
    episodes_cmd.add_argument("--repair-policy", choices=["model", "oracle", "noop"], default="model")
    episodes_cmd.add_argument("--drift-reward", default="breaks_and_survives", help="breaks_and_survives | breaks | adversarial")
    episodes_cmd.add_argument("--run-timeout", type=float, default=5.0, help="seconds per script run")
    add_run_options(episodes_cmd, "episodes")
    add_group_options(episodes_cmd)
    episodes_cmd.add_argument("--policy-url", help="SGLang URL (default: the worker's)")
    episodes_cmd.add_argument("--temperature", type=float, default=1.0)
    episodes_cmd.add_argument("--max-new-tokens", type=int, default=4096)
    episodes_cmd.add_argument("--context-budget", type=int, default=16384)
    args = parser.parse_args(argv)
    group_size = {"run": "n_samples_per_prompt", "demo": "n_samples_per_prompt", "episodes": "k"}.get(args.command)
    if group_size and args.min_valid is not None and args.min_valid > getattr(args, group_size):
        flag = "--" + group_size.replace("_", "-")
        parser.error(f"--min-valid {args.min_valid}: more than the group's {flag} {getattr(args, group_size)}")
    if args.command == "regrade" and args.out is None:
        args.out = str(PROJECT_ROOT / "results" / f"regrade-{re.sub(r'[^A-Za-z0-9._-]', '_', f'{args.run_id}-{args.regrade_id}')}.jsonl")
    if getattr(args, "out", "") is None:
        args.out = str(PROJECT_ROOT / "results" / f"{args.command}-{re.sub(r'[^A-Za-z0-9._-]', '_', args.run_id)}.jsonl")
    return args


async def main_async(args: argparse.Namespace) -> int:
    current = asyncio.current_task()
    assert current is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, current.cancel)
    if args.command == "demo":
        return await demo(args)
    if args.command == "episodes":
        return await episodes(args)
    client = await connect(server_wait_s=args.server_wait if args.command == "run" else 0.0)
    operator_commands = {"status": status, "show": show, "cancel": cancel, "regrade": regrade}
    if args.command in operator_commands:
        return await operator_commands[args.command](client, args)
    return await run_dataset(client, args)


def main() -> None:
    try:
        args = parse_args()
    except ValueError as error:
        print(f"starter: {error}", file=sys.stderr)
        sys.exit(2)
    try:
        code = asyncio.run(main_async(args))
    except (SettingsError, PayloadStoreUnusable, ConnectionSettingsError, TemporalUnreachable) as error:
        print(f"starter: {error}", file=sys.stderr)
        sys.exit(1)
    except (KeyboardInterrupt, asyncio.CancelledError):
        # SIGINT or SIGTERM: the main task was cancelled and every context it opened (the embedded dev server and
        # worker included) has closed; a re-run with the same --run-id attaches to what kept running on a server.
        print("starter: stopped", file=sys.stderr, flush=True)
        os._exit(130)
    # Every resource is closed by now. Skip interpreter finalization: the Temporal
    # client's Rust threads can abort it (temporalio/sdk-python#300), which would
    # turn a finished command into exit -6.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
