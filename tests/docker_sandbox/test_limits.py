"""A task's resource request meets the worker's per-sandbox caps: what the sandbox boots with, on the real engine."""

from __future__ import annotations

import uuid

import docker
import pytest
import pytest_asyncio

from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.contracts.tasks import TaskResources
from durable_rollouts.docker_sandbox.limits import SandboxLimits, SandboxSettings, task_limits
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes

CAPS = SandboxLimits(cpus=2.0, memory_bytes=4 << 30, pids=512, disk_bytes=10 << 30)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (None, CAPS),
        (TaskResources(), CAPS),
        (
            TaskResources(cpus=1, memory_bytes=1 << 30, disk_bytes=2 << 30),
            CAPS.model_copy(update={"cpus": 1.0, "memory_bytes": 1 << 30, "disk_bytes": 2 << 30}),
        ),
        (TaskResources(cpus=8, memory_bytes=64 << 30, disk_bytes=100 << 30), CAPS),
        (TaskResources(memory_bytes=1 << 20), CAPS.model_copy(update={"memory_bytes": 64 << 20})),
    ],
)
def test_a_task_lowers_its_limits_but_never_past_the_caps(resources, expected):
    assert task_limits(CAPS, resources) == expected


def test_an_unbounded_disk_cap_takes_the_tasks_storage():
    unbounded = CAPS.model_copy(update={"disk_bytes": 0})
    assert task_limits(unbounded, TaskResources(disk_bytes=3 << 30)).disk_bytes == 3 << 30
    assert task_limits(unbounded, TaskResources(cpus=1)).disk_bytes == 0


@pytest_asyncio.fixture(loop_scope="session")
async def prefix(reap_prefix):
    value = f"pytest-limits-{uuid.uuid4().hex[:8]}"
    yield value
    await reap_prefix(value)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_harbor_task_boots_with_its_own_limits_and_a_git_baseline(prefix, harbor_tasks):
    """The example asks for 1 CPU, 1 GiB and 2 GiB of disk; its /app is no repository in the image, so the boot
    makes it one whose baseline commit holds the image's files and leaves nothing to diff."""
    task = harbor_tasks["rollouts/temperature-reward-txt"]
    sandboxes = DockerSandboxes(SandboxSettings(lifetime_s=600, limits=CAPS))
    assert sandboxes.limits_for(task) == CAPS.model_copy(
        update={"cpus": 1.0, "memory_bytes": 1 << 30, "disk_bytes": 2 << 30}
    )
    handle = await sandboxes.boot(SandboxRequest(task=task, workflow_id=f"{prefix}-boot", attempt=0))
    try:
        host = docker.from_env().containers.get(handle.container_id).attrs["HostConfig"]
        assert (host["NanoCpus"], host["Memory"]) == (1_000_000_000, 1 << 30)
        log = await sandboxes.exec(handle, "git log --format=%s && git ls-files && git status --porcelain")
        assert log.output.split() == ["baseline", "convert.py", "??", "PROBLEM_STATEMENT.md"], log.output
        assert (await sandboxes.capture_diff(handle)).diff == "", "the problem statement is never part of the patch"
        await sandboxes.exec(handle, "echo '# note' >>convert.py")
        assert "+# note" in (await sandboxes.capture_diff(handle)).diff
    finally:
        await sandboxes.destroy(handle)
