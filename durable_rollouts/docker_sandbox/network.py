"""The sandbox network: an internal bridge with no route off the host; the worker listens on its gateway."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import docker
import docker.errors

from durable_rollouts.docker_sandbox.container_layout import LABEL_PREFIX

SANDBOX_NETWORK = "rollouts-sandbox"
SANDBOX_SUBNET = "172.30.0.0/24"


@dataclass(frozen=True)
class SandboxNetwork:
    name: str
    gateway: str
    bridge: str


def ensure_network(
    client: docker.DockerClient, name: str = SANDBOX_NETWORK, subnet: str = SANDBOX_SUBNET
) -> SandboxNetwork:
    """Create (once) the internal bridge network sandboxes run on; return it with the host's address on it.

    ``internal`` means no route out of the host: a sandbox can reach the worker at this gateway address
    (where the adapter listens) and nothing beyond the machine.
    """
    try:
        network = client.networks.get(name)
    except docker.errors.NotFound:
        gateway = str(ipaddress.ip_network(subnet).network_address + 1)
        pool = docker.types.IPAMPool(subnet=subnet, gateway=gateway)
        try:
            network = client.networks.create(
                name,
                driver="bridge",
                internal=True,
                ipam=docker.types.IPAMConfig(pool_configs=[pool]),
                labels={f"{LABEL_PREFIX}.managed": "1"},
            )
        except docker.errors.APIError:
            network = client.networks.get(name)
    network.reload()
    bridge = network.attrs.get("Options", {}).get("com.docker.network.bridge.name") or f"br-{network.id[:12]}"
    return SandboxNetwork(name=name, gateway=network.attrs["IPAM"]["Config"][0]["Gateway"], bridge=bridge)
