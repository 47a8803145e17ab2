from __future__ import annotations

from pathlib import Path

import pytest

from durable_rollouts.config.payload_store import (
    DEFAULT_FOLDER,
    DEFAULT_MAX,
    DEFAULT_THRESHOLD,
    PayloadFolderSettings,
    payload_store_from_env,
)
from durable_rollouts.config.settings import SettingsError


def test_no_bucket_means_this_machines_payload_folder(tmp_path):
    default = payload_store_from_env({"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:8333"})
    assert default == PayloadFolderSettings(
        root=DEFAULT_FOLDER, threshold_bytes=DEFAULT_THRESHOLD, max_bytes=DEFAULT_MAX
    )
    chosen = payload_store_from_env(
        {"ROLLOUT_PAYLOAD_DIR": str(tmp_path / "p"), "ROLLOUT_PAYLOAD_THRESHOLD_BYTES": "1K"}
    )
    assert chosen == PayloadFolderSettings(root=Path(tmp_path / "p"), threshold_bytes=1024, max_bytes=DEFAULT_MAX)


def test_the_standard_aws_names_and_the_defaults():
    store = payload_store_from_env(
        {
            "ROLLOUT_PAYLOAD_BUCKET": "rollouts",
            "AWS_ENDPOINT_URL": "http://10.0.0.5:8333",
            "AWS_DEFAULT_REGION": "eu-west-1",
            "AWS_ACCESS_KEY_ID": "ak",
            "AWS_SECRET_ACCESS_KEY": "sk",
        }
    )
    assert store is not None
    assert (store.bucket, store.endpoint_url, store.endpoint_env, store.region) == (
        "rollouts",
        "http://10.0.0.5:8333",
        "AWS_ENDPOINT_URL",
        "eu-west-1",
    )
    assert (store.access_key_id, store.secret_access_key) == ("ak", "sk")
    assert (store.threshold_bytes, store.max_bytes) == (DEFAULT_THRESHOLD, DEFAULT_MAX)


def test_the_s3_endpoint_and_aws_region_take_precedence_and_sizes_take_units():
    store = payload_store_from_env(
        {
            "ROLLOUT_PAYLOAD_BUCKET": "rollouts",
            "AWS_ENDPOINT_URL_S3": "https://s3.example:9000",
            "AWS_ENDPOINT_URL": "http://other:1",
            "AWS_REGION": "us-west-2",
            "AWS_DEFAULT_REGION": "eu-west-1",
            "ROLLOUT_PAYLOAD_THRESHOLD_BYTES": "128K",
            "ROLLOUT_PAYLOAD_MAX_BYTES": "1G",
        }
    )
    assert store is not None
    assert (store.endpoint_url, store.endpoint_env, store.region) == (
        "https://s3.example:9000",
        "AWS_ENDPOINT_URL_S3",
        "us-west-2",
    )
    assert (store.threshold_bytes, store.max_bytes) == (128 << 10, 1 << 30)
    assert store.access_key_id is None


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"ROLLOUT_PAYLOAD_BUCKET": "Has_Capitals"}, "ROLLOUT_PAYLOAD_BUCKET"),
        ({"ROLLOUT_PAYLOAD_BUCKET": "ok-bucket", "AWS_ENDPOINT_URL_S3": "127.0.0.1:8333"}, "AWS_ENDPOINT_URL_S3"),
        ({"ROLLOUT_PAYLOAD_BUCKET": "ok-bucket", "AWS_ACCESS_KEY_ID": "ak"}, "AWS_SECRET_ACCESS_KEY"),
        ({"ROLLOUT_PAYLOAD_BUCKET": "ok-bucket", "AWS_SECRET_ACCESS_KEY": "sk"}, "AWS_ACCESS_KEY_ID"),
        (
            {"ROLLOUT_PAYLOAD_BUCKET": "ok-bucket", "ROLLOUT_PAYLOAD_THRESHOLD_BYTES": "lots"},
            "ROLLOUT_PAYLOAD_THRESHOLD_BYTES",
        ),
        ({"ROLLOUT_PAYLOAD_BUCKET": "ok-bucket", "ROLLOUT_PAYLOAD_MAX_BYTES": "1K"}, "ROLLOUT_PAYLOAD_MAX_BYTES"),
        ({"ROLLOUT_PAYLOAD_MAX_BYTES": "16M"}, "ROLLOUT_PAYLOAD_MAX_BYTES"),
    ],
)
def test_a_bad_value_names_its_variable(env, setting):
    with pytest.raises(SettingsError, match=f"^{setting}:"):
        payload_store_from_env(env)
