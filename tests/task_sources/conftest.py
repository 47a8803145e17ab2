"""Fixtures of the task-source tests that need the real Docker engine."""

from __future__ import annotations

import docker
import pytest


@pytest.fixture
def engine() -> docker.DockerClient:
    """The real engine with the offline base image; skips without them."""
    try:
        client = docker.from_env()
        client.images.get("rollout-base:bookworm")
    except docker.errors.DockerException:
        pytest.skip("no Docker engine with rollout-base:bookworm (scripts/build_base_image.sh)")
    return client
