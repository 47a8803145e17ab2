"""The one data converter of workers, the starter and the slime drop-ins: pydantic payloads plus Temporal's
external storage, on an S3-compatible bucket when ``ROLLOUT_PAYLOAD_BUCKET`` is set, else on this machine's
payload folder (``durable_rollouts.config.payload_store``).

Every payload of ``threshold_bytes`` or more (a workflow's or activity's input or result: a rollout's result
carries its packed trajectory and whole logs) is put in the store and history keeps a reference; every
process that reads the payload needs the same store, so all of them build their converter here. On a bucket
the SDK's ``temporalio.contrib.aws.s3driver`` keeps it, so hosts share nothing but the Temporal cluster and
the bucket; in the folder ``FolderDriver`` keeps it, one file per distinct payload named by its SHA-256, which
only processes on the same machine see. A payload over ``max_bytes`` is refused with a non-retryable
``PayloadTooLarge`` error naming its size, in either store.

Importing this module does not import boto: the bucket's driver and check live in ``s3_payloads``, imported the
first time a bucket store is used, so a process on the payload folder never loads it (``bench.process_start_bench``
measures what that spares a starter).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.exceptions import ApplicationError

from durable_rollouts.config.payload_store import (
    FOLDER_ENV,
    MAX_ENV,
    PayloadFolderSettings,
    PayloadStorageSettings,
    PayloadStoreSettings,
)

_DIGEST = re.compile(r"[0-9a-f]{64}")
# The failure type of a payload over the cap: raised by the data converter itself, under every activity face.
PAYLOAD_TOO_LARGE = "PayloadTooLarge"


class PayloadStoreUnusable(Exception):
    """The bucket cannot be used; the message is one line naming the setting to fix."""


def refuse_oversized(payloads: Sequence[Payload], store: PayloadStorageSettings) -> None:
    """A non-retryable ``PayloadTooLarge`` naming the size of the first payload over ``store.max_bytes``
    (the S3 driver's own refusal is a plain ``ValueError``, which an activity's retry policy would retry)."""
    for payload in payloads:
        size = payload.ByteSize()
        if size > store.max_bytes:
            too_large = (
                f"payload of {size} bytes ({size / (1 << 20):.1f} MiB) is over {MAX_ENV}={store.max_bytes} of "
                f"{store.where}"
            )
            raise ApplicationError(too_large, type=PAYLOAD_TOO_LARGE, non_retryable=True)


class PayloadUnreadable(Exception):
    """A claim whose payload cannot be read back: not in the bucket or this machine's folder (removed, or stored
    on another machine), or altered; the message names the key."""


class FolderDriver(StorageDriver):
    """Payloads as files in one folder: ``<root>/<sha256[:2]>/<sha256>``, the serialized payload, written once
    (temp file + rename, so a reader never sees half of one); a claim holds the digest, checked on read."""

    def __init__(self, folder: PayloadFolderSettings) -> None:
        self._folder = folder

    def name(self) -> str:
        return "local-folder"

    def _path(self, digest: str) -> Path:
        return self._folder.root / digest[:2] / digest

    def _put(self, payload: Payload) -> StorageDriverClaim:
        data = payload.SerializeToString()
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        return StorageDriverClaim(claim_data={"hash_algorithm": "sha256", "hash_value": digest})

    def _get(self, claim: StorageDriverClaim) -> Payload:
        digest = claim.claim_data.get("hash_value", "")
        if not _DIGEST.fullmatch(digest):
            raise PayloadUnreadable(f"payload claim {dict(claim.claim_data)}: not a sha256 digest")
        path = self._path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise PayloadUnreadable(
                f"payload {digest} is not in {self._folder.where} (stored on another machine, or removed)"
            ) from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise PayloadUnreadable(f"payload {path}: sha256 mismatch")
        payload = Payload()
        payload.ParseFromString(data)
        return payload

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        refuse_oversized(payloads, self._folder)
        return await asyncio.to_thread(lambda: [self._put(p) for p in payloads])

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(lambda: [self._get(c) for c in claims])


def data_converter(store: PayloadStorageSettings) -> DataConverter:
    """The pydantic converter with external storage on ``store``: the bucket, or the payload folder."""
    driver: StorageDriver
    if isinstance(store, PayloadStoreSettings):
        from durable_rollouts.trainer_client.s3_payloads import CappedS3Driver

        driver = CappedS3Driver(store)
    else:
        driver = FolderDriver(store)
    return dataclasses.replace(
        pydantic_data_converter,
        external_storage=ExternalStorage(drivers=[driver], payload_size_threshold=store.threshold_bytes),
    )


async def check_payload_store(store: PayloadStorageSettings) -> None:
    """The store is usable, or ``PayloadStoreUnusable`` names the setting: the folder can be created and
    written; the bucket answers one HeadBucket call (not an unreachable store, refused credentials or a
    missing bucket)."""
    if isinstance(store, PayloadFolderSettings):
        try:
            await asyncio.to_thread(_check_folder, store.root)
        except OSError as error:
            raise PayloadStoreUnusable(
                f"{FOLDER_ENV}: cannot write {store.where} ({error.strerror or error})"
            ) from None
        return
    from durable_rollouts.trainer_client.s3_payloads import check_bucket

    await check_bucket(store)


def _check_folder(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=root):
        pass
