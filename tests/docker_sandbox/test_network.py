"""From inside a sandbox: the adapter answers (only with a valid secret), nothing else on the host does.

Every address tried is on this machine: the host's address on the sandbox
network (adapter port and another listening port) and the host's address on
Docker's default bridge. The sandbox network is internal, so nothing leaves it.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import uuid

import docker
import pytest

from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.contracts.session import SessionConfig
from durable_rollouts.docker_sandbox import firewall as sandbox_firewall
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.network import ensure_network
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

PROBE = r"""
import json, socket, sys, urllib.request, urllib.error
gateway, adapter_port, other_port, secret = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def call(token):
    request = urllib.request.Request(f"http://{gateway}:{adapter_port}/v1/messages/count_tokens", method="POST",
        data=json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(request, timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code
def connect(host, port):
    probe = socket.socket(); probe.settimeout(3)
    try:
        probe.connect((host, port)); return "connected"
    except OSError as error:
        return type(error).__name__
print(json.dumps({"with_secret": call(secret), "wrong_secret": call(secret.split(".")[0] + ".nope"),
    "other_host_port": connect(gateway, other_port), "default_bridge_host": connect("172.17.0.1", other_port)}))
"""


async def test_a_sandbox_reaches_the_adapter_and_nothing_else(renderer):
    network = await asyncio.to_thread(ensure_network, docker.from_env())
    adapter = AdapterServer(renderer)
    await adapter.start(network.gateway, 0)
    other = await asyncio.start_server(lambda r, w: w.close(), "0.0.0.0", 0, family=socket.AF_INET)
    other_port = other.sockets[0].getsockname()[1]
    task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task
    handle = None
    try:
        assert await asyncio.to_thread(sandbox_firewall.protect, network.bridge, adapter.port)
        ticket = adapter.registry.open_session(SessionConfig(policy_url="http://127.0.0.1:9"))
        sandboxes = DockerSandboxes(SandboxSettings(network=network.name, lifetime_s=600))
        handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=f"net-{uuid.uuid4().hex[:8]}", attempt=1))
        command = shlex.join(
            ["python3", "-c", PROBE, network.gateway, str(adapter.port), str(other_port), ticket.secret]
        )
        result = await sandboxes.exec(handle, command, user="agent", timeout_s=60)
        seen = json.loads(result.output.strip().splitlines()[-1])
        assert seen["with_secret"] == 200 and seen["wrong_secret"] == 401
        assert seen["other_host_port"] != "connected" and seen["default_bridge_host"] != "connected", seen
    finally:
        if handle is not None:
            await sandboxes.destroy(handle)
        await asyncio.to_thread(sandbox_firewall.revoke_port, adapter.port)
        other.close()
        await adapter.stop()


async def test_the_agent_runs_unprivileged_with_no_capabilities(renderer):
    task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task
    network = await asyncio.to_thread(ensure_network, docker.from_env())
    sandboxes = DockerSandboxes(SandboxSettings(network=network.name, lifetime_s=600))
    handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=f"caps-{uuid.uuid4().hex[:8]}", attempt=1))
    try:
        status = await sandboxes.exec(handle, "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status", user="agent")
        uid, cap_eff, no_new_privs = status.output.split("\n")[:3]
        assert uid.strip() != "0" and cap_eff.split()[1] == "0000000000000000" and no_new_privs.split()[1] == "1"
        root = await sandboxes.exec(handle, "grep CapBnd /proc/self/status", user="root")
        assert int(root.output.split()[1], 16) < (1 << 14), (
            "root in the sandbox keeps only the workspace-preparation capabilities"
        )
    finally:
        await sandboxes.destroy(handle)


async def test_a_dead_workers_allow_rule_is_pruned_when_a_worker_starts():
    """A SIGKILLed worker never revokes its port; the next worker's start-up removes every allow rule
    no process listens on and keeps the live ones (its own and other workers')."""
    network = await asyncio.to_thread(ensure_network, docker.from_env())
    live = await asyncio.start_server(lambda r, w: w.close(), network.gateway, 0, family=socket.AF_INET)
    starting = await asyncio.start_server(lambda r, w: w.close(), network.gateway, 0, family=socket.AF_INET)
    live_port, starting_port = live.sockets[0].getsockname()[1], starting.sockets[0].getsockname()[1]
    with socket.socket() as probe:
        probe.bind((network.gateway, 0))
        dead_port = probe.getsockname()[1]
    try:
        await asyncio.to_thread(sandbox_firewall.ensure_chain, network.bridge)
        await asyncio.to_thread(sandbox_firewall.allow_port, live_port)
        await asyncio.to_thread(sandbox_firewall.allow_port, dead_port)
        assert {live_port, dead_port} <= set(await asyncio.to_thread(sandbox_firewall.allowed_ports))
        assert await asyncio.to_thread(sandbox_firewall.protect, network.bridge, starting_port)
        allowed = set(await asyncio.to_thread(sandbox_firewall.allowed_ports))
        assert {live_port, starting_port} <= allowed and dead_port not in allowed, allowed
    finally:
        for port in (live_port, starting_port, dead_port):
            await asyncio.to_thread(sandbox_firewall.revoke_port, port)
        live.close()
        starting.close()
