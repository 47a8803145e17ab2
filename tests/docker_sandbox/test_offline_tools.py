"""Grading sandboxes have no network; every sandbox's package tools run offline; agent sandboxes keep their network.

Nothing here sends traffic off the machine: a grading sandbox has no interface to send it on, and the
agent sandbox only looks at its own settings.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import uuid

import docker
import pytest
import pytest_asyncio

from durable_rollouts.contracts.sandboxes import SandboxHandle, SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.network import ensure_network
from durable_rollouts.docker_sandbox.offline_tools import OFFLINE_ENV
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# Name lookups and a TCP connect from inside the sandbox, each reported by the kind of error it ends with.
PROBE = r"""
import json, socket
def outcome(call):
    try:
        call(); return "ok"
    except OSError as error:
        return type(error).__name__
def connect():
    with socket.create_connection(("172.30.0.1", 80), timeout=5): pass
print(json.dumps({
    "lookup": outcome(lambda: socket.getaddrinfo("pypi.org", 443)),
    "connect": outcome(connect),
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
}))
"""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def prefix(task_images, reap_prefix):
    value = f"pytest-offline-{uuid.uuid4().hex[:8]}"
    yield value
    await reap_prefix(value)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def network_name() -> str:
    return (await asyncio.to_thread(ensure_network, docker.from_env())).name


def networks_of(handle: SandboxHandle) -> dict:
    return docker.from_env().containers.get(handle.container_id).attrs["NetworkSettings"]["Networks"]


async def boot(sandboxes: DockerSandboxes, task: TaskSpec, workflow_id: str, purpose: str) -> SandboxHandle:
    return await sandboxes.boot(SandboxRequest(task=task, workflow_id=workflow_id, attempt=0, purpose=purpose))


async def test_a_grading_sandbox_has_no_network_and_fails_lookups_at_once(prefix, tasks, network_name):
    sandboxes = DockerSandboxes(SandboxSettings(network=network_name, lifetime_s=600))
    handle = await boot(sandboxes, tasks["calc-eval-cmd"], f"{prefix}-grading", "grading")
    try:
        assert list(networks_of(handle)) == ["none"]
        probe = await sandboxes.exec(handle, f"python3 -c {shlex.quote(PROBE)}", user="root", timeout_s=60)
        assert probe.exit_code == 0, probe.output
        found = json.loads(probe.output)
        assert found["interfaces"] == ["lo"], "no interface but loopback"
        assert found["lookup"] == "gaierror", "a name lookup fails (no resolver to ask), it does not time out"
        assert found["connect"] == "OSError", "no route to any address"
        getent = await sandboxes.exec(handle, "getent hosts pypi.org", user="root", timeout_s=60)
        assert getent.exit_code == 2, "getent: key not found"
    finally:
        await sandboxes.destroy(handle)


async def test_agent_sandboxes_stay_on_the_sandbox_network_and_both_kinds_run_package_tools_offline(
    prefix, tasks, network_name
):
    sandboxes = DockerSandboxes(SandboxSettings(network=network_name, lifetime_s=600))
    agent, grading = await asyncio.gather(
        boot(sandboxes, tasks["calc-eval-cmd"], f"{prefix}-agent", "agent"),
        boot(sandboxes, tasks["calc-eval-cmd"], f"{prefix}-both", "grading"),
    )
    try:
        assert list(networks_of(agent)) == [network_name]
        for handle in (agent, grading):
            env = await sandboxes.exec(handle, "env", timeout_s=60)
            assert set(OFFLINE_ENV.items()) <= {
                tuple(line.split("=", 1)) for line in env.output.splitlines() if "=" in line
            }, env.output
    finally:
        await asyncio.gather(sandboxes.destroy(agent), sandboxes.destroy(grading))


async def test_the_old_way_is_a_setting(prefix, tasks, network_name):
    """With ``grading_offline`` and ``offline_tools`` off (the bench's "old" variant) a grading sandbox joins
    the sandbox network and its environment leaves pip to look for an index."""
    sandboxes = DockerSandboxes(
        SandboxSettings(network=network_name, grading_offline=False, offline_tools=False, lifetime_s=600)
    )
    handle = await boot(sandboxes, tasks["calc-eval-cmd"], f"{prefix}-old", "grading")
    try:
        assert list(networks_of(handle)) == [network_name]
        env = await sandboxes.exec(handle, "env", timeout_s=60)
        assert "PIP_NO_INDEX" not in env.output
    finally:
        await sandboxes.destroy(handle)
