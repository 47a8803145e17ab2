"""``DockerSandboxes``: the one object through which a process boots, drives and removes its sandboxes.

It holds the Docker client (made on first use unless given), the boot settings and limits, the image
puller (one pull per image in flight), the image cache (task images under a disk budget), and the boot
slots (at most ``max_concurrent_boots`` boots at once); nothing about sandboxes lives at module level. A worker builds
one and hands it to every activity face that touches a container; a test builds its own with the
settings it needs. The operations come from the modules that define them: commands, files, detached
commands, the workspace diff and the container lifecycle.
"""

from __future__ import annotations

import asyncio

import docker

from durable_rollouts.docker_sandbox.container_layout import BASE_IMAGE
from durable_rollouts.docker_sandbox.image_cache import ImageCache
from durable_rollouts.docker_sandbox.image_metrics import ImageMetrics
from durable_rollouts.docker_sandbox.image_pull import ImagePuller
from durable_rollouts.docker_sandbox.lifecycle import ContainerLifecycle
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.meters import Meter

MAX_CONCURRENT_BOOTS = 16


class DockerSandboxes(ContainerLifecycle):
    def __init__(
        self,
        settings: SandboxSettings | None = None,
        client: docker.DockerClient | None = None,
        max_concurrent_boots: int = MAX_CONCURRENT_BOOTS,
        meter: Meter | None = None,
    ):
        super().__init__(client)
        self.settings = settings or SandboxSettings()
        self.boot_slots = asyncio.Semaphore(max_concurrent_boots)
        metrics = ImageMetrics(meter)
        self.images = ImagePuller(lambda: self.client, self.settings.images, metrics)
        self.image_cache = ImageCache(
            lambda: self.client, self.settings.images.cache_bytes, metrics, protected=frozenset({BASE_IMAGE})
        )
