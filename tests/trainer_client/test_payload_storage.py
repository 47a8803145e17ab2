"""The project's data converter on a real SeaweedFS bucket and on the local payload folder, with a real Temporal dev
server: a big result goes to the store with only a reference in history, a result over the store's cap fails once
and for good, an outage of the store mid-run is retried until it is back, an object missing when a result is
collected fails that result alone, naming its key, and a worker or starter whose store is unusable exits 1 with
one line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from google.protobuf import json_format
from temporalio import activity
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.client import Client, WorkflowHandle
from temporalio.converter import StorageDriverClaim, StorageDriverRetrieveContext
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_rollouts.config.payload_store import PayloadFolderSettings, PayloadStorageSettings
from durable_rollouts.trainer_client.payload_storage import (
    PAYLOAD_TOO_LARGE,
    FolderDriver,
    PayloadStoreUnusable,
    PayloadUnreadable,
    check_payload_store,
    data_converter,
)
from durable_rollouts.trainer_client.workflow_runs import RunFailure, collect
from testbed.seaweed_s3 import SeaweedS3, seaweed_s3
from tests.local_cluster import start_dev_server
from tests.payload_workflows import Blob, BlobOutcome, BlobRoundTrip, make_blob

PROJECT = Path(__file__).resolve().parents[2]
THRESHOLD = 64 << 10
BIG = 1 << 20

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[SeaweedS3]:
    with seaweed_s3(tmp_path_factory.mktemp("seaweed")) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def server() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server()
    yield env
    await env.shutdown()


async def project_client(server: WorkflowEnvironment, settings: PayloadStorageSettings) -> Client:
    return await Client.connect(
        server.client.service_client.config.target_host, data_converter=data_converter(settings)
    )


async def run_round_trip(client: Client, size: int, *activities) -> tuple[WorkflowHandle, object]:
    queue = f"payloads-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[BlobRoundTrip], activities=list(activities or [make_blob])):
        handle = await client.start_workflow(
            BlobRoundTrip.run, size, id=f"blob-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        return handle, await handle.result()


def reference_of(payload) -> ExternalStorageReference:
    """The reference a payload in history holds instead of its data (fails if it holds the data itself)."""
    assert payload.metadata["encoding"] == b"json/protobuf", payload.metadata
    assert payload.metadata["messageType"] == ExternalStorageReference.DESCRIPTOR.full_name.encode()
    return json_format.Parse(payload.data, ExternalStorageReference())


async def test_a_big_result_goes_to_the_bucket_and_history_keeps_a_reference(store, server):
    bucket = store.new_bucket()
    client = await project_client(server, store.settings(bucket, threshold_bytes=THRESHOLD))
    handle, outcome = await run_round_trip(client, BIG)

    assert outcome.blob is not None and len(outcome.blob.data) == BIG
    history = await handle.fetch_history()
    payloads = [
        e.activity_task_completed_event_attributes.result.payloads[0]
        for e in history.events
        if e.HasField("activity_task_completed_event_attributes")
    ]
    payloads += [
        e.workflow_execution_completed_event_attributes.result.payloads[0]
        for e in history.events
        if e.HasField("workflow_execution_completed_event_attributes")
    ]
    assert len(payloads) == 2
    keys = store.keys(bucket)
    for payload in payloads:
        assert payload.ByteSize() < 1024
        assert payload.external_payloads[0].size_bytes > BIG
        reference = reference_of(payload)
        assert reference.driver_name == "aws.s3driver"
        assert reference.claim_data["bucket"] == bucket
        assert reference.claim_data["key"] in keys
        assert f"/wi/{handle.id}/" in reference.claim_data["key"]
    assert len(keys) == 2


async def test_the_payload_folder_keeps_a_big_result_and_refuses_one_over_its_cap(server, tmp_path):
    folder = PayloadFolderSettings(root=tmp_path / "payloads", threshold_bytes=THRESHOLD, max_bytes=4 * BIG)
    client = await project_client(server, folder)
    handle, outcome = await run_round_trip(client, BIG)

    assert outcome.blob is not None and len(outcome.blob.data) == BIG
    history = await handle.fetch_history()
    (completed,) = [e for e in history.events if e.HasField("workflow_execution_completed_event_attributes")]
    reference = reference_of(completed.workflow_execution_completed_event_attributes.result.payloads[0])
    assert reference.driver_name == "local-folder"
    digest = reference.claim_data["hash_value"]
    stored = folder.root / digest[:2] / digest
    assert stored.stat().st_size > BIG
    files = [p for p in folder.root.rglob("*") if p.is_file()]
    assert len(files) == 2 and stored in files  # the activity's result and the workflow's, no temp file left

    _, refused = await run_round_trip(client, 8 * BIG)
    assert refused.error_type == PAYLOAD_TOO_LARGE and refused.non_retryable
    assert f"ROLLOUT_PAYLOAD_MAX_BYTES={4 * BIG} of the payload folder {folder.root}" in refused.error_message


@pytest.mark.parametrize("where", ["bucket", "folder"])
async def test_an_object_missing_at_collection_fails_that_result_naming_its_key(store, server, tmp_path, where):
    bucket = store.new_bucket()
    settings = (
        store.settings(bucket, threshold_bytes=THRESHOLD)
        if where == "bucket"
        else PayloadFolderSettings(root=tmp_path, threshold_bytes=THRESHOLD)
    )
    client = await project_client(server, settings)
    lost, _ = await run_round_trip(client, BIG)
    kept, _ = await run_round_trip(client, BIG)
    history = await lost.fetch_history()
    (completed,) = [e for e in history.events if e.HasField("workflow_execution_completed_event_attributes")]
    claim = reference_of(completed.workflow_execution_completed_event_attributes.result.payloads[0]).claim_data
    if where == "bucket":
        store.client().delete_object(Bucket=bucket, Key=claim["key"])
        key = claim["key"]
    else:
        (tmp_path / claim["hash_value"][:2] / claim["hash_value"]).unlink()
        key = claim["hash_value"]

    async def started() -> None:
        return None

    outcomes = await asyncio.gather(*(collect(client, h.id, started, BlobOutcome) for h in (lost, kept)))

    failure, collected = outcomes
    assert isinstance(failure, RunFailure), failure
    assert failure.reason == "payload_unreadable" and key in failure.message, failure
    assert isinstance(collected, BlobOutcome) and collected.blob is not None and len(collected.blob.data) == BIG


async def test_a_small_result_stays_in_history(store, server):
    bucket = store.new_bucket()
    client = await project_client(server, store.settings(bucket, threshold_bytes=THRESHOLD))
    handle, outcome = await run_round_trip(client, 1024)

    assert outcome.blob is not None
    history = await handle.fetch_history()
    (completed,) = [e for e in history.events if e.HasField("workflow_execution_completed_event_attributes")]
    assert (
        completed.workflow_execution_completed_event_attributes.result.payloads[0].metadata["encoding"] == b"json/plain"
    )
    assert store.keys(bucket) == []


async def test_a_result_over_the_stores_cap_fails_once_naming_its_size(store, server):
    bucket = store.new_bucket()
    client = await project_client(server, store.settings(bucket, threshold_bytes=THRESHOLD, max_bytes=BIG))
    handle, outcome = await run_round_trip(client, 2 * BIG)

    assert outcome.blob is None
    assert outcome.error_type == PAYLOAD_TOO_LARGE and outcome.non_retryable
    assert "ROLLOUT_PAYLOAD_MAX_BYTES=1048576" in outcome.error_message
    size = int(outcome.error_message.split("payload of ")[1].split(" bytes")[0])
    assert size > 2 * BIG
    history = await handle.fetch_history()
    failed = [
        e.activity_task_failed_event_attributes
        for e in history.events
        if e.HasField("activity_task_failed_event_attributes")
    ]
    assert len(failed) == 1
    started = [
        e.activity_task_started_event_attributes
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert [s.attempt for s in started] == [1]
    assert store.keys(bucket) == []


async def test_the_store_going_away_mid_run_is_retried_until_it_is_back(store, server):
    bucket = store.new_bucket()
    client = await project_client(server, store.settings(bucket, threshold_bytes=THRESHOLD))
    first_attempt_done, store_down = asyncio.Event(), asyncio.Event()
    attempts: list[int] = []

    @activity.defn(name="make_blob")
    async def make_blob_while_the_store_fails(size: int) -> Blob:
        attempt = activity.info().attempt
        attempts.append(attempt)
        if attempt == 1:
            first_attempt_done.set()
            await store_down.wait()
        return Blob(attempt=attempt, data=os.urandom(size // 2).hex())

    async def outage() -> None:
        await first_attempt_done.wait()
        await asyncio.to_thread(store.stop)
        store_down.set()
        while len(attempts) < 3:
            await asyncio.sleep(0.2)
        await asyncio.to_thread(store.start)

    outage_task = asyncio.create_task(outage())
    try:
        handle, outcome = await run_round_trip(client, BIG, make_blob_while_the_store_fails)
    finally:
        await outage_task

    assert outcome.blob is not None and outcome.blob.attempt >= 3 and len(outcome.blob.data) == BIG
    assert len(store.keys(bucket)) == 2


@pytest.mark.parametrize(
    ("case", "setting"),
    [
        ("unreachable", "AWS_ENDPOINT_URL_S3"),
        ("wrong_secret", "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"),
        ("missing_bucket", "ROLLOUT_PAYLOAD_BUCKET"),
    ],
)
async def test_an_unusable_store_is_one_line_naming_the_setting(store, case, setting):
    bucket = store.new_bucket()
    good = store.settings(bucket)
    bad = {
        "unreachable": good.model_copy(update={"endpoint_url": "http://127.0.0.1:9"}),
        "wrong_secret": good.model_copy(update={"secret_access_key": "not-the-secret"}),
        "missing_bucket": good.model_copy(update={"bucket": f"{bucket}-gone"}),
    }[case]
    await check_payload_store(good)
    with pytest.raises(PayloadStoreUnusable) as raised:
        await check_payload_store(bad)
    message = str(raised.value)
    assert message.startswith(f"{setting}:") and "\n" not in message


@pytest.mark.parametrize("command", [["worker.py"], ["starter.py", "status"]], ids=["worker", "starter"])
@pytest.mark.parametrize(
    ("variable", "value", "setting"),
    [
        ("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9", "AWS_ENDPOINT_URL_S3"),
        ("AWS_SECRET_ACCESS_KEY", "not-the-secret", "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"),
        ("ROLLOUT_PAYLOAD_BUCKET", "no-such-bucket", "ROLLOUT_PAYLOAD_BUCKET"),
        ("ROLLOUT_PAYLOAD_BUCKET", "Not_A_Bucket", "ROLLOUT_PAYLOAD_BUCKET"),
        ("AWS_ACCESS_KEY_ID", None, "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"),
    ],
)
def test_a_process_with_an_unusable_store_exits_1_with_one_line(store, tmp_path, command, variable, value, setting):
    bucket = store.new_bucket()
    env = {**os.environ, **store.env(bucket), "ROLLOUT_RESULTS_DIR": str(tmp_path), "TEMPORAL_ADDRESS": "127.0.0.1:9"}
    if value is None:  # no keys, no profile, and no instance metadata service to ask (it is not on loopback)
        del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
        env.update(
            AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
            AWS_CONFIG_FILE=str(tmp_path / "none"),
            AWS_EC2_METADATA_DISABLED="true",
        )
    else:
        env[variable] = value
    process = subprocess.run(
        [sys.executable, *command], env=env, capture_output=True, text=True, timeout=300, cwd=PROJECT
    )

    assert process.returncode == 1, process.stderr
    assert "Traceback" not in process.stderr
    name = command[0].removesuffix(".py")
    assert process.stderr.strip().splitlines()[-1].startswith(f"{name}: {setting}:"), process.stderr


async def test_a_folder_claim_that_is_not_a_digest_names_no_path(tmp_path):
    driver = FolderDriver(PayloadFolderSettings(root=tmp_path / "payloads"))
    (tmp_path / "secret").write_bytes(b"not a payload")
    for digest in ("../../secret", "", "ab" * 31 + "/x"):
        with pytest.raises(PayloadUnreadable, match="not a sha256 digest"):
            await driver.retrieve(
                StorageDriverRetrieveContext(), [StorageDriverClaim(claim_data={"hash_value": digest})]
            )
