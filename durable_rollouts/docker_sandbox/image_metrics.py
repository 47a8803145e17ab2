"""What a host's task-image handling reports: pulls (by outcome), bytes and seconds pulled, boots that found
their image already on the engine, and cache evictions. Recorded on a ``durable_rollouts.meters.Meter``;
labels are bounded (an outcome, never an image name)."""

from __future__ import annotations

from durable_rollouts.meters import Meter, NoMeter

IMAGE_PULLS = "rollout_image_pulls_total"
IMAGE_PULL_BYTES = "rollout_image_pull_bytes_total"
IMAGE_PULL_SECONDS = "rollout_image_pull_seconds"
IMAGE_CACHE_HITS = "rollout_image_cache_hits_total"
IMAGE_CACHE_EVICTIONS = "rollout_image_cache_evictions_total"
IMAGE_CACHE_BYTES = "rollout_image_cache_bytes"


class ImageMetrics:
    def __init__(self, meter: Meter | None = None):
        meter = meter or NoMeter()
        self._pulls = meter.create_counter(IMAGE_PULLS, "task image pulls, by outcome (pulled, failed, timed_out)")
        self._pull_bytes = meter.create_counter(IMAGE_PULL_BYTES, "bytes downloaded by task image pulls", "By")
        self._pull_seconds = meter.create_histogram_float(IMAGE_PULL_SECONDS, "how long task image pulls took", "s")
        self._hits = meter.create_counter(IMAGE_CACHE_HITS, "sandbox boots whose image was already on the engine")
        self._evictions = meter.create_counter(
            IMAGE_CACHE_EVICTIONS, "task images removed to keep the cache under its budget"
        )
        self._cache_bytes = meter.create_gauge(
            IMAGE_CACHE_BYTES, "bytes of task images on the engine, as the cache counts them", "By"
        )

    def pulled(self, outcome: str, downloaded_bytes: int, seconds: float) -> None:
        self._pulls.add(1, {"outcome": outcome})
        self._pull_bytes.add(downloaded_bytes)
        self._pull_seconds.record(seconds)

    def hit(self) -> None:
        self._hits.add(1)

    def evicted(self, count: int) -> None:
        self._evictions.add(count)

    def cache_size(self, total_bytes: int) -> None:
        self._cache_bytes.set(total_bytes)
