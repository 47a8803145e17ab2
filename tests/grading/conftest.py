"""Fixtures of the grading tests that grade on the real engine."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def prefix(request: pytest.FixtureRequest, task_images, reap_prefix) -> AsyncIterator[str]:
    """Workflow-id prefix of the module's grading containers (the example task images built); every grading
    must destroy its sandbox, and any survivor fails the module's teardown and is reaped."""
    module = request.module.__name__.rpartition(".")[2].removeprefix("test_").replace("_", "-")
    value = f"pytest-{module}-{uuid.uuid4().hex[:8]}"
    yield value
    assert await reap_prefix(value) == [], "grading must destroy its sandboxes"
