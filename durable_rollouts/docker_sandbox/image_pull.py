"""Pulling task images into a host's engine: one pull per image at a time, its progress, its failures.

Invariants:

* However many boots wait for an image, the host pulls it once (``ImagePuller.pull`` joins a pull in
  flight); a boot that stops waiting (cancelled, or past its own timeout) leaves the pull running for the
  others, and a pull ends by its own deadline.
* Credentials: ``image_settings.ImageSettings.credentials`` for its registry, else what Docker's ``config.json``
  (``DOCKER_CONFIG`` or ``~/.docker``) holds for the image's registry, as ``docker pull`` would.
* Every failure is one of three (``classify_pull_error``): the image is not in the registry
  (``SandboxImageMissing``: the row's fault), the registry refused the credentials
  (``RegistryAuthFailed``, naming the registry) or anything else: unreachable, failing, too slow
  (``RegistryUnavailable``: retried, refilled).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import docker
import docker.errors
import requests.exceptions

from durable_rollouts.contracts.sandboxes import ImagePull
from durable_rollouts.docker_sandbox.errors import RegistryAuthFailed, RegistryUnavailable, SandboxImageMissing
from durable_rollouts.docker_sandbox.image_metrics import ImageMetrics
from durable_rollouts.docker_sandbox.image_refs import registry_of
from durable_rollouts.docker_sandbox.image_settings import ImageSettings

ProgressListener = Callable[[ImagePull], None]

_MISSING = ("manifest unknown", "not found", "repository does not exist", "name unknown", "no such image")
_AUTH = ("unauthorized", "authentication required", "no basic auth credentials", "incorrect username or password")
_DONE = ("Pull complete", "Already exists")


def pull_image(
    client: docker.DockerClient,
    image: str,
    auth: dict[str, str] | None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Pull ``image`` into ``client``'s engine (blocking), handing each progress event to ``on_event``; returns
    early once ``stop`` is set. A failure raises what ``classify_pull_error`` makes of it."""
    try:
        stream = client.api.pull(image, stream=True, decode=True, auth_config=auth)
        for event in stream:
            if stop is not None and stop.is_set():
                stream.close()
                return
            if "error" in event:
                raise classify_pull_error(image, str(event.get("errorDetail", {}).get("message") or event["error"]))
            if on_event is not None:
                on_event(event)
    except docker.errors.APIError as error:
        raise classify_pull_error(image, str(error.explanation or error)) from None
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as error:
        raise RegistryUnavailable(f"pulling {image}: the Docker engine did not answer ({error})") from None


def classify_pull_error(image: str, message: str) -> Exception:
    """The error a failed pull of ``image`` raises, from the engine's message. Docker Hub answers a missing
    repository with "pull access denied ... repository does not exist or may require 'docker login'": that
    is read as missing (the message keeps both readings)."""
    registry, text, said = registry_of(image), message.lower(), message.strip()
    if any(word in text for word in _AUTH):
        return RegistryAuthFailed(
            f"registry {registry} refused the credentials for {image} (check ROLLOUT_REGISTRY_* or docker login): "
            f"{said}"
        )
    if any(word in text for word in _MISSING):
        return SandboxImageMissing(f"image {image} is not in registry {registry}: {said}")
    return RegistryUnavailable(f"pulling {image} from registry {registry} failed: {said}")


class PullTracker:
    """Folds the engine's pull events into an ``ImagePull``: a layer counts once it is pulled or already
    present; bytes are the largest figures each layer's download reported."""

    def __init__(self, image: str):
        self.image = image
        self.started = time.monotonic()
        self._layers: dict[str, tuple[int, int, bool]] = {}

    def feed(self, event: dict[str, Any]) -> None:
        layer, status = event.get("id"), str(event.get("status", ""))
        if (
            not layer
            or layer == self.image.rsplit(":", 1)[-1]
            or status.startswith(("Pulling from", "Digest", "Status"))
        ):
            return
        done_bytes, total_bytes, done = self._layers.get(layer, (0, 0, False))
        detail = event.get("progressDetail") or {}
        if status == "Downloading":
            done_bytes = max(done_bytes, int(detail.get("current", 0)))
            total_bytes = max(total_bytes, int(detail.get("total", 0)))
        elif status == "Download complete":
            done_bytes = max(done_bytes, total_bytes)
        done = done or status in _DONE
        self._layers[layer] = (done_bytes, total_bytes, done)

    def snapshot(self) -> ImagePull:
        layers = list(self._layers.values())  # the pull's thread may add a layer meanwhile
        return ImagePull(
            image=self.image,
            layers_total=len(layers),
            layers_done=sum(1 for _, _, done in layers if done),
            bytes_done=sum(b for b, _, _ in layers),
            bytes_total=sum(t for _, t, _ in layers),
            seconds=round(time.monotonic() - self.started, 1),
        )


def _timed_out(pull: _Pull, timeout_s: float) -> RegistryUnavailable:
    snapshot = pull.tracker.snapshot()
    return RegistryUnavailable(
        f"pulling {snapshot.image} from registry {registry_of(snapshot.image)} timed out after {timeout_s:.0f} s "
        f"({snapshot.layers_done} of {snapshot.layers_total} layers, {snapshot.bytes_done} bytes)"
    )


class _Pull:
    """One pull in flight: its task, its progress and who listens to it."""

    def __init__(self, image: str):
        self.tracker = PullTracker(image)
        self.listeners: set[ProgressListener] = set()
        self.stop = threading.Event()
        self.task: asyncio.Task[None] | None = None

    def notify(self) -> None:
        snapshot = self.tracker.snapshot()
        for listener in list(self.listeners):
            listener(snapshot)


class ImagePuller:
    """Pulls for one engine (``client``); one per ``DockerSandboxes``."""

    def __init__(self, client: Callable[[], docker.DockerClient], settings: ImageSettings, metrics: ImageMetrics):
        self._client = client
        self.settings = settings
        self.metrics = metrics
        self._inflight: dict[str, _Pull] = {}

    def pulling(self, image: str) -> bool:
        """Whether a pull of ``image`` (the name pulled) is in flight on this host."""
        return image in self._inflight

    async def pull(self, image: str, timeout_s: float, on_progress: ProgressListener | None = None) -> None:
        """Pull ``image`` (joining a pull of it in flight), waiting at most ``timeout_s``; ``on_progress`` hears
        each change of its progress (on the event loop)."""
        pull = self._inflight.get(image)
        started = pull is None
        if pull is None:
            pull = self._inflight[image] = _Pull(image)
            pull.task = asyncio.create_task(self._run(pull, timeout_s))
            pull.task.add_done_callback(lambda task: task.cancelled() or task.exception())  # waiters may all have left
        assert pull.task is not None
        if on_progress is not None:
            pull.listeners.add(on_progress)
        try:
            if started:
                # The pull's budget is this caller's: it ends, leaving the in-flight table, before this caller
                # hears of it, so a pull asked for right after its timeout starts afresh instead of joining it.
                await asyncio.shield(pull.task)
            else:
                await asyncio.wait_for(asyncio.shield(pull.task), timeout_s)
        except TimeoutError:
            raise _timed_out(pull, timeout_s) from None
        finally:
            if on_progress is not None:
                pull.listeners.discard(on_progress)

    async def _run(self, pull: _Pull, timeout_s: float) -> None:
        """The pull itself, in a thread; once it fails or times out the next boot starts a fresh one. A thread
        still reading a stream that stalled stops at its next event (the Docker SDK reads a pull without a
        timeout), so a registry that stalls for good keeps that thread."""
        image = pull.tracker.image
        loop = asyncio.get_running_loop()

        def on_event(event: dict[str, Any]) -> None:
            pull.tracker.feed(event)
            loop.call_soon_threadsafe(pull.notify)

        work = asyncio.ensure_future(
            asyncio.to_thread(pull_image, self._client(), image, self.settings.auth_for(image), on_event, pull.stop)
        )
        work.add_done_callback(lambda done: done.cancelled() or done.exception())
        outcome = "failed"
        try:
            await asyncio.wait_for(asyncio.shield(work), timeout_s)
            outcome = "pulled"
        except TimeoutError:
            outcome = "timed_out"
            raise _timed_out(pull, timeout_s) from None
        finally:
            pull.stop.set()
            self._inflight.pop(image, None)
            snapshot = pull.tracker.snapshot()
            self.metrics.pulled(outcome, snapshot.bytes_done, snapshot.seconds)
