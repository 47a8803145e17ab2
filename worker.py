"""The long-lived rollout worker: the Anthropic adapter and two Temporal workers in one process.

* the adapter serves ``SHIM_BIND_HOST:SHIM_PORT`` (default: this host's address on the sandbox network), which a host
  firewall leaves as the one host port sandboxes may reach;
* the shared-queue worker runs the workflows, ``pick_host``, ``evaluate`` and the drift → repair activities; this
  host's queue (``rl-rollouts-host-<host id>``, stable across restarts) runs boot, agent, diff, destroy and merge;
* ``--scripted-policy`` serves the scripted policy in-process (demo and tests); it or ``ROLLOUT_POLICY_URL`` pins the
  policy for every rollout, else each rollout's own ``PolicySpec`` is used (docs/settings.md has the precedence).

Key invariant: a restart with the same host id loses no turn (every turn is spooled before its reply is sent, the
restarted worker takes the sessions back and the retried agent activity re-attaches: docs/rollouts.md, "When things
crash"). Bad settings, an unusable payload store or an unreachable Temporal server stop it at start with one line
naming the setting or address. SIGINT/SIGTERM stop polling, give in-flight activities a grace period, then close.

    python worker.py [--scripted-policy oracle --oracle-tasks examples/tasks/dataset.jsonl]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

import docker
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

from activities import activity_failure_log
from activities.adapter import AdapterActivities
from activities.drift_repair import DriftEpisodeActivities
from activities.evaluate import GradingActivities
from activities.metrics import MetricsAddressError, metrics_runtime
from activities.reaper import reap_forever, sweep_logged
from activities.rollout_host import RolloutHost
from activities.sandbox import SandboxActivities
from durable_rollouts.claude_code.binary import find_claude_code
from durable_rollouts.claude_code.harness import ClaudeCodeSettings
from durable_rollouts.claude_code.tarballs import ClaudeTarballError
from durable_rollouts.config.arg_types import existing_path_arg, port_arg
from durable_rollouts.config.payload_store import PayloadStorageSettings, payload_store_from_env
from durable_rollouts.config.settings import SettingsError, WorkerSettings, settings_from_env
from durable_rollouts.contracts.host_identity import worker_identity
from durable_rollouts.docker_sandbox import firewall as sandbox_firewall
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.network import ensure_network
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.drift_repair.roles import AdapterRolePlayer
from durable_rollouts.drift_repair.script_runner import SandboxScriptRunner
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.host_metrics import HostMetrics
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.session_spool import SessionSpool
from durable_rollouts.process_exit import leave
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import POLICIES, OracleTask, ScriptedPolicyServer
from durable_rollouts.slime_samples.registry import contract_in_force
from durable_rollouts.trainer_client import temporal_connection
from durable_rollouts.trainer_client.payload_storage import PayloadStoreUnusable, check_payload_store, data_converter
from durable_rollouts.trainer_client.search_attribute_registry import ensure_search_attributes
from durable_rollouts.trainer_client.temporal_connection import (
    ConnectionSettingsError,
    TemporalUnreachable,
    target_from_env,
)
from durable_rollouts.trainer_client.workflow_runs import server_wait_from_env
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.drift_repair_episode import DriftRepairEpisode
from workflows.image_prefetch import PrefetchImages
from workflows.regrade_rollout import RegradeRollout
from workflows.rollout_group import RolloutGroup

log = logging.getLogger("worker")
GRACEFUL_SHUTDOWN = timedelta(seconds=10)
UNCLAIMED_SESSION_GRACE_S = 300.0
UNCLAIMED_SWEEP_INTERVAL_S = 15.0
OCCUPANCY_INTERVAL_S = 1.0
LOOP_LAG_INTERVAL_S = 0.25


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--temporal-address",
        help=f"host:port (default: the Temporal settings, TEMPORAL_ADDRESS or a temporal.toml profile, else "
        f"{temporal_connection.DEFAULT_ADDRESS})",
    )
    parser.add_argument("--host-id", help="this host's queue identity (default: ROLLOUT_HOST_ID or the hostname)")
    parser.add_argument("--adapter-port", type=port_arg, help="adapter port (default: SHIM_PORT or 18001; 0 = any)")
    parser.add_argument(
        "--scripted-policy", choices=POLICIES, help="serve the scripted policy in-process with this default policy"
    )
    parser.add_argument(
        "--oracle-tasks",
        type=existing_path_arg,
        help="dataset JSONL (or directory of Harbor tasks) whose reference patches the scripted oracle knows",
    )
    parser.add_argument(
        "--dataset-root",
        help="where --oracle-tasks rows' script paths resolve, as the starter's --dataset-root (default: "
        "ROLLOUT_DATASET_ROOT)",
    )
    return parser.parse_args(argv)


async def forget_unclaimed_sessions(
    adapter: AdapterServer, after_s: float, interval_s: float = UNCLAIMED_SWEEP_INTERVAL_S
) -> None:
    """Sessions no agent activity claimed within ``after_s`` belong to rollouts that moved on: finish them."""
    registry = adapter.registry
    assert registry is not None, "the adapter is started"
    while True:
        await asyncio.sleep(interval_s)
        forgotten = await registry.forget_unclaimed(older_than_s=after_s)
        if forgotten:
            log.info("released %d session(s) nobody resumed: %s", len(forgotten), ", ".join(forgotten))


async def release_sessions_of_ended_rollouts(
    adapter: AdapterServer, client: Client, session_ids: list[str]
) -> list[str]:
    """Restored sessions whose rollouts have already closed (or are unknown to the server) are finished at once: left to
    the unclaimed sweep, each restart would restart their clock. A server that does not answer leaves them to it."""
    registry = adapter.registry
    assert registry is not None, "the adapter is started"
    released = []
    for session_id in session_ids:
        session = registry.get(session_id)
        workflow_id = session.config.label.rpartition("#")[0] if session is not None else ""
        if not workflow_id:
            continue
        try:
            ended = (await client.get_workflow_handle(workflow_id).describe()).status != WorkflowExecutionStatus.RUNNING
        except RPCError as error:
            ended = error.status == RPCStatusCode.NOT_FOUND
        if ended:
            await registry.finish_session(session_id, grace_s=0)
            released.append(session_id)
    if released:
        log.info("released %d restored session(s) whose rollouts already ended: %s", len(released), ", ".join(released))
    return released


async def report_occupancy(host: RolloutHost, metrics: HostMetrics, interval_s: float = OCCUPANCY_INTERVAL_S) -> None:
    """Set the sessions and slots gauges now and every ``interval_s``."""
    while True:
        registry = host.adapter.registry
        metrics.occupancy(registry.live_count if registry is not None else 0, host.agent_slots, host.slots_in_use)
        await asyncio.sleep(interval_s)


async def report_loop_lag(metrics: HostMetrics, interval_s: float = LOOP_LAG_INTERVAL_S) -> None:
    """Record, every ``interval_s``, how much later than asked the event loop woke this task: the wait every
    adapter turn and heartbeat on this worker shares."""
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time()
        await asyncio.sleep(interval_s)
        metrics.loop_lag(max(loop.time() - asked - interval_s, 0.0))


class ActivityLists(NamedTuple):
    shared: list[Callable[..., Any]]
    pinned: list[Callable[..., Any]]


def activity_lists(
    host: RolloutHost | type[RolloutHost],
    sessions: AdapterActivities | type[AdapterActivities],
    drift: DriftEpisodeActivities | type[DriftEpisodeActivities],
    sandbox_faces: SandboxActivities | type[SandboxActivities],
    grading: GradingActivities | type[GradingActivities],
) -> ActivityLists:
    """What the shared-queue worker and this host's worker register. Given the classes instead of
    instances it returns the unbound definitions, whose names and types are the same (what tests read)."""
    return ActivityLists(
        shared=[
            host.pick_host,
            host.prefetch_image,
            grading.evaluate,
            drift.sample_drift_task,
            drift.propose_drift,
            drift.run_breakage,
            drift.propose_repair,
            drift.grade_repair,
            drift.collect_role_segments,
        ],
        pinned=[
            host.boot_sandbox,
            host.run_claude_code,
            sandbox_faces.capture_diff,
            sandbox_faces.destroy_sandbox,
            sessions.merge_segments,
            sessions.discard_session,
            grading.evaluate,
        ],
    )


@dataclass
class BuiltWorker:
    """A worker assembled and connected, not yet polling: what ``serve_worker`` polls with and closes."""

    settings: WorkerSettings
    client: Client
    adapter: AdapterServer
    host: RolloutHost
    sandboxes: DockerSandboxes
    metrics: HostMetrics
    shared: Worker
    pinned: Worker
    firewalled: bool
    scripted: ScriptedPolicyServer | None

    async def close(self) -> None:
        """Close what the build opened (spooled sessions stay for the next start)."""
        if self.firewalled:
            await asyncio.to_thread(sandbox_firewall.revoke_port, self.adapter.port)
        await self.adapter.stop()
        if self.scripted is not None:
            await self.scripted.stop()


async def build_worker(
    settings: WorkerSettings,
    scripted_policy: str | None = None,
    oracle_tasks: Sequence[OracleTask] = (),
    payload_store: PayloadStorageSettings | None = None,
    server_wait_s: float | None = None,
) -> BuiltWorker:
    """Assemble the worker: the payload store checked, the adapter serving (its spooled sessions taken back), the
    Temporal client connected and both Temporal workers made. Large payloads go to ``payload_store`` (default: the
    environment's); ``server_wait_s``: how long an unreachable Temporal server is waited for (default:
    ``ROLLOUT_SERVER_WAIT_S``)."""
    payload_store = payload_store or payload_store_from_env()
    await check_payload_store(payload_store)
    runtime = metrics_runtime(settings.metrics_address)
    host_metrics = HostMetrics(runtime.metric_meter)
    activity_failure_log.install()
    # asyncio's default of cpu_count + 4 threads serialised the blocking Docker calls of concurrent boots.
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=settings.agent_slots * 4 + 8, thread_name_prefix="blocking-io")
    )
    claude_code = await asyncio.to_thread(find_claude_code, settings.cc_tarball, settings.node_tarball)
    renderer = await asyncio.to_thread(PromptRenderer.from_folder, settings.tokenizer_dir)
    scripted: ScriptedPolicyServer | None = None
    policy_url, policy_engine = settings.policy_url, settings.policy_engine
    if scripted_policy:
        scripted = ScriptedPolicyServer(renderer, default_policy=scripted_policy, oracle_tasks=oracle_tasks)
        # The scripted policy speaks SGLang's /generate, whatever ROLLOUT_POLICY_ENGINE says.
        policy_url, policy_engine = await scripted.start("127.0.0.1", 0), "sglang"
    host_queue = settings.host_queue
    docker_client = await asyncio.to_thread(docker.from_env)
    network = await asyncio.to_thread(ensure_network, docker_client)
    adapter = AdapterServer(
        renderer,
        spool=SessionSpool(settings.results_dir / "spool" / host_queue),
        finish_grace_s=settings.finish_grace_s,
        metrics=host_metrics,
    )
    await adapter.start(settings.adapter_bind_host or network.gateway, settings.adapter_port)
    registry = adapter.registry
    assert registry is not None
    restored = registry.restore_spooled()
    if restored:
        log.info("took back %d spooled session(s): %s", len(restored), ", ".join(restored))
    if aborted := await registry.abort_orphaned_requests():
        log.info("aborted upstream %d request(s) the previous process left in flight", aborted)
    public_url = f"http://{settings.public_host or network.gateway}:{adapter.port}"
    firewalled = await asyncio.to_thread(sandbox_firewall.protect, network.bridge, adapter.port)
    target = target_from_env(address=settings.temporal_address)
    client = await temporal_connection.connect(
        target,
        server_wait_from_env() if server_wait_s is None else server_wait_s,
        data_converter=data_converter(payload_store),
        runtime=runtime,
        identity=worker_identity(os.getpid(), socket.gethostname(), host_queue, settings.agent_slots),
    )
    log.info("connected to Temporal at %s, namespace %s (%s)", target.address, target.namespace, target.secured)
    await release_sessions_of_ended_rollouts(adapter, client, restored)
    sandboxes = DockerSandboxes(
        SandboxSettings(
            claude_code=claude_code,
            network=network.name,
            grading_offline=settings.grading_offline,
            offline_tools=settings.offline_tools,
            host_queue=host_queue,
            limits=settings.sandbox_limits,
            lifetime_s=settings.budgets.guard_s + 600,
            images=settings.images,
        ),
        client=docker_client,
        meter=runtime.metric_meter,
    )
    host = RolloutHost(
        sandboxes=sandboxes,
        adapter=adapter,
        host_queue=host_queue,
        adapter_public_url=public_url,
        default_policy_url=policy_url,
        agent_slots=settings.agent_slots,
        claude=ClaudeCodeSettings(extra_args=settings.claude_extra_args, extra_env=settings.claude_extra_env),
        client=client,
        pin_policy_url=policy_url is not None,
        parsers=settings.parser_defaults,
        image_affinity=settings.image_affinity,
        policy_engine=policy_engine,
    )
    await asyncio.to_thread(sandboxes.image_cache.refresh)
    drift = DriftEpisodeActivities(
        roles=AdapterRolePlayer(registry, policy_url, policy_url is not None, settings.parser_defaults, policy_engine),
        runner=SandboxScriptRunner(sandboxes),
    )
    registered = await ensure_search_attributes(client, client.namespace)
    if registered:
        log.info("registered search attributes: %s", ", ".join(registered))
    activities = activity_lists(
        host, AdapterActivities(adapter), drift, SandboxActivities(sandboxes), GradingActivities(sandboxes)
    )
    shared = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[CodingAgentRollout, DriftRepairEpisode, RolloutGroup, RegradeRollout, PrefetchImages],
        activities=activities.shared,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=3),
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
    )
    pinned = Worker(
        client,
        task_queue=host_queue,
        activities=activities.pinned,
        max_concurrent_activities=settings.agent_slots * 2 + 8,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
    )
    log.info(
        "worker up: shared=%s host=%s adapter=%s (sandboxes dial %s, firewall %s) policy=%s metrics=%s",
        settings.task_queue,
        host_queue,
        adapter.url,
        public_url,
        "on" if firewalled else "off",
        policy_url,
        f"http://{settings.metrics_address}/metrics" if settings.metrics_address else "off",
    )
    print(f"worker ready host_queue={host_queue} adapter={public_url} policy={policy_url}", flush=True)
    return BuiltWorker(settings, client, adapter, host, sandboxes, host_metrics, shared, pinned, firewalled, scripted)


async def serve_worker(built: BuiltWorker, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
    """Sweep orphaned sandboxes (before polling: the previous process's unfinished boots too), then poll until
    ``stop`` is set with the reaper, the unclaimed-session sweep and the gauges running; ``ready`` is set once both
    Temporal workers poll. Closes ``built`` on the way out."""
    settings, host = built.settings, built.host
    try:
        await sweep_logged(built.sandboxes, built.client, settings.host_queue, at_start=True)
        background = [
            reap_forever(built.sandboxes, built.client, settings.host_queue, settings.reap_interval_s),
            forget_unclaimed_sessions(built.adapter, UNCLAIMED_SESSION_GRACE_S),
            report_occupancy(host, built.metrics),
            report_loop_lag(built.metrics),
        ]
        tasks = [asyncio.create_task(job) for job in background]
        try:
            async with built.shared, built.pinned:
                if ready is not None:
                    ready.set()
                await stop.wait()
        finally:
            for task in tasks:
                task.cancel()
    finally:
        await built.close()


async def run_worker(
    settings: WorkerSettings,
    scripted_policy: str | None = None,
    oracle_tasks: Sequence[OracleTask] = (),
    stop: asyncio.Event | None = None,
    ready: asyncio.Event | None = None,
    payload_store: PayloadStorageSettings | None = None,
    server_wait_s: float | None = None,
) -> None:
    """Build the worker and serve it until ``stop`` is set (``build_worker``, ``serve_worker``)."""
    built = await build_worker(settings, scripted_policy, oracle_tasks, payload_store, server_wait_s)
    await serve_worker(built, stop or asyncio.Event(), ready)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args()
    try:
        settings = settings_from_env()
        payload_store = payload_store_from_env()
        contract = contract_in_force()
        target_from_env(address=args.temporal_address)
        server_wait_s = server_wait_from_env()
        oracle_tasks = oracle_tasks_from(args.oracle_tasks, args.dataset_root)
    except (SettingsError, ConnectionSettingsError, ValueError) as error:
        sys.exit(f"worker: {error}")
    log.info("%s (what trainers on this host get from slime_generate / slime_rollout)", contract.log_line)
    overrides = {
        "temporal_address": args.temporal_address,
        "host_id": args.host_id,
        "adapter_port": args.adapter_port,
    }
    settings = settings.model_copy(update={k: v for k, v in overrides.items() if v is not None})

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await run_worker(
            settings, args.scripted_policy, oracle_tasks, stop, payload_store=payload_store, server_wait_s=server_wait_s
        )

    try:
        asyncio.run(serve())
    except (
        ClaudeTarballError,
        ConnectionSettingsError,
        FileNotFoundError,
        MetricsAddressError,
        PayloadStoreUnusable,
        TemporalUnreachable,
    ) as error:
        leave(1, f"worker: {error}")
    leave(0)


if __name__ == "__main__":
    main()
