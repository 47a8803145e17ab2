"""Whether a host takes a rollout or an image pull: its agent slots and its image-affinity and prefetch refusals.

Key invariant: a host never holds more than its agent slots (live sessions plus reservations), and a workflow that
already holds a reservation keeps its place when ``pick_host`` is retried. Pure: the clock is injected, nothing here
knows Temporal (``activities.rollout_host`` translates).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

# How long ``pick_host``'s reservation holds a slot before its workflow's agent starts or its boot fails for good.
RESERVATION_TTL_S = 300.0
# Refusals by hosts without the rollout's image (and with a free slot), so a host that holds it can take it; after
# that any host with a free slot takes it and pulls the image.
IMAGE_AFFINITY_ATTEMPTS = 3
# Images one host pulls ahead at once (``prefetch_image``); a boot's own pull is never held back by them.
PREFETCH_PULLS_PER_HOST = 2

Refusal = Literal["full", "image_elsewhere", "pulls_busy"]


class AgentSlots:
    """A host's agent slots: its live sessions plus reservations ``pick_host`` made for workflows whose agent has not
    started yet, each until ``ttl_s`` passes on ``clock`` or it is released."""

    def __init__(self, capacity: int, ttl_s: float = RESERVATION_TTL_S, clock: Callable[[], float] = time.monotonic):
        self.capacity = capacity
        self.ttl_s = ttl_s
        self._clock = clock
        self._reservations: dict[str, float] = {}

    @property
    def reserved(self) -> int:
        """Reservations that have not expired."""
        now = self._clock()
        return sum(1 for until in self._reservations.values() if until > now)

    def in_use(self, live_sessions: int) -> int:
        """Slots held: live sessions plus reservations."""
        return live_sessions + self.reserved

    def has_room(self, key: str, live_sessions: int) -> bool:
        """A slot is free for ``key`` (a workflow id), or it holds a reservation already."""
        now = self._clock()
        self._reservations = {k: until for k, until in self._reservations.items() if until > now}
        return key in self._reservations or live_sessions + len(self._reservations) < self.capacity

    def reserve(self, key: str) -> None:
        """Reserve a slot for ``key`` until ``ttl_s`` from now (renewing its own); ask ``has_room`` first."""
        self._reservations[key] = self._clock() + self.ttl_s

    def release(self, key: str) -> None:
        """Give ``key``'s reservation back (its agent started: the session holds the slot now; or its boot failed)."""
        self._reservations.pop(key, None)


def pick_refusal(has_room: bool, image: str, holds_image: bool, image_affinity: bool, refusals: int) -> Refusal | None:
    """Why ``pick_host`` refuses a rollout (``refusals``: image refusals counted so far across the fleet), or None."""
    if not has_room:
        return "full"
    if image_affinity and image and refusals < IMAGE_AFFINITY_ATTEMPTS and not holds_image:
        return "image_elsewhere"
    return None


def prefetch_refusal(holds_image: bool, image_affinity: bool, refusals: int, pulling_ahead: int) -> Refusal | None:
    """Why ``prefetch_image`` refuses an image: a host that holds (or pulls) it always takes it; one that lacks it
    leaves it to others ``IMAGE_AFFINITY_ATTEMPTS`` times, then while it already pulls ``PREFETCH_PULLS_PER_HOST``."""
    if holds_image:
        return None
    if image_affinity and refusals < IMAGE_AFFINITY_ATTEMPTS:
        return "image_elsewhere"
    if pulling_ahead >= PREFETCH_PULLS_PER_HOST:
        return "pulls_busy"
    return None
