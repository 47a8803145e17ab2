"""Where Temporal's large payloads go: an S3-compatible bucket, or this machine's payload folder.

``ROLLOUT_PAYLOAD_BUCKET`` names the bucket; unset, large payloads go to the folder
``ROLLOUT_PAYLOAD_DIR`` (default ``results/payloads`` in the checkout), which only processes on this
machine can read: the single-machine default. For the bucket the rest are the standard AWS names
(``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``, unset for AWS itself; ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, unset for boto's own chain of profiles and roles; ``AWS_REGION``, else
``AWS_DEFAULT_REGION``, default ``us-east-1``) plus the payload sizes: ``ROLLOUT_PAYLOAD_THRESHOLD_BYTES``
(default 256 KiB: a payload this size or larger goes to the bucket and history keeps a reference) and
``ROLLOUT_PAYLOAD_MAX_BYTES`` (default 50 MiB, at least 32 MiB: a larger one is refused), for the folder too. A bad
value is a ``SettingsError`` naming the variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from durable_rollouts.config.settings import SettingsError, _byte_count
from durable_rollouts.contracts.payload_budget import MIN_PAYLOAD_CAP_BYTES
from durable_rollouts.paths import PROJECT_ROOT

BUCKET_ENV = "ROLLOUT_PAYLOAD_BUCKET"
FOLDER_ENV = "ROLLOUT_PAYLOAD_DIR"
DEFAULT_FOLDER = PROJECT_ROOT / "results" / "payloads"
ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_ENVS = ("AWS_REGION", "AWS_DEFAULT_REGION")
KEY_ENVS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
THRESHOLD_ENV = "ROLLOUT_PAYLOAD_THRESHOLD_BYTES"
MAX_ENV = "ROLLOUT_PAYLOAD_MAX_BYTES"
DEFAULT_THRESHOLD = 256 << 10
DEFAULT_MAX = 50 << 20
# S3's bucket naming rule (3 to 63 lowercase letters, digits, dots and hyphens).
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


class PayloadStoreSettings(BaseModel):
    bucket: str
    endpoint_url: str | None = None
    endpoint_env: str = ENDPOINT_ENVS[0]
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: str | None = None
    threshold_bytes: int = Field(DEFAULT_THRESHOLD, ge=0)
    max_bytes: int = Field(DEFAULT_MAX, ge=1)

    @property
    def where(self) -> str:
        return f"s3://{self.bucket} at {self.endpoint_url or 'AWS S3'}"


class PayloadFolderSettings(BaseModel):
    """The payload folder of one machine: every process reading a payload must see the same ``root``."""

    root: Path
    threshold_bytes: int = Field(DEFAULT_THRESHOLD, ge=0)
    max_bytes: int = Field(DEFAULT_MAX, ge=1)

    @property
    def where(self) -> str:
        return f"the payload folder {self.root}"


PayloadStorageSettings = PayloadStoreSettings | PayloadFolderSettings


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    for name in names:
        if env.get(name, "").strip():
            return name, env[name].strip()
    return None


def payload_store_from_env(env: Mapping[str, str] = os.environ) -> PayloadStorageSettings:
    """The bucket's settings, or the payload folder's when ``ROLLOUT_PAYLOAD_BUCKET`` is unset."""
    sizes = _sizes(env)
    bucket = env.get(BUCKET_ENV, "").strip()
    if not bucket:
        folder = env.get(FOLDER_ENV, "").strip()
        return PayloadFolderSettings(root=Path(folder).expanduser().resolve() if folder else DEFAULT_FOLDER, **sizes)
    if not _BUCKET_NAME.fullmatch(bucket):
        raise SettingsError(
            f"{BUCKET_ENV}: not an S3 bucket name (3-63 lowercase letters, digits, dots, hyphens), got {bucket!r}"
        )
    values: dict = {"bucket": bucket}
    endpoint = _first(env, ENDPOINT_ENVS)
    if endpoint is not None:
        name, url = endpoint
        if not re.fullmatch(r"https?://[^/\s]+/?", url):
            raise SettingsError(f"{name}: expected http(s)://host[:port], got {url!r}")
        values.update(endpoint_url=url, endpoint_env=name)
    region = _first(env, REGION_ENVS)
    if region is not None:
        values["region"] = region[1]
    keys = [env.get(name, "").strip() for name in KEY_ENVS]
    if any(keys) and not all(keys):
        missing, given = KEY_ENVS if not keys[0] else KEY_ENVS[::-1]
        raise SettingsError(f"{missing}: must be set with {given}")
    if all(keys):
        values.update(access_key_id=keys[0], secret_access_key=keys[1])
    return PayloadStoreSettings(**values, **sizes)


def _sizes(env: Mapping[str, str]) -> dict[str, int]:
    threshold = _byte_count(env, THRESHOLD_ENV, DEFAULT_THRESHOLD)
    cap = _byte_count(env, MAX_ENV, DEFAULT_MAX)
    if cap < max(threshold, 1):
        raise SettingsError(f"{MAX_ENV}: must be at least {THRESHOLD_ENV} ({threshold}), got {cap}")
    if cap < MIN_PAYLOAD_CAP_BYTES:
        raise SettingsError(
            f"{MAX_ENV}: must be at least {MIN_PAYLOAD_CAP_BYTES >> 20}M (a workflow's result may be that large), got "
            f"{cap}"
        )
    return {"threshold_bytes": threshold, "max_bytes": cap}
