"""The worker, the starter and the slime drop-in reach a secured Temporal: a real TLS endpoint (nginx with a test
CA) in front of the dev server, mTLS from a ``temporal.toml`` profile and from the ``TEMPORAL_*`` variables, an
API key; a wrong CA, a missing client certificate, a wrong key and an unreachable server each end in one line."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

import slime_generate
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.trainer_client.local_services import worker_process
from durable_rollouts.trainer_client.temporal_connection import TemporalUnreachable
from tests.local_cluster import start_dev_server
from tests.tls_front import API_KEY, SERVER_NAME, Certificates, TlsFront, make_certificates, tls_front
from tests.waiting import HANG_GUARD_S

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def secured(tmp_path_factory) -> AsyncIterator[tuple[Certificates, TlsFront, Path]]:
    folder = tmp_path_factory.mktemp("tls")
    certs = make_certificates(folder / "certs")
    env = await start_dev_server()
    try:
        with tls_front(env.client.service_client.config.target_host, certs, folder / "nginx") as front:
            yield certs, front, folder
    finally:
        await env.shutdown()


def mtls_env(certs: Certificates, front: TlsFront, ca: Path | None = None) -> dict[str, str]:
    return {
        "TEMPORAL_ADDRESS": front.mtls_address,
        "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca or certs.ca),
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(certs.client_cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(certs.client_key),
    }


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any Temporal connection setting, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}, **extra}


async def starter(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(PROJECT_ROOT / "starter.py"),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), HANG_GUARD_S)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_worker_polls_and_the_starter_reads_it_through_mtls_from_a_profile_and_from_the_variables(
    secured, tmp_path
):
    certs, front, _ = secured
    profile = tmp_path / "temporal.toml"
    profile.write_text(
        f'[profile.secure]\naddress = "{front.mtls_address}"\n[profile.secure.tls]\nserver_name = "{SERVER_NAME}"\n'
        f'server_ca_cert_path = "{certs.ca}"\nclient_cert_path = "{certs.client_cert}"\nclient_key_path = '
        f'"{certs.client_key}"\n'
    )
    by_profile = clean_env(TEMPORAL_CONFIG_FILE=str(profile), TEMPORAL_PROFILE="secure", ROLLOUT_TASK_QUEUE="tls-queue")
    worker_env = clean_env(
        **mtls_env(certs, front), ROLLOUT_TASK_QUEUE="tls-queue", ROLLOUT_RESULTS_DIR=str(tmp_path / "results")
    )
    async with worker_process(
        front.mtls_address, ["--host-id", "tls-host", "--adapter-port", "0"], env=worker_env
    ) as worker:
        assert worker.returncode is None
        code, out, err = await starter(by_profile, "status")
        assert code == 0, err
        assert "rl-rollouts-host-tls-host" in out, (
            f"the worker polls through the TLS front, and status sees it there:\n{out}"
        )


async def test_the_slime_drop_in_connects_with_an_api_key_and_is_refused_without_it(secured, monkeypatch):
    certs, front, _ = secured
    base = {
        "TEMPORAL_ADDRESS": front.api_key_address,
        "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certs.ca),
    }
    for name in [k for k in os.environ if k.startswith("TEMPORAL_")]:
        monkeypatch.delenv(name)
    for name, value in {**base, "TEMPORAL_API_KEY": API_KEY, "ROLLOUT_SERVER_WAIT_S": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(slime_generate, "_clients", {})
    client = await slime_generate.temporal_client()
    assert client.namespace == "default"
    assert (await client.workflow_service.get_system_info(GetSystemInfoRequest())).server_version
    monkeypatch.setenv("TEMPORAL_API_KEY", "wrong")
    monkeypatch.setattr(slime_generate, "_clients", {})
    with pytest.raises(TemporalUnreachable, match=f"cannot reach Temporal at {front.api_key_address}"):
        await slime_generate.temporal_client()


@pytest.mark.parametrize("case", ["wrong_ca", "no_client_certificate"])
async def test_a_refused_handshake_is_one_line_naming_the_address(secured, case):
    certs, front, _ = secured
    env = mtls_env(certs, front, ca=certs.other_ca if case == "wrong_ca" else None)
    if case == "no_client_certificate":
        del env["TEMPORAL_TLS_CLIENT_CERT_PATH"], env["TEMPORAL_TLS_CLIENT_KEY_PATH"]
    code, out, err = await starter(clean_env(**env), "status")
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"starter: cannot reach Temporal at {front.mtls_address} (waited 0 s): "
    ), err
    assert "Traceback" not in err


async def test_a_missing_certificate_file_is_named_before_anything_is_dialled(secured):
    certs, front, _ = secured
    env = {**mtls_env(certs, front), "TEMPORAL_TLS_CLIENT_CERT_PATH": "/nonexistent/client.pem"}
    code, _, err = await starter(clean_env(**env), "status")
    assert (code, err.strip()) == (
        1,
        "starter: Temporal TLS settings: cannot read /nonexistent/client.pem: No such file or directory",
    )


async def test_run_waits_for_a_server_unreachable_at_start_then_says_so_in_one_line(tmp_path):
    dataset = PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl"
    env = clean_env(TEMPORAL_ADDRESS="127.0.0.1:1")
    code, _, err = await starter(env, "run", str(dataset), "--server-wait", "3", "--out", str(tmp_path / "out.jsonl"))
    lines = err.strip().splitlines()
    assert (
        code == 1 and len(lines) == 1 and lines[0].startswith("starter: cannot reach Temporal at 127.0.0.1:1 (waited ")
    ), err
    assert "(waited 0 s)" not in lines[0], "it retried before giving up"
