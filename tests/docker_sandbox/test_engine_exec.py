"""``engine_exec`` against the real engine: each stream in order, exit codes, a gone container; the endpoint from the
environment."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import docker
import docker.errors
import pytest

from durable_rollouts.docker_sandbox.container_layout import BASE_IMAGE, LABEL_PREFIX
from durable_rollouts.docker_sandbox.engine_exec import EngineEndpoint, exec_output
from durable_rollouts.docker_sandbox.errors import SandboxError, SandboxGone
from tests.tls_front import NGINX, docker_tls_front, make_certificates

TEST_LABEL = f"{LABEL_PREFIX}.test"


@pytest.fixture
def container(task_images):
    client = docker.from_env()
    made = client.containers.run(
        BASE_IMAGE, ["sleep", "300"], detach=True, labels={TEST_LABEL: f"engine-exec-{uuid.uuid4().hex[:8]}"}
    )
    yield made
    with contextlib.suppress(docker.errors.NotFound):
        made.remove(force=True)


async def test_output_holds_stdout_and_stderr_each_in_order_and_the_exit_code_is_the_commands(container):
    script = (
        "for i in 1 2 3; do echo out$i; echo err$i >&2; done; sleep 0.2; head -c 200000 /dev/zero | tr '\\0' x; exit 3"
    )
    code, output = await exec_output(
        EngineEndpoint.from_env(), container.id, ["bash", "-c", script], user="root", cwd="/tmp", env=None
    )
    assert code == 3
    lines, tail = output[:30].decode().split(), output[30:]
    assert [line for line in lines if line.startswith("out")] == ["out1", "out2", "out3"]
    assert [line for line in lines if line.startswith("err")] == ["err1", "err2", "err3"]
    assert tail == b"x" * 200_000


async def test_user_workdir_and_environment_reach_the_command_verbatim(container):
    value = "a b $HOME `id` 'q' \"d\"\nline2"
    code, output = await exec_output(
        EngineEndpoint.from_env(),
        container.id,
        ["sh", "-c", 'id -u; pwd; printf %s "$SECRET"'],
        user="nobody",
        cwd="/etc",
        env={"SECRET": value},
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


def _cert_path(folder, ca, cert, key):
    """A DOCKER_CERT_PATH folder: ``ca.pem``, ``cert.pem`` and ``key.pem``, as the docker CLI and docker-py read
    them."""
    folder.mkdir()
    for name, source in (("ca.pem", ca), ("cert.pem", cert), ("key.pem", key)):
        (folder / name).write_bytes(source.read_bytes())
    return folder


@pytest.mark.skipif(NGINX is None, reason="nginx is missing: scripts/setup.sh installs nginx-light")
async def test_an_engine_behind_mutual_tls_runs_execs_and_a_wrong_ca_is_refused_naming_the_engine(
    container, tmp_path, monkeypatch
):
    """A real TLS endpoint (nginx with a test CA, demanding a client certificate) in front of the engine, reached
    through DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH as docker.from_env reads them."""
    certs = make_certificates(tmp_path / "certs", server_alt_name="IP:127.0.0.1")
    with docker_tls_front(certs, tmp_path / "nginx") as address:
        monkeypatch.setenv("DOCKER_HOST", f"tcp://{address}")
        monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
        monkeypatch.setenv(
            "DOCKER_CERT_PATH", str(_cert_path(tmp_path / "good", certs.ca, certs.client_cert, certs.client_key))
        )
        endpoint = EngineEndpoint.from_env()
        assert endpoint.base_url == f"https://{address}" and endpoint.ssl_context is not None
        code, output = await exec_output(
            endpoint, container.id, ["sh", "-c", "echo over tls; exit 4"], user="root", cwd="/", env=None
        )
        assert (code, output) == (4, b"over tls\n")
        monkeypatch.setenv(
            "DOCKER_CERT_PATH", str(_cert_path(tmp_path / "wrong", certs.other_ca, certs.client_cert, certs.client_key))
        )
        with pytest.raises(SandboxError, match=f"cannot reach the Docker engine at https://{address}.*certificate"):
            await exec_output(EngineEndpoint.from_env(), container.id, ["true"], user="root", cwd="/", env=None)


async def test_a_container_removed_under_a_running_exec_raises_sandbox_gone(container):
    """The stream is cut mid-exec; what became of the command is then the engine's to say: the container is gone."""
    running = asyncio.create_task(
        exec_output(EngineEndpoint.from_env(), container.id, ["sleep", "60"], user="root", cwd="/", env=None)
    )
    await asyncio.sleep(1)
    container.remove(force=True)
    with pytest.raises(SandboxGone):
        await asyncio.wait_for(running, 30)
