"""The real stack a full-stack bench drives on this host, and its tear-down.

The pieces: a Temporal dev server (in memory, a free port on 127.0.0.1, so it never attaches to another session's
server on 7233), the scripted ``oracle`` policy served in the bench's own process (so every ``/generate`` can be
timed), the example tasks (``examples/tasks/dataset.jsonl``) repeated round-robin, and the environment a worker (or
the plain driver) on this host gets: the adapter bound to the sandbox network's gateway, the bench's budgets.

Invariant of the tear-down: when the block of ``running_servers`` ends, however it ends, no managed container of
the bench's run is left (one that is, is a leak: it is reported and removed), and its temp dir is gone unless kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench.harness.procfs import pids_matching
from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollouts import RolloutInput
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.docker_sandbox.container_layout import LABEL_PREFIX
from durable_rollouts.docker_sandbox.network import ensure_network
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import DEFAULT_TOKENIZER_DIR
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ROUTING_KEY_HEADER, ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.rollout_runs import rollout_input

TEMPORAL_CLI = Path(sys.prefix) / "bin" / "temporal"
# Every rollout of a full-stack bench samples under this policy spec.
ROLLOUT_POLICY = PolicySpec(sampling=SamplingParams(temperature=1.0, max_new_tokens=8192), context_budget=65536)


def example_rows() -> list[DatasetRow]:
    """The usable rows of the example dataset, in its order."""
    return [row for row in read_dataset(EXAMPLE_DATASET) if isinstance(row, DatasetRow)]


def bench_budgets(agent_budget_s: int, eval_timeout_s: int) -> RolloutBudgets:
    """A bench's budgets: its agent budget and eval timeout, and a guard 180 s past both."""
    return RolloutBudgets(
        agent_budget_s=agent_budget_s, eval_timeout_s=eval_timeout_s, guard_s=agent_budget_s + eval_timeout_s + 180
    )


def round_robin(rows: list[DatasetRow], n: int, budgets: RolloutBudgets, offset: int = 0) -> list[RolloutInput]:
    """N rollouts of the rows taken round-robin from ``offset``: rollout i runs row (offset + i) mod rows as group
    (offset + i) mod rows, sample i div rows."""
    rollouts = []
    for i in range(n):
        group = (offset + i) % len(rows)
        rollouts.append(rollout_input(rows[group].task, i // len(rows), group, ROLLOUT_POLICY, budgets))
    return rollouts


class TimedPolicyServer(ScriptedPolicyServer):
    """The scripted policy server, recording (routing key, arrival, answer) wall times per /generate."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.timings: list[tuple[str | None, float, float, int]] = []

    async def _generate(self, request):  # type: ignore[override]
        arrived = time.time()
        status = 0
        try:
            response = await super()._generate(request)
            status = response.status
            return response
        finally:
            self.timings.append((request.headers.get(ROUTING_KEY_HEADER), arrived, time.time(), status))

    def for_session(self, session_id: str) -> list[tuple[float, float]]:
        """(arrival, answer) of every /generate of one session (its routing key is the adapter's session id)."""
        return [(a, b) for key, a, b, _ in self.timings if key == session_id]


async def sandbox_gateway() -> str:
    """The sandbox network's gateway (the network is created if missing): where the adapter binds."""
    return (await asyncio.to_thread(ensure_network, docker.from_env())).gateway


async def oracle_policy(
    server_class: type[ScriptedPolicyServer] = ScriptedPolicyServer, **options: Any
) -> ScriptedPolicyServer:
    """A policy server of ``server_class`` whose default policy is the oracle of the example tasks (not started)."""
    renderer = await asyncio.to_thread(PromptRenderer.from_folder, DEFAULT_TOKENIZER_DIR)
    return server_class(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)), **options
    )


@dataclass
class Servers:
    """The bench's policy server and its dev server, both serving."""

    env: WorkflowEnvironment
    address: str  # the dev server's host:port
    policy_url: str


@contextlib.asynccontextmanager
async def running_servers(
    policy: ScriptedPolicyServer, run_id: str, tmp: Path, logs: Callable[[], list[Path]], keep_temp: bool
) -> AsyncIterator[Servers]:
    """``policy`` on 127.0.0.1 and a dev server (in memory, a free port of 127.0.0.1, no UI), serving inside the block;
    after it, however it ends, both stop and ``_tear_down`` runs over the run (its logs are those ``logs()`` names
    then)."""
    env: WorkflowEnvironment | None = None
    try:
        policy_url = await policy.start("127.0.0.1", 0)
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=str(TEMPORAL_CLI), data_converter=pydantic_data_converter, ui=False, ip="127.0.0.1"
        )
        yield Servers(env, env.client.service_client.config.target_host, policy_url)
    finally:
        if env is not None:
            await env.shutdown()
        await policy.stop()
        await _tear_down(run_id, logs(), tmp, keep_temp)


def stack_env(policy_url: str, gateway: str, budgets: RolloutBudgets, agent_slots: int) -> dict[str, str]:
    """What a worker (or the plain driver) of a bench runs with: the bench's policy, its adapter on the sandbox
    gateway, ``agent_slots`` agents and the bench's budgets."""
    return {
        "ROLLOUT_POLICY_URL": policy_url,
        "ROLLOUT_AGENT_SLOTS": str(agent_slots),
        "SHIM_BIND_HOST": gateway,
        "SWE_TIME_BUDGET_SEC": str(budgets.agent_budget_s),
        "SWE_EVAL_TIMEOUT_SEC": str(budgets.eval_timeout_s),
        "SWE_GENERATE_GUARD_SEC": str(budgets.guard_s),
    }


def docker_daemon_pids() -> list[int]:
    """dockerd and containerd: they work for every sandbox of the host, the bench's and any other tenant's."""
    return pids_matching(lambda a: Path(a[0]).name in ("dockerd", "containerd"))


def dev_server_pids(address: str) -> list[int]:
    """The Temporal dev server serving ``address`` (host:port)."""
    port = address.rsplit(":", 1)[1]
    return pids_matching(lambda a: "start-dev" in a and port in a)


def _remove_leftovers(run_id: str) -> list[str]:
    """Remove the managed containers of this run's workflows still there; their names. One listing call (labels
    included), so containers of other tenants that go away meanwhile do not matter."""
    api = docker.from_env().api
    found = [
        c
        for c in api.containers(all=True, filters={"label": f"{LABEL_PREFIX}.managed=1"})
        if (c.get("Labels") or {}).get(f"{LABEL_PREFIX}.workflow_id", "").startswith(f"rollout-{run_id}-")
    ]
    for c in found:
        with contextlib.suppress(docker.errors.NotFound):
            api.remove_container(c["Id"], force=True)
    return [name.lstrip("/") for c in found for name in c.get("Names", [])[:1]]


async def _tear_down(run_id: str, logs: list[Path], tmp: Path, keep_temp: bool) -> None:
    """A bench's last words: any container of the run left behind is removed and reported (a leak), the first
    WARNING/ERROR lines of each log are shown, and the temp dir is removed unless kept."""
    leftovers = await asyncio.to_thread(_remove_leftovers, run_id)
    if leftovers:
        print(
            f"LEAK: {len(leftovers)} managed container(s) of this run were left behind; removed: {leftovers}",
            flush=True,
        )
    else:
        print("cleanup: no managed container of this run remains", flush=True)
    for log_file in logs:
        with contextlib.suppress(OSError):
            problems = [
                line
                for line in log_file.read_text(errors="replace").splitlines()
                if " WARNING " in line or " ERROR " in line
            ]
            if problems:
                print(f"{log_file.name}: {len(problems)} WARNING/ERROR lines, first ones:", flush=True)
                for line in problems[:5]:
                    print("  " + line[:300])
    if keep_temp:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
