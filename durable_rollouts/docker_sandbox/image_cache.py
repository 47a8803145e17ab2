"""A host's task images: which ones the engine holds (for placement), and those kept under a disk budget, least
recently booted removed first.

Invariants:

* The cache knows the images this process booted or pulled (by the name it boots them by); only those count
  against the budget and only those are ever removed. An image's size is the engine's ``Size`` for it, which
  counts the layers it shares with other images too, so the budget errs towards removing early.
* Never removed: an image a boot is using (``in_use``: from before its pull until its container exists), an
  image any container still uses (the engine refuses; that image is skipped), and the ``protected`` names
  (the base image).
* ``budget_bytes`` 0 means no budget: nothing is removed.
* ``holds`` answers from memory: the engine's tags as ``refresh`` listed them (the worker does it at start),
  plus every image a boot found or pulled since, minus every image the cache removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator

import docker
import docker.errors

from durable_rollouts.docker_sandbox.image_metrics import ImageMetrics
from durable_rollouts.docker_sandbox.image_refs import ImageReferenceError, canonical

log = logging.getLogger(__name__)


def _canonical(name: str) -> str:
    """``name`` fully qualified, or "" for a name that is no reference (it is never held)."""
    try:
        return canonical(name)
    except ImageReferenceError:
        return ""


class ImageCache:
    def __init__(
        self,
        client: Callable[[], docker.DockerClient],
        budget_bytes: int,
        metrics: ImageMetrics,
        protected: frozenset[str] = frozenset(),
    ):
        self._client = client
        self.budget_bytes = budget_bytes
        self.metrics = metrics
        self.protected = protected
        self._last_used: dict[str, float] = {}
        self._in_use: Counter[str] = Counter()
        self._lock = asyncio.Lock()
        self._held: set[str] = set()

    def refresh(self) -> None:
        """List the engine's image tags (blocking): what ``holds`` starts from. One listing call that carries the
        tags and inspects nothing, so an image removed meanwhile (another worker's cache, an operator) is absent
        from the listing, never an error."""
        listed = self._client().api.images()
        self._held = {name for image in listed for tag in image.get("RepoTags") or () if (name := _canonical(tag))}

    def holds(self, image: str) -> bool:
        """Whether the engine holds ``image``, under any spelling of its name (``image_refs.canonical``)."""
        return _canonical(image) in self._held

    def held(self, image: str) -> None:
        """A boot found ``image`` on the engine or pulled it."""
        if name := _canonical(image):
            self._held.add(name)

    @contextlib.contextmanager
    def in_use(self, image: str) -> Iterator[None]:
        """Hold ``image`` (a boot from it is under way) and mark it used now."""
        self._in_use[image] += 1
        self._last_used[image] = time.monotonic()
        try:
            yield
        finally:
            self._in_use[image] -= 1
            if self._in_use[image] <= 0:
                del self._in_use[image]

    @property
    def known(self) -> list[str]:
        """The images the cache counts, least recently used first."""
        return sorted(self._last_used, key=self._last_used.__getitem__)

    async def enforce(self) -> list[str]:
        """Remove least recently used images until the known ones fit the budget; returns those removed."""
        if self.budget_bytes <= 0:
            return []
        async with self._lock:
            return await asyncio.to_thread(self._enforce)

    def _size(self, image: str) -> int | None:
        try:
            return int(self._client().images.get(image).attrs.get("Size") or 0)
        except docker.errors.ImageNotFound:
            return None

    def _enforce(self) -> list[str]:
        sizes: dict[str, int] = {}
        for image in self.known:
            size = self._size(image)
            if size is None:
                self._last_used.pop(image, None)
            else:
                sizes[image] = size
        total = sum(sizes.values())
        removed: list[str] = []
        for image in list(sizes):
            if total <= self.budget_bytes:
                break
            if image in self._in_use or image in self.protected:
                continue
            try:
                self._client().images.remove(image)
            except docker.errors.APIError as error:  # a container still uses it (409), or it went meanwhile
                log.info("image cache kept %s: %s", image, error.explanation or error)
                continue
            total -= sizes[image]
            self._last_used.pop(image, None)
            self._held.discard(_canonical(image))
            removed.append(image)
        if removed:
            self.metrics.evicted(len(removed))
            log.info(
                "image cache removed %s to stay under %d bytes (%d bytes known now)",
                ", ".join(removed),
                self.budget_bytes,
                total,
            )
        self.metrics.cache_size(total)
        return removed
