"""Where the Temporal connection settings come from (``temporalio.envconfig``) and what a bad one says; no server."""

from __future__ import annotations

import asyncio

import pytest

from durable_rollouts.trainer_client import temporal_connection
from durable_rollouts.trainer_client.temporal_connection import (
    DEFAULT_ADDRESS,
    ConnectionSettingsError,
    TemporalUnreachable,
    connect,
    target_from_env,
)


def test_without_settings_the_address_is_the_default_and_the_connection_plain():
    target = target_from_env({})
    assert (target.address, target.namespace, target.secured) == (DEFAULT_ADDRESS, "default", "plain")
    assert "tls" not in target.config and "api_key" not in target.config


def test_the_variables_the_temporal_cli_reads_set_address_namespace_tls_and_api_key(tmp_path):
    ca, cert, key = (tmp_path / name for name in ("ca.pem", "client.pem", "client.key"))
    for path in (ca, cert, key):
        path.write_text(f"-- {path.name} --")
    env = {
        "TEMPORAL_ADDRESS": "temporal.example:7233",
        "TEMPORAL_NAMESPACE": "rl",
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca),
        "TEMPORAL_TLS_SERVER_NAME": "frontend",
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(key),
        "TEMPORAL_GRPC_META_X_TEAM": "rollouts",
    }
    target = target_from_env(env)
    tls = target.config["tls"]
    assert (target.address, target.namespace, target.secured) == ("temporal.example:7233", "rl", "mTLS")
    assert (tls.domain, tls.server_root_ca_cert, tls.client_cert, tls.client_private_key) == (
        "frontend",
        b"-- ca.pem --",
        b"-- client.pem --",
        b"-- client.key --",
    )
    assert target.config["rpc_metadata"] == {"x-team": "rollouts"}
    assert target_from_env({"TEMPORAL_API_KEY": "k"}).secured == "TLS + API key", (
        "an API key turns TLS on, as the SDK does"
    )


def test_a_profile_of_the_config_file_is_read_and_the_variables_override_it(tmp_path):
    config = tmp_path / "temporal.toml"
    config.write_text(
        '[profile.cloud]\naddress = "ns.a1b2.tmprl.cloud:7233"\nnamespace = "ns.a1b2"\napi_key = "secret"\n'
    )
    env = {"TEMPORAL_CONFIG_FILE": str(config), "TEMPORAL_PROFILE": "cloud"}
    target = target_from_env(env)
    assert (target.address, target.namespace, target.config["api_key"], target.secured) == (
        "ns.a1b2.tmprl.cloud:7233",
        "ns.a1b2",
        "secret",
        "TLS + API key",
    )
    assert target_from_env({**env, "TEMPORAL_NAMESPACE": "other"}).namespace == "other"


def test_an_explicit_address_replaces_only_the_address(tmp_path):
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.default]\naddress = "far:7233"\nnamespace = "rl"\napi_key = "k"\n')
    target = target_from_env({"TEMPORAL_CONFIG_FILE": str(config)}, address="127.0.0.1:9999")
    assert (target.address, target.namespace, target.config["api_key"]) == ("127.0.0.1:9999", "rl", "k")


@pytest.mark.parametrize(
    ("toml", "env", "says"),
    [
        ("[profile.default\n", {}, "TOML parse error"),
        (
            '[profile.default]\naddress = "a:1"\n',
            {"TEMPORAL_PROFILE": "prod"},
            "profile prod): Profile 'prod' not found",
        ),
        ("", {"TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/nonexistent/ca.pem"}, "cannot read /nonexistent/ca.pem"),
    ],
    ids=["bad-toml", "missing-profile", "missing-ca"],
)
def test_settings_that_cannot_be_used_name_what_is_wrong(tmp_path, toml, env, says):
    config = tmp_path / "temporal.toml"
    config.write_text(toml)
    with pytest.raises(ConnectionSettingsError, match="^.*" + says.replace("(", r"\(").replace(")", r"\)")) as caught:
        target_from_env({"TEMPORAL_CONFIG_FILE": str(config), **env})
    assert "\n" not in str(caught.value)


async def test_a_server_that_never_answers_is_retried_for_the_wait_then_named_in_one_line(monkeypatch):
    """Each real attempt dials 127.0.0.1:1 (refused); the waits between them are counted, not timed."""
    slept: list[float] = []

    async def counted_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(temporal_connection, "sleep", counted_sleep)
    clock = iter(range(0, 100, 2))
    monkeypatch.setattr(temporal_connection, "monotonic", lambda: float(next(clock)))
    target = target_from_env({"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    with pytest.raises(TemporalUnreachable) as caught:
        await asyncio.wait_for(connect(target, server_wait_s=7.0), 30)
    assert slept == [2.0, 2.0, 1.0], (
        "retried every RETRY_INTERVAL_S while the wait lasted, the last sleep what was left of it"
    )
    assert temporal_connection.RETRY_INTERVAL_S == 2.0
    assert str(caught.value).startswith("cannot reach Temporal at 127.0.0.1:1 (waited 8 s)")
    assert "Connection refused" in str(caught.value) and "\n" not in str(caught.value)


async def test_a_wait_shorter_than_one_retry_is_still_waited(monkeypatch):
    slept: list[float] = []

    async def counted_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(temporal_connection, "sleep", counted_sleep)
    clock = iter([0.0, 0.5, 3.0])
    monkeypatch.setattr(temporal_connection, "monotonic", lambda: next(clock))
    with pytest.raises(TemporalUnreachable):
        await asyncio.wait_for(connect(target_from_env({"TEMPORAL_ADDRESS": "127.0.0.1:1"}), server_wait_s=1.5), 30)
    assert slept == [1.0]


async def test_an_address_that_is_no_address_is_a_settings_error_not_a_wait():
    with pytest.raises(ConnectionSettingsError, match="^Temporal address 'not a host': ValueError: .*invalid"):
        await asyncio.wait_for(connect(target_from_env({"TEMPORAL_ADDRESS": "not a host"}), server_wait_s=60), 30)


def test_a_config_file_that_is_not_there_or_a_certificate_that_is_a_folder_is_named(tmp_path):
    with pytest.raises(ConnectionSettingsError, match="^TEMPORAL_CONFIG_FILE: no such file '/no/such/temporal.toml'$"):
        target_from_env({"TEMPORAL_CONFIG_FILE": "/no/such/temporal.toml"})
    with pytest.raises(
        ConnectionSettingsError, match=f"^Temporal TLS settings: cannot read {tmp_path}: Is a directory$"
    ):
        target_from_env(
            {
                "TEMPORAL_ADDRESS": "127.0.0.1:7233",
                "TEMPORAL_TLS": "true",
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(tmp_path),
            }
        )
