"""The trainer's side: start rollouts, follow them, write results (docs/running.md, docs/operations.md).

CLI::

    python starter.py run DATASET.jsonl|HARBOR_TASKS_DIR [--n-samples-per-prompt K] [--concurrency C] [--out F]
    python starter.py demo [--policy oracle|noop|smollm2] [--keep-ui]  # its own dev server and worker; smollm2: vLLM
    python starter.py status [--stale-minutes 10] [--oldest 10]        # what is running, what is stuck, hosts, slots
    python starter.py show WORKFLOW_ID [--html FILE] [--save-logs DIR]  # progress and agent log, or the rollout's page
    python starter.py report --run-id R --html DIR                     # a run's groups as an index, a page per rollout
    python starter.py cancel WORKFLOW_ID [--reason R]                  # graceful: sandbox destroyed, result aborted
    python starter.py episodes --n 32 --difficulty easy [--k K]        # drift -> repair self-play episodes
    python starter.py regrade --run-id R [--out F] [--dataset ROWS]    # grade run R's kept patches again

Key invariant: a results file is only appended to, one line per finished group, and a re-run with the same
``--run-id`` starts or attaches to only the groups missing from it. Bad rows are reported by line and field and
never stop the others. This script parses arguments and prints; what it runs is ``durable_rollouts.trainer_client``.
``show`` and ``report`` with no server configured or running read the demo's stored state.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shlex
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

from temporalio.client import Client
from temporalio.service import RPCError

from durable_rollouts.config.arg_types import count_arg, existing_path_arg, number_arg, share_arg
from durable_rollouts.config.settings import (
    SettingsError,
    budgets_from_env,
    impossible_share_from_env,
    prefetch_from_env,
    staleness_from_env,
)
from durable_rollouts.contracts.rollout_group import GroupFilter
from durable_rollouts.contracts.rollouts import RolloutProgress, RolloutResult
from durable_rollouts.contracts.session import (
    MIN_CONTEXT_BUDGET,
    PinnableSamplingKey,
    PolicyEngine,
    PolicySpec,
    SamplingParams,
    StalenessBound,
)
from durable_rollouts.drift_repair.corpus import load_corpus, tasks_of
from durable_rollouts.grading import grading_summary
from durable_rollouts.paths import EXAMPLE_DATASET, PROJECT_ROOT
from durable_rollouts.policy.tokenizer_cache import DEFAULT_TOKENIZER_DIR
from durable_rollouts.process_exit import leave
from durable_rollouts.slime_samples.options import sample_options
from durable_rollouts.slime_samples.registry import contract_in_force
from durable_rollouts.trainer_client import regrade_runs, rollout_pages, rollout_queries
from durable_rollouts.trainer_client.batch_runs import (
    GroupOptions,
    Placement,
    dataset_groups,
    invalid_row_record,
    read_rows,
    run_groups,
)
from durable_rollouts.trainer_client.drift_episodes import episode_groups, episode_inputs
from durable_rollouts.trainer_client.local_services import (
    LocalServiceFailed,
    embedded_cluster,
    stored_demo_server,
    worker_log_path,
)
from durable_rollouts.trainer_client.payload_storage import PayloadStoreUnusable
from durable_rollouts.trainer_client.results_file import file_stem, group_record_with_segments, move_out_logs
from durable_rollouts.trainer_client.rollout_runs import connect, task_queue_from_env
from durable_rollouts.trainer_client.run_summary import (
    agent_run_notes,
    episode_summary_lines,
    groups_line,
    hosts_line,
    running_line,
    summary_lines,
)
from durable_rollouts.trainer_client.temporal_connection import ConnectionSettingsError, TemporalUnreachable
from durable_rollouts.trainer_client.workflow_runs import server_wait_from_env
from durable_rollouts.trajectory_view.rollout_page import PageSettings
from durable_rollouts.trajectory_view.token_text import TokenTexts
from durable_rollouts.vllm_engine.local_engine import MAX_MODEL_LEN, SMOLLM2, EngineFailedToStart, LocalEngine

MAX_RUN_ID_BYTES = 128


def group_options(args: argparse.Namespace) -> GroupOptions:
    return GroupOptions(
        run_id=args.run_id,
        samples=args.n_samples_per_prompt,
        refill_budget=args.refill_budget,
        min_valid=args.min_valid,
        filter=args.group_filter,
    )


def placement(args: argparse.Namespace) -> Placement:
    return Placement(
        task_queue=args.task_queue,
        concurrency=args.concurrency,
        server_wait_s=args.server_wait,
        prefetch=prefetch_from_env(),
    )


def staleness_bound(args: argparse.Namespace) -> StalenessBound | None:
    """The run's staleness bound: ``--max-staleness`` / ``--staleness-policy``, each falling back to its environment
    variable."""
    env = staleness_from_env()
    bound = args.max_staleness if args.max_staleness is not None else env.max_staleness if env else None
    if bound is None:
        return None
    return StalenessBound(max_staleness=bound, policy=args.staleness_policy or (env.policy if env else "mask"))


async def run_dataset(client: Client, args: argparse.Namespace) -> int:
    """Run the dataset's groups missing from ``args.out`` (``durable_rollouts.trainer_client.batch_runs``).

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
    if not rows and not errors:
        print(f"starter: {args.dataset}: no rows", file=sys.stderr)
    policy = PolicySpec(
        policy_url=args.policy_url,
        engine=args.policy_engine,
        sampling=SamplingParams(
            temperature=args.temperature, max_new_tokens=args.max_new_tokens, pinned=args.pin_sampling
        ),
        context_budget=args.context_budget,
        staleness=staleness_bound(args),
    )
    share = impossible_share_from_env() if args.impossible_share is None else args.impossible_share
    groups, lines = dataset_groups(rows, policy, budgets_from_env(), group_options(args), share, args.dataset)
    run = await run_groups(
        client,
        groups,
        Path(args.out),
        placement(args),
        f"groups of run {args.run_id}",
        lambda result: {**group_record_with_segments(result), "line": lines[result.workflow_id]},
        before=[invalid_row_record(error) for error in errors],
    )
    print("\n".join(summary_lines(run.results)))
    print(f"results: {args.out}")
    pages = PROJECT_ROOT / "results" / f"pages-{file_stem(args.run_id)}"
    print(f"pages: python starter.py report --run-id {shlex.quote(args.run_id)} --html {shlex.quote(str(pages))}")
    return 0 if rows and not errors and run.complete else 1


# ``demo --policy smollm2``: the real model instead of the scripted policy, its replies capped for a CPU's decode.
REAL_MODEL = "smollm2"
REAL_MODEL_REPLY_TOKENS = 256


async def demo(args: argparse.Namespace) -> int:
    args.dataset = args.dataset or str(EXAMPLE_DATASET)
    if args.policy == REAL_MODEL:
        return await real_model_demo(args)
    worker_args = ["--scripted-policy", args.policy, "--oracle-tasks", args.dataset]
    return await demo_with_worker(args, worker_args, {})


async def real_model_demo(args: argparse.Namespace) -> int:
    """The demo with SmolLM2-135M-Instruct on a local vLLM engine (``make setup`` builds both) instead of the
    scripted policy: real sampling, real log-probs, rewards 0 (a 135M model is no agent)."""
    engine = LocalEngine(log_path=Path(args.out).with_name(f"{Path(args.out).stem}.vllm.log"))
    print(f"vLLM: starting SmolLM2-135M-Instruct on {engine.url} (25-50 s; log {engine.log_path})", flush=True)
    try:
        url = await engine.start()
    except EngineFailedToStart as error:
        print(f"starter: {error}", file=sys.stderr)
        return 1
    # The model's window bounds every turn; replies short enough that a CPU decodes them in seconds.
    args.context_budget = min(args.context_budget, MAX_MODEL_LEN)
    args.max_new_tokens = min(args.max_new_tokens, REAL_MODEL_REPLY_TOKENS)
    env = {"ROLLOUT_POLICY_URL": url, "ROLLOUT_POLICY_ENGINE": "vllm", "ROLLOUT_TOKENIZER_DIR": str(SMOLLM2)}
    try:
        return await demo_with_worker(args, [], env)
    finally:
        await engine.stop()


async def demo_with_worker(args: argparse.Namespace, worker_args: list[str], env: dict[str, str]) -> int:
    if args.dataset_root:
        worker_args = [*worker_args, "--dataset-root", args.dataset_root]
    async with embedded_cluster(
        worker_args, worker_log_path(Path(args.out)), os.environ.get("TEMPORAL_ADDRESS"), env
    ) as client:
        code = await run_dataset(client, args)
        if args.keep_ui:
            print(
                "--keep-ui: the dev server and worker keep running; press Ctrl-C (or send SIGTERM) to stop them.",
                flush=True,
            )
            await asyncio.Event().wait()
    return code


async def run_episode_batch(client: Client, args: argparse.Namespace) -> int:
    """Run the drift → repair groups missing from ``args.out``, the same way as ``run_dataset`` runs rows."""
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
    run = await run_groups(client, groups, Path(args.out), placement(args), f"groups of episodes of run {args.run_id}")
    print("\n".join(episode_summary_lines(run.results)))
    print(f"results: {args.out}")
    return 0 if run.complete else 1


async def episodes(args: argparse.Namespace) -> int:
    """Against ``TEMPORAL_ADDRESS`` if set; otherwise a local dev server and a worker with the scripted ``self_play``
    policy."""
    address = os.environ.get("TEMPORAL_ADDRESS")
    if address:
        return await run_episode_batch(await connect(server_wait_s=args.server_wait), args)
    async with embedded_cluster(["--scripted-policy", "self_play"], worker_log_path(Path(args.out))) as client:
        return await run_episode_batch(client, args)


async def status(client: Client, args: argparse.Namespace) -> int:
    counts = await rollout_queries.stage_counts(client)
    print("running by stage: " + "  ".join(f"{stage} {n}" for stage, n in counts.items()))
    print(groups_line(await rollout_queries.group_counts(client)))
    print(hosts_line(*await rollout_queries.host_slots(client, args.task_queue)))
    rollouts = await rollout_queries.running_rollouts(client)
    now = datetime.now(UTC)
    print(f"\noldest {min(args.oldest, len(rollouts))} of {len(rollouts)} running:")
    for r in rollouts[: args.oldest]:
        print(running_line(r, now))
    stuck = rollout_queries.stale(rollouts, args.stale_minutes, now)
    print(f"\nno model turn for > {args.stale_minutes:g} min: {len(stuck)}")
    for r in stuck:
        print(running_line(r, now))
    return 0


async def show(client: Client, args: argparse.Namespace) -> int:
    try:
        state, detail, log_lines = await rollout_queries.rollout_details(client, args.workflow_id)
    except RPCError as error:
        print(f"starter: {args.workflow_id}: {error}", file=sys.stderr)
        return 1
    print(f"{args.workflow_id}: {state}")
    if isinstance(detail, RolloutProgress) and detail.image_pull is not None:
        print(f"pulling {detail.image_pull.image}: {detail.image_pull.summary()}")
    record = detail.model_dump(mode="json")
    if isinstance(detail, RolloutResult):
        move_out_logs(record, Path(args.save_logs) if args.save_logs else None)
    print(json.dumps(record, indent=2))
    print(f"--- last {len(log_lines)} lines of the agent's stream-json log ---")
    print("\n".join(log_lines))
    if isinstance(detail, RolloutResult):
        for note in agent_run_notes(detail):
            print(f"AGENT: {note}")
        print(
            "\n".join(grading_summary.summary_lines(RolloutResult.model_validate(record) if args.save_logs else detail))
        )
    return 0


def page_settings(args: argparse.Namespace) -> PageSettings:
    """How pages read tokens (``--tokenizer``) and make samples (the contract in force, ``--max-sample-tokens``);
    a tokenizer that cannot be read is a ``SettingsError`` naming the flag."""
    try:
        texts = TokenTexts.from_dir(args.tokenizer)
    except (FileNotFoundError, ImportError) as error:
        raise SettingsError(f"--tokenizer: {error}") from None
    return PageSettings(
        texts, contract_in_force(), sample_options(argparse.Namespace(rollout_max_context_len=args.max_sample_tokens))
    )


async def show_html(client: Client, args: argparse.Namespace) -> int:
    settings = page_settings(args)
    try:
        view = await rollout_pages.write_rollout_page(client, args.workflow_id, Path(args.html), settings)
    except RPCError as error:
        print(f"starter: {args.workflow_id}: {error}", file=sys.stderr)
        return 1
    print(f"{args.workflow_id}: {view.state}; page {args.html} ({Path(args.html).stat().st_size:,} bytes)")
    return 0


async def report(client: Client, args: argparse.Namespace) -> int:
    try:
        files = await rollout_pages.write_run_report(client, args.run_id, Path(args.html), page_settings(args))
    except ValueError as error:
        print(f"starter: {error}", file=sys.stderr)
        return 1
    for workflow_id, why in files.unreadable:
        print(f"not written: {workflow_id}: {why}", file=sys.stderr)
    if not files.pages and not files.unreadable:
        print(f"starter: no rollouts of run {args.run_id!r} on this Temporal server", file=sys.stderr)
        return 1
    running = f"; {files.running_groups} groups still running (not in the index)" if files.running_groups else ""
    print(f"run {args.run_id}: {files.index} and {len(files.pages)} rollout pages{running}")
    return 0 if not files.unreadable else 1


async def regrade(client: Client, args: argparse.Namespace) -> int:
    """Re-grade run ``--run-id``'s kept patches (``durable_rollouts.trainer_client.regrade_runs``); exit 1 for an
    unknown run or a re-grade that did not grade."""
    current = None
    try:
        if args.dataset:
            rows, _ = read_rows(Path(args.dataset), args.dataset_root)
            current = {row.task.instance_id: row.task for row in rows}
        summary = await regrade_runs.regrade_run(
            client,
            args.run_id,
            args.regrade_id,
            Path(args.out),
            args.task_queue,
            current,
            args.concurrency,
            args.server_wait,
        )
    except (regrade_runs.UnknownRun, ValueError, OSError, RPCError) as error:
        print(f"starter: {error}", file=sys.stderr)
        return 1
    print(
        f"re-graded {len(summary.rows)} (regrade id {args.regrade_id}), {summary.changed} verdicts changed, "
        f"{summary.not_graded} not graded;"
        f" {len(summary.skipped)} skipped; {summary.already_there} already in the file"
    )
    print(f"results: {args.out}")
    return 0 if summary.not_graded == 0 else 1


async def cancel(client: Client, args: argparse.Namespace) -> int:
    try:
        await rollout_queries.request_abort(client, args.workflow_id, args.reason)
    except RPCError as error:
        print(f"starter: {args.workflow_id}: {error}", file=sys.stderr)
        return 1
    print(f"asked {args.workflow_id} to stop ({args.reason}); its result will be aborted: {args.reason}")
    return 0


def run_id_arg(value: str) -> str:
    """A run id names workflows: printable, valid Unicode, at most ``MAX_RUN_ID_BYTES`` of UTF-8."""
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError("not valid Unicode") from None
    if not value or size > MAX_RUN_ID_BYTES or not value.isprintable():
        raise argparse.ArgumentTypeError(
            f"must be 1 to {MAX_RUN_ID_BYTES} bytes of printable text (it is part of every workflow id)"
        )
    return value


def add_run_options(sub: argparse.ArgumentParser, name: str) -> None:
    sub.add_argument(
        "--run-id",
        type=run_id_arg,
        default=time.strftime("%Y%m%d-%H%M%S"),
        help="names the workflows; reuse it to re-attach and complete --out",
    )
    sub.add_argument("--concurrency", type=count_arg(1), default=8, help="samples in flight (default 8)")
    sub.add_argument(
        "--out",
        help=f"results JSONL, appended to (never truncated); default results/{name}-<run id>.jsonl, one file per run",
    )
    sub.add_argument(
        "--task-queue",
        default=task_queue_from_env(),
        help="the queue the workers poll (default: ROLLOUT_TASK_QUEUE or rl-rollouts)",
    )
    sub.add_argument(
        "--server-wait",
        type=number_arg(0),
        default=server_wait_from_env(),
        help="seconds to wait out one Temporal outage before a rollout is failed: server_unavailable (default: "
        "ROLLOUT_SERVER_WAIT_S or 300)",
    )


def add_group_options(sub: argparse.ArgumentParser) -> None:
    """The rules every group of the run gets (K is ``--n-samples-per-prompt``, or ``--k`` for episodes)."""
    sub.add_argument(
        "--group-filter",
        type=GroupFilter,
        choices=list(GroupFilter),
        default=GroupFilter.KEEP_ALL,
        help="which finished groups are kept (the line says kept / dropped_by): keep_all (default), min_valid, "
        "nonzero_variance",
    )
    sub.add_argument(
        "--min-valid", type=count_arg(0), help="valid samples a group needs, else it ends insufficient (default: K)"
    )
    sub.add_argument(
        "--refill-budget",
        type=count_arg(0),
        help="fresh samples a group may start to replace infrastructure failures (default: K)",
    )


def add_page_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--tokenizer",
        default=str(DEFAULT_TOKENIZER_DIR),
        help="the policy's tokenizer folder (its tokenizer.json; default: ROLLOUT_TOKENIZER_DIR)",
    )
    sub.add_argument(
        "--max-sample-tokens",
        type=count_arg(0),
        default=0,
        help="the trainer's cut of a sample (slime's rollout_max_context_len; 0: none)",
    )


def add_status_parser(commands: Any) -> None:
    sub = commands.add_parser("status", help="counts by stage, oldest running, stale agents")
    sub.add_argument("--stale-minutes", type=number_arg(0), default=10.0)
    sub.add_argument("--oldest", type=count_arg(0), default=10)
    sub.add_argument(
        "--task-queue",
        default=task_queue_from_env(),
        help="the shared queue whose workers are listed (default: ROLLOUT_TASK_QUEUE)",
    )


def add_show_parser(commands: Any) -> None:
    sub = commands.add_parser("show", help="one rollout's progress and agent log tail")
    sub.add_argument("workflow_id")
    sub.add_argument(
        "--save-logs", metavar="DIR", help="write a finished rollout's whole agent and grading logs into DIR"
    )
    sub.add_argument(
        "--html", metavar="FILE", help="write the rollout as one self-contained HTML page instead of printing it"
    )
    add_page_options(sub)


def add_report_parser(commands: Any) -> None:
    sub = commands.add_parser("report", help="a run's groups as an HTML index with plots, and every rollout's page")
    sub.add_argument("--run-id", type=run_id_arg, required=True, help="the run whose groups and rollouts are shown")
    sub.add_argument("--html", metavar="DIR", required=True, help="folder for index.html and pages/")
    add_page_options(sub)


def add_cancel_parser(commands: Any) -> None:
    sub = commands.add_parser("cancel", help="stop one rollout gracefully")
    sub.add_argument("workflow_id")
    sub.add_argument("--reason", default="cancelled")


def add_sampling_options(sub: argparse.ArgumentParser) -> None:
    """The policy a run's rollouts sample from, and how."""
    sub.add_argument("--policy-url", help="policy server URL (default: the worker's)")
    sub.add_argument(
        "--policy-engine", choices=get_args(PolicyEngine), help="its protocol, sglang or vllm (default: the worker's)"
    )
    sub.add_argument("--temperature", type=number_arg(0), default=1.0)
    sub.add_argument(
        "--pin-sampling",
        action="append",
        default=[],
        choices=list(get_args(PinnableSamplingKey)),
        metavar="KEY",
        help="a sampling key Claude Code may not change (temperature, top_p, top_k, stop_sequences); repeat for more",
    )
    sub.add_argument("--max-new-tokens", type=count_arg(1), default=8192)
    sub.add_argument("--context-budget", type=count_arg(MIN_CONTEXT_BUDGET), default=65536)
    sub.add_argument(
        "--max-staleness",
        type=count_arg(0),
        help="versions a sampled token may lie behind the policy server's at merge time (default: "
        "ROLLOUT_MAX_STALENESS; unset: no bound)",
    )
    sub.add_argument(
        "--staleness-policy",
        choices=["mask", "drop"],
        help="what a stale sample gets: mask its stale turns (loss_mask 0) or drop it (aborted: stale_policy); "
        "default ROLLOUT_STALENESS_POLICY or mask",
    )


def add_dataset_run_parser(commands: Any, name: str) -> None:
    """``run`` (a dataset given) and ``demo`` (the bundled tasks unless given, its own server and worker)."""
    sub = commands.add_parser(name)
    if name == "run":
        sub.add_argument(
            "dataset",
            type=existing_path_arg,
            help="a JSONL dataset, or a directory of Harbor tasks (one task, or one per subdirectory)",
        )
    else:
        sub.add_argument(
            "--dataset",
            type=existing_path_arg,
            help="a JSONL dataset or a directory of Harbor tasks (default: the bundled example tasks)",
        )
        sub.add_argument(
            "--policy",
            default="oracle",
            help=f"scripted policy: oracle (reward 1), noop (reward 0), ...; or {REAL_MODEL}: the real "
            f"SmolLM2-135M on a local vLLM",
        )
        sub.add_argument("--keep-ui", action="store_true", help="keep the dev server (and its UI) up afterwards")
    add_run_options(sub, name)
    sub.add_argument(
        "--dataset-root",
        help="folder that rows' script paths resolve in; nothing outside it is read (default: "
        "ROLLOUT_DATASET_ROOT; with neither, rows naming script paths are refused)",
    )
    sub.add_argument(
        "--n-samples-per-prompt", type=count_arg(1), default=1, help="K, the samples of one group (default 1)"
    )
    add_group_options(sub)
    sub.add_argument(
        "--impossible-share",
        type=share_arg,
        help="share of rows that also run as an impossible-task probe, never trained on (default: "
        "ROLLOUT_IMPOSSIBLE_SHARE or 0)",
    )
    add_sampling_options(sub)


def add_regrade_parser(commands: Any) -> None:
    sub = commands.add_parser(
        "regrade", help="grade a finished run's kept patches again, in fresh sandboxes, with the current graders"
    )
    sub.add_argument("--run-id", type=run_id_arg, required=True, help="the run whose rollouts are re-graded")
    sub.add_argument(
        "--regrade-id",
        type=run_id_arg,
        default=time.strftime("%Y%m%d-%H%M%S"),
        help="names the re-grade workflows; reuse it to attach to a re-grade and complete --out (default: a new one, "
        "so it grades again)",
    )
    sub.add_argument("--out", help="results JSONL, appended to; default results/regrade-<run id>-<regrade id>.jsonl")
    sub.add_argument(
        "--dataset",
        type=existing_path_arg,
        help="take each task's current grader spec from this dataset's row of the same instance id",
    )
    sub.add_argument(
        "--dataset-root", help="folder the --dataset rows' script paths resolve in (default: ROLLOUT_DATASET_ROOT)"
    )
    sub.add_argument("--concurrency", type=count_arg(1), default=8, help="re-grades in flight (default 8)")
    sub.add_argument(
        "--task-queue", default=task_queue_from_env(), help="the queue the workers poll (default: ROLLOUT_TASK_QUEUE)"
    )
    sub.add_argument(
        "--server-wait", type=number_arg(0), default=server_wait_from_env(), help="seconds to wait out one outage"
    )


def add_episodes_parser(commands: Any) -> None:
    sub = commands.add_parser("episodes", help="drift -> repair self-play episodes over the drift corpus")
    sub.add_argument("--n", type=count_arg(1), default=32, help="number of episodes")
    sub.add_argument("--k", type=count_arg(1), default=1, help="episodes per task (one GRPO group)")
    sub.add_argument("--difficulty", choices=["easy", "medium", "hard"], help="default: any")
    sub.add_argument("--seed", type=int, default=0, help="task order and drift seeds")
    sub.add_argument("--drift-policy", choices=["model", "baseline", "noop"], default="model")
    sub.add_argument("--repair-policy", choices=["model", "oracle", "noop"], default="model")
    sub.add_argument("--drift-reward", default="breaks_and_survives", help="breaks_and_survives | breaks | adversarial")
    sub.add_argument("--run-timeout", type=number_arg(0, above=True), default=5.0, help="seconds per script run")
    add_run_options(sub, "episodes")
    add_group_options(sub)
    sub.add_argument("--policy-url", help="SGLang URL (default: the worker's)")
    sub.add_argument("--temperature", type=number_arg(0), default=1.0)
    sub.add_argument("--max-new-tokens", type=count_arg(1), default=4096)
    sub.add_argument("--context-budget", type=count_arg(MIN_CONTEXT_BUDGET), default=16384)


def _results_file(*parts: str) -> str:
    """``results/<parts joined by ->.jsonl``, with what a file name cannot hold replaced."""
    return str(PROJECT_ROOT / "results" / f"{re.sub(r'[^A-Za-z0-9._-]', '_', '-'.join(parts))}.jsonl")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, one parser per subcommand; a group's ``--min-valid`` over its size is refused here."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    for add in (add_status_parser, add_show_parser, add_report_parser, add_cancel_parser):
        add(commands)
    add_dataset_run_parser(commands, "run")
    add_dataset_run_parser(commands, "demo")
    add_regrade_parser(commands)
    add_episodes_parser(commands)
    args = parser.parse_args(argv)
    group_size = {"run": "n_samples_per_prompt", "demo": "n_samples_per_prompt", "episodes": "k"}.get(args.command)
    if group_size and args.min_valid is not None and args.min_valid > getattr(args, group_size):
        flag = "--" + group_size.replace("_", "-")
        parser.error(f"--min-valid {args.min_valid}: more than the group's {flag} {getattr(args, group_size)}")
    if args.command == "regrade" and args.out is None:
        args.out = _results_file("regrade", f"{args.run_id}-{args.regrade_id}")
    if getattr(args, "out", "") is None:
        args.out = _results_file(args.command, args.run_id)
    return args


async def main_async(args: argparse.Namespace) -> int:
    current = asyncio.current_task()
    assert current is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, current.cancel)
    if args.command == "demo":
        return await demo(args)
    if args.command == "episodes":
        return await episodes(args)
    if args.command in ("report", "show"):  # with no server configured or running: the demo's stored state
        async with stored_demo_server() as address:
            command = report if args.command == "report" else show_html if args.html else show
            return await command(await connect(address), args)
    client = await connect(server_wait_s=args.server_wait if args.command == "run" else 0.0)
    operator_commands = {"status": status, "cancel": cancel, "regrade": regrade}
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
    except (
        SettingsError,
        PayloadStoreUnusable,
        ConnectionSettingsError,
        TemporalUnreachable,
        LocalServiceFailed,
    ) as error:
        leave(1, f"starter: {error}")
    except OSError as error:  # a file or folder it was given cannot be read or written: the message names it
        leave(1, f"starter: {error}")
    except (KeyboardInterrupt, asyncio.CancelledError):
        # SIGINT or SIGTERM: the main task was cancelled and every context it opened (the embedded dev server and
        # worker included) has closed; a re-run with the same --run-id attaches to what kept running on a server.
        leave(130, "starter: stopped")
    leave(code)


if __name__ == "__main__":
    main()
