"""``engine_exec`` against the real engine: each stream in order, exit codes, a gone container; the endpoint from the environment."""

from __future__ import annotations

import contextlib
import uuid

import docker
import docker.errors
import pytest

from durable_rollouts.docker_sandbox.container_layout import BASE_IMAGE, LABEL_PREFIX
from durable_rollouts.docker_sandbox.engine_exec import EngineEndpoint, exec_output
from durable_rollouts.docker_sandbox.errors import SandboxError, SandboxGone

TEST_LABEL = f"{LABEL_PREFIX}.test"


@pytest.fixture
def container(task_images):
    client = docker.from_env()
    made = client.containers.run(BASE_IMAGE, ["sleep", "300"], detach=True, labels={TEST_LABEL: f"engine-exec-{uuid.uuid4().hex[:8]}"})
    yield made
    with contextlib.suppress(docker.errors.NotFound):
        made.remove(force=True)


async def test_output_holds_stdout_and_stderr_each_in_order_and_the_exit_code_is_the_commands(container):
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; done; sleep 0.2; head -c 200000 /dev/zero | tr '\\0' x; exit 3"
    code, output = await exec_output(EngineEndpoint.from_env(), container.id, ["bash", "-c", script], user="root", cwd="/tmp", env=None)
    assert code == 3
    lines, tail = output[:30].decode().split(), output[30:]
    assert [line for line in lines if line.startswith("out")] == ["out1", "out2", "out3"]
    assert [line for line in lines if line.startswith("err")] == ["err1", "err2", "err3"]
    assert tail == b"x" * 200_000


async def test_user_workdir_and_environment_reach_the_command_verbatim(container):
    value = "a b $HOME `id` 'q' \"d\"\nline2"
    code, output = await exec_output(
        EngineEndpoint.from_env(), container.id, ["sh", "-c", 'id -u; pwd; printf %s "$SECRET"'], user="nobody", cwd="/etc", env={"SECRET": value}
    )
    assert code == 0
    assert output.decode() == f"65534\n/etc\n{value}"


async def test_a_stopped_or_removed_container_raises_sandbox_gone(container):
    endpoint = EngineEndpoint.from_env()
    container.stop(timeout=0)
    with pytest.raises(SandboxGone):
        await exec_output(endpoint, container.id, ["true"], user="root", cwd="/", env=None)
    container.remove(force=True)
    with pytest.raises(SandboxGone):
        await exec_output(endpoint, container.id, ["true"], user="root", cwd="/", env=None)


def test_the_endpoint_is_the_one_docker_from_env_reaches(monkeypatch):
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert EngineEndpoint.from_env() == EngineEndpoint("http://docker", socket_path="/var/run/docker.sock")
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/user/1000/docker.sock")
    assert EngineEndpoint.from_env().socket_path == "/run/user/1000/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2375")
    assert EngineEndpoint.from_env() == EngineEndpoint("http://10.0.0.5:2375")


def test_an_engine_over_ssh_is_refused_naming_docker_host(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "ssh://builder@10.0.0.5")
    with pytest.raises(SandboxError, match="DOCKER_HOST='ssh://builder@10.0.0.5'"):
        EngineEndpoint.from_env()
