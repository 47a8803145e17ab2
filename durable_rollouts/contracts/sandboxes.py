"""Sandbox activities' inputs and outputs: picking a host, booting from an image, and the handle every later step uses.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from durable_rollouts.contracts.tasks import TaskSpec

# How long a host may take to pull a task image it lacks, apart from the boot (``ROLLOUT_PULL_TIMEOUT_S``).
DEFAULT_PULL_TIMEOUT_S = 600


class PickRequest(BaseModel):
    """What ``pick_host`` weighs: the task image (a host that holds it is preferred)."""

    image: str = ""


class SandboxRequest(BaseModel):
    """What boot needs: the task, and labels tying the container to its workflow attempt."""

    task: TaskSpec
    workflow_id: str
    attempt: int
    purpose: Literal["agent", "grading"] = "agent"
    # How long pulling the task image may take on a host that lacks it, apart from the boot itself.
    pull_timeout_s: float = Field(DEFAULT_PULL_TIMEOUT_S, gt=0)


class ImagePull(BaseModel):
    """How far a host's pull of a task image got: layers (``done`` of ``total`` known so far) and bytes
    downloaded of those announced so far; ``image`` is the name pulled (after the mirror rewrite)."""

    image: str
    # The rollout attempt whose boot pulls (set by the boot activity; a lost attempt's pull is not shown).
    attempt: int = 0
    layers_total: int = 0
    layers_done: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        """``3/7 layers, 120.4/450.0 MB, 12 s``."""
        return (
            f"{self.layers_done}/{self.layers_total} layers, "
            f"{self.bytes_done / 1e6:.1f}/{self.bytes_total / 1e6:.1f} MB, {self.seconds:.0f} s"
        )


class SandboxHandle(BaseModel):
    """``disk_baseline_bytes``: the container's writable layer when its boot finished (the disk budget counts
    only what is written after it). ``attempt``: the rollout attempt it was booted for (0 in handles from
    before the field)."""

    container_id: str
    name: str
    workdir: str
    host_queue: str = ""
    disk_baseline_bytes: int = 0
    attempt: int = 0
