"""Shared fixtures: one tokenizer, one scripted policy server and one adapter per test session."""

from __future__ import annotations

import docker
import pytest
import pytest_asyncio

from activities.adapter import AdapterServer
from activities.contracts import SamplingParams, SessionConfig
from activities.scripted_policy import ScriptedPolicyServer
from tests.renderer_fixture import shared_renderer

MANAGED = "io.rollouts.managed=1"


@pytest.fixture(scope="session", autouse=True)
def no_sandbox_outlives_the_suite():
    """After the whole suite, no rollout sandbox the suite created may remain (removed, then reported)."""
    try:
        client = docker.from_env()
        before = {c.id for c in client.containers.list(all=True, filters={"label": MANAGED})}
    except docker.errors.DockerException:
        client, before = None, set()
    yield
    if client is None:
        return
    leaked = [c for c in client.containers.list(all=True, filters={"label": MANAGED}) if c.id not in before]
    names = [c.name for c in leaked]
    for container in leaked:
        container.remove(force=True)
    assert names == [], f"sandboxes leaked by the suite: {names}"


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
