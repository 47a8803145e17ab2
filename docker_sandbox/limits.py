"""What a sandbox may use (CPU, memory, processes, disk) and the boot settings a worker gives its sandboxes."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

SANDBOX_MEMORY_BYTES = 4 << 30
SANDBOX_DISK_BYTES = 10 << 30


class SandboxLimits(BaseModel):
    """Per-container resource caps; ``disk_bytes`` bounds what a sandbox writes after its boot (0: unbounded),
    enforced by ``disk_watch`` while the agent runs and while the grader runs the tests. A worker's own
    CPU cap is its host's share per agent slot (``config.settings``); one CPU is the cap of a sandbox
    booted outside a worker."""

    cpus: float = Field(1.0, gt=0)
    memory_bytes: int = Field(SANDBOX_MEMORY_BYTES, ge=64 << 20)
    pids: int = Field(512, ge=16)
    disk_bytes: int = Field(SANDBOX_DISK_BYTES, ge=0)


# The default caps, shared and never mutated.
DEFAULT_LIMITS = SandboxLimits()


class SandboxSettings(BaseModel):
    """How a worker boots its sandboxes: Claude Code to mount into agent sandboxes, the network, the host
    queue it labels them with, their caps, and how long a container lives if nobody removes it."""

    claude_code: Path | None = None
    network: str | None = None
    host_queue: str = ""
    limits: SandboxLimits = DEFAULT_LIMITS
    lifetime_s: int = Field(3600, ge=60)
