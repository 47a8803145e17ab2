"""The one data converter of workers, the starter and the slime drop-ins: pydantic payloads, plus Temporal's
external storage on an S3-compatible bucket when ``ROLLOUT_PAYLOAD_BUCKET`` is set (``config.payload_store``).

With a bucket, every payload of ``threshold_bytes`` or more (a workflow's or activity's input or result) is
put in the bucket by ``temporalio.contrib.aws.s3driver`` and history keeps a reference (bucket, key,
sha256); every process that reads the payload needs the same bucket, so all of them build their converter
here. A payload over ``max_bytes`` is refused with a non-retryable ``PayloadTooLarge`` error naming its size.

With no bucket there is no external storage, and that is the embedded single-machine default on purpose:
the payloads that cross Temporal today are small by construction (trajectories and logs go to the
trajectory store's folder under ``results/``, which one machine's worker and starter share anyway), so a
local-folder driver would add a second store holding nothing; and a fleet that forgot its bucket would
then write references that no other host can read, where without one an oversized payload fails loudly
at Temporal's own 2 MiB limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import aioboto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, ExternalStorage, StorageDriverClaim, StorageDriverStoreContext
from temporalio.exceptions import ApplicationError

from config.payload_store import BUCKET_ENV, KEY_ENVS, MAX_ENV, PayloadStoreSettings

# The failure type of a payload over the cap: raised by the data converter itself, under every activity face.
PAYLOAD_TOO_LARGE = "PayloadTooLarge"
# The driver's calls retry a passing fault a few times; an outage longer than that fails the
# activity, and its retry policy retries it with backoff.
_DRIVER_RETRIES = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=10, read_timeout=60)
# The start-up check fails fast: one line, exit 1.
_CHECK_RETRIES = Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=5, read_timeout=10)


class PayloadStoreUnusable(Exception):
    """The bucket cannot be used; the message is one line naming the setting to fix."""


def _client_kwargs(store: PayloadStoreSettings, config: Config) -> dict:
    return {
        "endpoint_url": store.endpoint_url,
        "region_name": store.region,
        "aws_access_key_id": store.access_key_id,
        "aws_secret_access_key": store.secret_access_key,
        "config": config,
    }


class _ClientPerCall(S3StorageDriverClient):
    """An aioboto3 client opened for each call, so the converter is a plain value: no client to close,
    usable on whichever event loop the process runs."""

    def __init__(self, store: PayloadStoreSettings) -> None:
        self._session = aioboto3.Session()
        self._kwargs = _client_kwargs(store, _DRIVER_RETRIES)
        self._region = store.region

    def describe(self) -> Mapping[str, str]:
        return {"client_region": self._region}

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        async with self._session.client("s3", **self._kwargs) as s3:
            await new_aioboto3_client(s3).put_object(bucket=bucket, key=key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        async with self._session.client("s3", **self._kwargs) as s3:
            return await new_aioboto3_client(s3).object_exists(bucket=bucket, key=key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        async with self._session.client("s3", **self._kwargs) as s3:
            return await new_aioboto3_client(s3).get_object(bucket=bucket, key=key)


class CappedS3Driver(S3StorageDriver):
    """The SDK's S3 driver, refusing a payload over ``max_bytes`` with a non-retryable error that names its size
    (the SDK's own refusal is a plain ``ValueError``, which an activity's retry policy would retry)."""

    def __init__(self, store: PayloadStoreSettings) -> None:
        super().__init__(client=_ClientPerCall(store), bucket=store.bucket, max_payload_size=store.max_bytes)
        self._store = store

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        for payload in payloads:
            size = payload.ByteSize()
            if size > self._store.max_bytes:
                too_large = f"payload of {size} bytes ({size / (1 << 20):.1f} MiB) is over {MAX_ENV}={self._store.max_bytes} of {self._store.where}"
                raise ApplicationError(too_large, type=PAYLOAD_TOO_LARGE, non_retryable=True)
        return await super().store(context, payloads)


def data_converter(store: PayloadStoreSettings | None) -> DataConverter:
    """The pydantic converter, with external storage on ``store``'s bucket when there is one."""
    if store is None:
        return pydantic_data_converter
    return dataclasses.replace(
        pydantic_data_converter,
        external_storage=ExternalStorage(drivers=[CappedS3Driver(store)], payload_size_threshold=store.threshold_bytes),
    )


async def check_payload_store(store: PayloadStoreSettings) -> None:
    """One HeadBucket call; ``PayloadStoreUnusable`` names the setting behind an unreachable store,
    refused credentials or a missing bucket."""
    async with aioboto3.Session().client("s3", **_client_kwargs(store, _CHECK_RETRIES)) as s3:
        try:
            await s3.head_bucket(Bucket=store.bucket)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket"):
                raise PayloadStoreUnusable(f"{BUCKET_ENV}: no bucket {store.bucket!r} at {store.endpoint_url or 'AWS S3'}") from None
            if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                keys = " / ".join(KEY_ENVS) if store.access_key_id else f"{' / '.join(KEY_ENVS)} (unset: boto's default chain)"
                raise PayloadStoreUnusable(f"{keys}: {store.where} refused the credentials ({code})") from None
            raise PayloadStoreUnusable(f"{BUCKET_ENV}: {store.where} answered {code or error}") from None
        except NoCredentialsError:
            raise PayloadStoreUnusable(
                f"{' / '.join(KEY_ENVS)}: unset, and boto's default chain (profile, instance role) found no credentials"
            ) from None
        except BotoCoreError as error:
            raise PayloadStoreUnusable(f"{store.endpoint_env}: cannot reach the payload store ({error})") from None
