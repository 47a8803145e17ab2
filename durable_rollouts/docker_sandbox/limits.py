"""What a sandbox may use (CPU, memory, processes, disk) and the boot settings a worker gives its sandboxes."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from durable_rollouts.contracts.tasks import TaskResources
from durable_rollouts.docker_sandbox.image_settings import ImageSettings

SANDBOX_MEMORY_BYTES = 4 << 30
SANDBOX_DISK_BYTES = 10 << 30
MIN_MEMORY_BYTES = 64 << 20


class SandboxLimits(BaseModel):
    """Per-container resource caps; ``disk_bytes`` bounds what a sandbox writes after its boot (0: unbounded),
    enforced by ``disk_watch`` while the agent runs and while the grader runs the tests. A worker's own
    CPU cap is its host's share per agent slot (``durable_rollouts.config.settings``); one CPU is the cap of a sandbox
    booted outside a worker."""

    cpus: float = Field(1.0, gt=0)
    memory_bytes: int = Field(SANDBOX_MEMORY_BYTES, ge=MIN_MEMORY_BYTES)
    pids: int = Field(512, ge=16)
    disk_bytes: int = Field(SANDBOX_DISK_BYTES, ge=0)


# The default caps, shared and never mutated.
DEFAULT_LIMITS = SandboxLimits()


def task_limits(caps: SandboxLimits, resources: TaskResources | None) -> SandboxLimits:
    """The limits a task's sandbox boots with: what the task asks for (``TaskResources``), capped at ``caps``.

    ``caps`` are the booting process's per-sandbox limits (a worker's: its host's CPU share per agent slot,
    ``ROLLOUT_SANDBOX_MEMORY_BYTES``, ``ROLLOUT_SANDBOX_DISK_BYTES``), so a task can lower its sandbox's CPU,
    memory and disk but never take more than a slot's share; a disk cap of 0 (unbounded) lets the task's own
    storage request bound it. Memory stays at least 64 MiB. What the task does not ask for is the cap.
    """
    if resources is None:
        return caps
    cpus = min(caps.cpus, resources.cpus) if resources.cpus else caps.cpus
    memory = (
        max(MIN_MEMORY_BYTES, min(caps.memory_bytes, resources.memory_bytes))
        if resources.memory_bytes
        else caps.memory_bytes
    )
    disk = caps.disk_bytes
    if resources.disk_bytes:
        disk = min(disk, resources.disk_bytes) if disk else resources.disk_bytes
    return caps.model_copy(update={"cpus": cpus, "memory_bytes": memory, "disk_bytes": disk})


class SandboxSettings(BaseModel):
    """How a worker boots its sandboxes: Claude Code to mount into agent sandboxes, the network, the host
    queue it labels them with, their caps, how long a container lives if nobody removes it, and where task
    images come from (``images``: pull policy, mirrors, credentials).

    ``network`` is the agent sandboxes' network (they dial the adapter at its gateway). With
    ``grading_offline`` (the default) grading sandboxes get no network at all (Docker's ``none``: no
    interface, so a name lookup fails at once); without it they join ``network`` too. With
    ``offline_tools`` (the default) every sandbox's environment makes package tools work offline
    (``durable_rollouts.docker_sandbox.offline_tools``)."""

    claude_code: Path | None = None
    network: str | None = None
    grading_offline: bool = True
    offline_tools: bool = True
    host_queue: str = ""
    limits: SandboxLimits = DEFAULT_LIMITS
    lifetime_s: int = Field(3600, ge=60)
    images: ImageSettings = ImageSettings()
