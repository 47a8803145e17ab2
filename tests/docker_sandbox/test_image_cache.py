"""What the image cache knows the engine holds, listed from the real engine."""

from __future__ import annotations

import uuid

import docker
import docker.errors
import docker.utils
import pytest

from durable_rollouts.docker_sandbox.container_layout import BASE_IMAGE, LABEL_PREFIX
from durable_rollouts.docker_sandbox.image_cache import ImageCache
from durable_rollouts.docker_sandbox.image_metrics import ImageMetrics

pytestmark = pytest.mark.integration


class RemovalAfterListing(docker.APIClient):
    """The engine's API, where another process removes ``doomed`` right after each image listing answers."""

    def __init__(self, doomed: str):
        super().__init__(version="auto", **docker.utils.kwargs_from_env())
        self.doomed = doomed

    def images(self, *args, **kwargs):
        listed = super().images(*args, **kwargs)
        try:
            self.remove_image(self.doomed, force=True)
        except docker.errors.ImageNotFound:
            pass
        return listed


@pytest.fixture
def doomed_image():
    """An image of its own (its own ID, not one more tag of another), removed afterwards if a test has not."""
    client = docker.from_env()
    try:
        container = client.containers.create(BASE_IMAGE, labels={f"{LABEL_PREFIX}.owner": "pytest-image-cache"})
    except docker.errors.DockerException as error:
        pytest.skip(f"no Docker engine with {BASE_IMAGE}: {error}")
    name = f"pytest-doomed:{uuid.uuid4().hex[:8]}"
    try:
        image = container.commit(
            repository=name.split(":")[0], tag=name.split(":")[1], changes=[f"LABEL doomed={name}"]
        )
    finally:
        container.remove(force=True)
    yield name, image.id
    try:
        client.images.remove(image.id, force=True)
    except docker.errors.ImageNotFound:
        pass


def test_refresh_holds_every_tag_the_engine_lists_under_any_spelling(doomed_image):
    name, _ = doomed_image
    cache = ImageCache(docker.from_env, budget_bytes=0, metrics=ImageMetrics())
    cache.refresh()
    assert cache.holds(name) and cache.holds(f"docker.io/library/{name}")
    assert cache.holds(BASE_IMAGE)
    assert not cache.holds(f"pytest-never-built:{uuid.uuid4().hex[:8]}")


def test_an_image_removed_while_the_engine_is_listed_does_not_fail_the_refresh(doomed_image):
    """A worker refreshes at start-up while other processes (another worker's cache, an operator) remove images:
    an image gone between the listing and anything read after it must not stop the worker."""
    name, image_id = doomed_image
    client = docker.from_env()
    client.api = RemovalAfterListing(image_id)
    cache = ImageCache(lambda: client, budget_bytes=0, metrics=ImageMetrics())
    cache.refresh()
    assert cache.holds(BASE_IMAGE)
    with pytest.raises(docker.errors.ImageNotFound):
        docker.from_env().images.get(image_id)
