"""What the trainer side tells the fleet about task images the next groups will need, and what the hosts did.

A prefetch is a hint: whatever it does or fails to do, a rollout's own boot still pulls what its host lacks.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from durable_rollouts.contracts.sandboxes import DEFAULT_PULL_TIMEOUT_S

# How many of a prefetch's images are pulled at once across the fleet (each host also takes at most
# ``durable_rollouts.docker_sandbox.host_placement.PREFETCH_PULLS_PER_HOST`` of them at a time).
DEFAULT_PREFETCH_PARALLEL = 4


class PrefetchInput(BaseModel):
    """The images, in the order their groups will start (earliest first), and how long one pull may take."""

    run_id: str
    images: list[str] = Field(min_length=1)
    pull_timeout_s: float = Field(DEFAULT_PULL_TIMEOUT_S, gt=0)
    parallel: int = Field(DEFAULT_PREFETCH_PARALLEL, ge=1)


class PrefetchRequest(BaseModel):
    """One image for one host to hold; ``image`` as the rows name it (the host applies its mirror rewrite)."""

    image: str
    pull_timeout_s: float = Field(DEFAULT_PULL_TIMEOUT_S, gt=0)


PrefetchOutcome = Literal["pulled", "held", "skipped", "failed"]


class Prefetched(BaseModel):
    """What a host did about one image: ``pulled`` it, already ``held`` it, ``skipped`` it (its pull policy is
    ``never``), or ``failed`` (``error`` says why: not in the registry, credentials refused, unreachable)."""

    image: str
    outcome: PrefetchOutcome
    host_queue: str = ""
    seconds: float = 0.0
    error: str = ""


class PrefetchResult(BaseModel):
    images: list[Prefetched]
