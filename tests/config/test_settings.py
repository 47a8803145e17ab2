"""The reference's environment knobs: names, defaults, derived values and errors that name the variable."""

from pathlib import Path

import pytest

from durable_rollouts.config.settings import (
    SHARED_TASK_QUEUE,
    SettingsError,
    default_sandbox_cpus,
    host_cpus,
    impossible_share_from_env,
    settings_from_env,
    staleness_from_env,
)
from durable_rollouts.contracts.session import FINISH_GRACE_S, StalenessBound


def test_defaults_match_the_reference():
    settings = settings_from_env({})
    budgets = settings.budgets
    assert (budgets.agent_budget_s, budgets.eval_timeout_s, budgets.pull_timeout_s) == (1800, 600, 600)
    assert budgets.guard_s == 1800 + 600 + 600 + 180, "the guard covers the agent, the grade and a pull"
    assert (settings.adapter_port, settings.adapter_bind_host, settings.public_host) == (18001, None, None)
    assert (settings.temporal_address, settings.task_queue) == (None, SHARED_TASK_QUEUE)
    assert (settings.cc_tarball, settings.node_tarball) == (None, None)


def test_every_knob_is_read(tmp_path):
    cc, node = tmp_path / "cc.tgz", tmp_path / "node.tar.xz"
    cc.write_bytes(b"x")
    node.write_bytes(b"x")
    settings = settings_from_env(
        {
            "SWE_TIME_BUDGET_SEC": "900",
            "SWE_EVAL_TIMEOUT_SEC": "300",
            "SHIM_BIND_HOST": "0.0.0.0",
            "SHIM_PORT": "19000",
            "SLIME_HEAD_HOST": "10.0.0.5",
            "SWE_HOST_CC_TARBALL": str(cc),
            "SWE_HOST_NODE_TARBALL": str(node),
            "SLIME_AGENT_CC_EXTRA_ARGS": "--model 'qwen 3'",
            "SLIME_AGENT_CC_EXTRA_ENVS": '{"DISABLE_TELEMETRY": 1}',
            "TEMPORAL_ADDRESS": "temporal:7233",
            "ROLLOUT_TASK_QUEUE": "rl-swe",
        }
    )
    assert settings.budgets.guard_s == 900 + 300 + 600 + 180
    assert (settings.adapter_bind_host, settings.adapter_port, settings.public_host) == ("0.0.0.0", 19000, "10.0.0.5")
    assert (settings.cc_tarball, settings.node_tarball) == (Path(cc), Path(node))
    assert settings.claude_extra_args == ["--model", "qwen 3"] and settings.claude_extra_env == {
        "DISABLE_TELEMETRY": "1"
    }
    assert settings.task_queue == "rl-swe"
    assert settings.temporal_address is None, (
        "the connection settings are temporal_connection's (envconfig): the address there"
    )


def test_an_explicit_guard_wins():
    assert settings_from_env({"SWE_GENERATE_GUARD_SEC": "60"}).budgets.guard_s == 60


@pytest.mark.parametrize(
    "env, variable",
    [
        ({"SWE_TIME_BUDGET_SEC": "half an hour"}, "SWE_TIME_BUDGET_SEC"),
        ({"SWE_EVAL_TIMEOUT_SEC": "-5"}, "SWE_EVAL_TIMEOUT_SEC"),
        ({"SHIM_PORT": "80a"}, "SHIM_PORT"),
        ({"SHIM_PORT": "99999"}, "SHIM_PORT"),
        ({"ROLLOUT_AGENT_SLOTS": "0"}, "ROLLOUT_AGENT_SLOTS"),
        ({"ROLLOUT_REAP_INTERVAL_S": "-1"}, "ROLLOUT_REAP_INTERVAL_S"),
        ({"SLIME_AGENT_CC_EXTRA_ENVS": "{"}, "SLIME_AGENT_CC_EXTRA_ENVS"),
        ({"SLIME_AGENT_CC_EXTRA_ENVS": "[1]"}, "SLIME_AGENT_CC_EXTRA_ENVS"),
        ({"SWE_HOST_CC_TARBALL": "/no/such/claude-code.tgz"}, "SWE_HOST_CC_TARBALL"),
        ({"SWE_HOST_NODE_TARBALL": "/no/such/node.tar.xz"}, "SWE_HOST_NODE_TARBALL"),
        ({"ROLLOUT_METRICS_ADDRESS": "9464"}, "ROLLOUT_METRICS_ADDRESS"),
        ({"ROLLOUT_METRICS_ADDRESS": "localhost:http"}, "ROLLOUT_METRICS_ADDRESS"),
        ({"ROLLOUT_METRICS_ADDRESS": "0.0.0.0:0"}, "ROLLOUT_METRICS_ADDRESS"),
        ({"ROLLOUT_METRICS_ADDRESS": "::1:9464"}, "ROLLOUT_METRICS_ADDRESS"),
    ],
)
def test_bad_values_name_the_variable(env, variable):
    with pytest.raises(SettingsError, match=f"^{variable}:"):
        settings_from_env(env)


def test_a_node_tarball_alone_is_refused(tmp_path):
    node = tmp_path / "node.tar.xz"
    node.write_bytes(b"x")
    with pytest.raises(SettingsError, match="^SWE_HOST_NODE_TARBALL: set without SWE_HOST_CC_TARBALL"):
        settings_from_env({"SWE_HOST_NODE_TARBALL": str(node)})


def test_sandbox_limits_default_to_a_share_of_the_host_per_agent_slot():
    settings = settings_from_env({})
    assert (settings.sandbox_cpus, settings.sandbox_memory_bytes, settings.sandbox_disk_bytes) == (
        None,
        4 << 30,
        10 << 30,
    )
    assert settings.sandbox_cpu_limit == default_sandbox_cpus(8)
    assert [default_sandbox_cpus(slots, cpus=2) for slots in (1, 2, 8)] == [2.0, 1.0, 1.0]
    assert [default_sandbox_cpus(slots, cpus=64) for slots in (8, 24, 128)] == [8.0, 2.67, 1.0]
    assert (
        settings_from_env({"ROLLOUT_AGENT_SLOTS": "1"}).sandbox_cpu_limit
        == default_sandbox_cpus(1)
        == float(host_cpus())
    )


def test_sandbox_limits_are_read_with_units():
    settings = settings_from_env(
        {"ROLLOUT_SANDBOX_CPUS": "0.5", "ROLLOUT_SANDBOX_MEMORY_BYTES": "512M", "ROLLOUT_SANDBOX_DISK_BYTES": "20GiB"}
    )
    assert (settings.sandbox_cpu_limit, settings.sandbox_memory_bytes, settings.sandbox_disk_bytes) == (
        0.5,
        512 << 20,
        20 << 30,
    )
    assert settings_from_env({"ROLLOUT_SANDBOX_DISK_BYTES": "0"}).sandbox_disk_bytes == 0
    assert settings_from_env({"ROLLOUT_SANDBOX_MEMORY_BYTES": "1073741824"}).sandbox_memory_bytes == 1 << 30


@pytest.mark.parametrize(
    "env, variable",
    [
        ({"ROLLOUT_SANDBOX_CPUS": "two"}, "ROLLOUT_SANDBOX_CPUS"),
        ({"ROLLOUT_SANDBOX_CPUS": "0"}, "ROLLOUT_SANDBOX_CPUS"),
        ({"ROLLOUT_SANDBOX_CPUS": str(host_cpus() + 1)}, "ROLLOUT_SANDBOX_CPUS"),
        ({"ROLLOUT_SANDBOX_MEMORY_BYTES": "4 gigs"}, "ROLLOUT_SANDBOX_MEMORY_BYTES"),
        ({"ROLLOUT_SANDBOX_MEMORY_BYTES": "1M"}, "ROLLOUT_SANDBOX_MEMORY_BYTES"),
        ({"ROLLOUT_SANDBOX_DISK_BYTES": "1.5G"}, "ROLLOUT_SANDBOX_DISK_BYTES"),
        ({"ROLLOUT_SANDBOX_DISK_BYTES": "-1"}, "ROLLOUT_SANDBOX_DISK_BYTES"),
    ],
)
def test_bad_sandbox_limits_name_the_variable(env, variable):
    with pytest.raises(SettingsError, match=f"^{variable}:"):
        settings_from_env(env)


def test_the_staleness_bound_is_off_unless_set_and_masks_by_default():
    assert staleness_from_env({}) is None
    assert staleness_from_env({"ROLLOUT_MAX_STALENESS": "2"}) == StalenessBound(max_staleness=2, policy="mask")
    assert staleness_from_env({"ROLLOUT_MAX_STALENESS": "0", "ROLLOUT_STALENESS_POLICY": "drop"}) == StalenessBound(
        max_staleness=0, policy="drop"
    )
    for env, name in [
        ({"ROLLOUT_MAX_STALENESS": "two"}, "ROLLOUT_MAX_STALENESS"),
        ({"ROLLOUT_MAX_STALENESS": "-1"}, "ROLLOUT_MAX_STALENESS"),
        ({"ROLLOUT_MAX_STALENESS": "1", "ROLLOUT_STALENESS_POLICY": "discard"}, "ROLLOUT_STALENESS_POLICY"),
    ]:
        with pytest.raises(SettingsError, match=name):
            staleness_from_env(env)


def test_the_finish_bound_defaults_to_a_few_seconds_and_is_read_in_seconds():
    assert settings_from_env({}).finish_grace_s == FINISH_GRACE_S == 5.0
    assert settings_from_env({"ROLLOUT_FINISH_GRACE_S": "2.5"}).finish_grace_s == 2.5
    assert settings_from_env({"ROLLOUT_FINISH_GRACE_S": "0"}).finish_grace_s == 0.0
    for raw in ("-1", "soon", "inf", "nan", "61"):
        with pytest.raises(SettingsError, match="^ROLLOUT_FINISH_GRACE_S:"):
            settings_from_env({"ROLLOUT_FINISH_GRACE_S": raw})


def test_grading_is_offline_unless_turned_off_and_a_bad_flag_is_named():
    assert (settings_from_env({}).grading_offline, settings_from_env({}).offline_tools) == (True, True)
    settings = settings_from_env({"ROLLOUT_GRADING_OFFLINE": "0", "ROLLOUT_OFFLINE_TOOLS": "False"})
    assert (settings.grading_offline, settings.offline_tools) == (False, False)
    assert settings_from_env({"ROLLOUT_GRADING_OFFLINE": "yes"}).grading_offline
    with pytest.raises(SettingsError, match="ROLLOUT_OFFLINE_TOOLS: expected 1 or 0"):
        settings_from_env({"ROLLOUT_OFFLINE_TOOLS": "maybe"})


def test_metrics_are_off_unless_an_address_is_set():
    assert settings_from_env({}).metrics_address is None
    assert settings_from_env({"ROLLOUT_METRICS_ADDRESS": " "}).metrics_address is None
    assert settings_from_env({"ROLLOUT_METRICS_ADDRESS": "0.0.0.0:9464"}).metrics_address == "0.0.0.0:9464"
    assert settings_from_env({"ROLLOUT_METRICS_ADDRESS": "[::1]:9464"}).metrics_address == "[::1]:9464"


def test_the_impossible_share_is_off_unless_set_and_a_bad_share_is_named():
    assert impossible_share_from_env({}) == 0.0
    assert impossible_share_from_env({"ROLLOUT_IMPOSSIBLE_SHARE": "0.05"}) == 0.05
    for value in ("1.5", "-0.1", "five"):
        with pytest.raises(SettingsError, match="^ROLLOUT_IMPOSSIBLE_SHARE:"):
            impossible_share_from_env({"ROLLOUT_IMPOSSIBLE_SHARE": value})


def test_image_settings_come_from_the_environment():
    images = settings_from_env(
        {
            "ROLLOUT_PULL_POLICY": "always",
            "ROLLOUT_IMAGE_MIRRORS": "swebench=mirror.local:5000/swebench",
            "ROLLOUT_REGISTRY": "mirror.local:5000",
            "ROLLOUT_REGISTRY_USERNAME": "u",
            "ROLLOUT_REGISTRY_PASSWORD": "s3cr3t",
            "ROLLOUT_IMAGE_CACHE_BYTES": "200G",
        }
    ).images
    assert (images.pull_policy, images.cache_bytes) == ("always", 200 << 30)
    assert (
        images.local_name("swebench/sweb.eval.x86_64.a_1776_b-1")
        == "mirror.local:5000/swebench/sweb.eval.x86_64.a_1776_b-1:latest"
    )
    assert (
        images.auth_for("mirror.local:5000/x:1") == {"username": "u", "password": "s3cr3t"}
        and images.auth_for("ghcr.io/x:1") is None
    )
    assert "s3cr3t" not in repr(images), "the password stays out of logs"
    assert settings_from_env({}).images.pull_policy == "missing"
    for spelled, host in (
        ("https://Mirror.local:5000/", "mirror.local:5000"),
        ("https://index.docker.io/v1/", "docker.io"),
    ):
        env = {"ROLLOUT_REGISTRY": spelled, "ROLLOUT_REGISTRY_USERNAME": "u", "ROLLOUT_REGISTRY_PASSWORD": "p"}
        credentials = settings_from_env(env).images.credentials
        assert credentials is not None and credentials.registry == host, (
            "a URL or Docker Hub's other names read as the image names spell the host"
        )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"ROLLOUT_PULL_POLICY": "sometimes"}, "ROLLOUT_PULL_POLICY: one of missing, always, never"),
        ({"ROLLOUT_IMAGE_MIRRORS": "swebench"}, "ROLLOUT_IMAGE_MIRRORS: rule 1"),
        (
            {"ROLLOUT_REGISTRY": "mirror.local:5000", "ROLLOUT_REGISTRY_USERNAME": "u"},
            "ROLLOUT_REGISTRY_PASSWORD: not set",
        ),
        ({"ROLLOUT_REGISTRY_USERNAME": "u", "ROLLOUT_REGISTRY_PASSWORD": "p"}, "ROLLOUT_REGISTRY: not set"),
        ({"ROLLOUT_REGISTRY_PASSWORD": "p"}, "ROLLOUT_REGISTRY: not set"),
        (
            {"ROLLOUT_REGISTRY": "https:///v2", "ROLLOUT_REGISTRY_USERNAME": "u", "ROLLOUT_REGISTRY_PASSWORD": "p"},
            "ROLLOUT_REGISTRY: Value error",
        ),
        ({"ROLLOUT_PULL_TIMEOUT_S": "0"}, "ROLLOUT_PULL_TIMEOUT_S: must be positive"),
    ],
)
def test_a_bad_image_setting_is_named(env, named):
    with pytest.raises(SettingsError, match=named):
        settings_from_env(env)
