"""The payload store on an S3-compatible bucket: the SDK's ``temporalio.contrib.aws.s3driver`` with the
project's cap, and the start-up check of the bucket (``payload_storage`` imports this module only for a bucket
store, so boto is loaded only where one is used). A payload over the cap is refused before any upload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aioboto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client
from temporalio.converter import StorageDriverClaim, StorageDriverRetrieveContext, StorageDriverStoreContext

from durable_rollouts.config.payload_store import BUCKET_ENV, KEY_ENVS, PayloadStoreSettings
from durable_rollouts.trainer_client.payload_storage import PayloadStoreUnusable, PayloadUnreadable, refuse_oversized

# The driver's calls retry a passing fault a few times; an outage longer than that fails the
# activity, and its retry policy retries it with backoff.
_DRIVER_RETRIES = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=10, read_timeout=60)
# The start-up check fails fast: one line, exit 1.
_CHECK_RETRIES = Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=5, read_timeout=10)


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
    """The SDK's S3 driver, refusing a payload over ``max_bytes`` (``refuse_oversized``)."""

    def __init__(self, store: PayloadStoreSettings) -> None:
        super().__init__(client=_ClientPerCall(store), bucket=store.bucket, max_payload_size=store.max_bytes)
        self._store = store

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        refuse_oversized(payloads, self._store)
        return await super().store(context, payloads)

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        try:
            return await super().retrieve(context, claims)
        except (RuntimeError, ValueError) as error:  # the SDK's message names bucket and key
            raise PayloadUnreadable(str(error)) from error


async def check_bucket(store: PayloadStoreSettings) -> None:
    """The bucket answers one HeadBucket call, or ``PayloadStoreUnusable`` names the setting to fix (an
    unreachable store, refused credentials, a missing bucket)."""
    async with aioboto3.Session().client("s3", **_client_kwargs(store, _CHECK_RETRIES)) as s3:
        try:
            await s3.head_bucket(Bucket=store.bucket)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket"):
                raise PayloadStoreUnusable(
                    f"{BUCKET_ENV}: no bucket {store.bucket!r} at {store.endpoint_url or 'AWS S3'}"
                ) from None
            if code in ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                keys = (
                    " / ".join(KEY_ENVS)
                    if store.access_key_id
                    else f"{' / '.join(KEY_ENVS)} (unset: boto's default chain)"
                )
                raise PayloadStoreUnusable(f"{keys}: {store.where} refused the credentials ({code})") from None
            raise PayloadStoreUnusable(f"{BUCKET_ENV}: {store.where} answered {code or error}") from None
        except NoCredentialsError:
            raise PayloadStoreUnusable(
                f"{' / '.join(KEY_ENVS)}: unset, and boto's default chain (profile, instance role) found no credentials"
            ) from None
        except BotoCoreError as error:
            raise PayloadStoreUnusable(f"{store.endpoint_env}: cannot reach the payload store ({error})") from None
