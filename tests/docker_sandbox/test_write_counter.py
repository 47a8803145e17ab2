"""``WriteCounter`` against real containers: what their processes write, exec'd or not, alive or reaped."""

from __future__ import annotations

import contextlib
import os
import uuid

import docker
import docker.errors
import pytest

from durable_rollouts.docker_sandbox.container_layout import BASE_IMAGE, LABEL_PREFIX
from durable_rollouts.docker_sandbox.engine_exec import EngineEndpoint, exec_output
from durable_rollouts.docker_sandbox.write_counter import WriteCounter

MB = 1_000_000


@pytest.fixture
def container(task_images):
    client = docker.from_env()
    made = client.containers.run(
        BASE_IMAGE,
        ["sleep", "300"],
        detach=True,
        labels={f"{LABEL_PREFIX}.test": f"write-counter-{uuid.uuid4().hex[:8]}"},
    )
    made.reload()
    yield made
    with contextlib.suppress(docker.errors.NotFound):
        made.remove(force=True)


async def run(container, script: str) -> None:
    code, output = await exec_output(
        EngineEndpoint.from_env(), container.id, ["bash", "-c", script], user="root", cwd="/tmp", env=None
    )
    assert code == 0, output


async def test_bytes_written_by_exec_d_and_by_background_processes_are_counted_and_never_go_back(container):
    counter = WriteCounter.for_container(container.id, container.attrs["State"]["Pid"])
    assert counter is not None
    start = counter.read()
    await run(container, "head -c 20000000 /dev/urandom > /tmp/a.bin")
    after_exec = counter.read()
    assert after_exec - start >= 20 * MB, "an exec'd writer, reaped by the shim"
    await run(container, "(head -c 10000000 /dev/urandom > /root/b.bin; sleep 60) >/dev/null 2>&1 & sleep 1")
    after_background = counter.read()
    assert after_background - after_exec >= 10 * MB, "a live writer inside the container's cgroup"
    await run(container, "rm /tmp/a.bin /root/b.bin")
    assert counter.read() >= after_background


def test_a_process_outside_the_container_or_a_stopped_container_has_no_counter(container):
    assert WriteCounter.for_container(container.id, os.getpid()) is None
    assert WriteCounter.for_container(container.id, 0) is None
    assert WriteCounter.for_container("0" * 64, container.attrs["State"]["Pid"]) is None
