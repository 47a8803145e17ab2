"""A real image registry on loopback, for the image tests and the placement bench: Debian's ``docker-registry``
(distribution 2.8, installed by ``make setup``) with htpasswd auth, its storage in a folder the caller owns,
and optionally a bandwidth-limited TCP front (``ThrottledFront``) so a pull lasts long enough to watch or cut.

Docker's engine talks plain HTTP to a ``127.0.0.1:PORT`` registry without any ``insecure-registries`` setting.
``start`` returns once ``GET /v2/`` answers 401 without credentials; ``stop`` and ``start`` again keep the
data, port and credentials; ``local_registry`` stops the server however its block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import secrets
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors

REGISTRY = "docker-registry"
STARTUP_LIMIT_S = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalRegistry:
    """One registry; ``address`` is ``127.0.0.1:PORT`` as image names spell it."""

    def __init__(self, folder: Path, username: str = "rollouts") -> None:
        if shutil.which(REGISTRY) is None or shutil.which("htpasswd") is None:
            raise RuntimeError(
                "docker-registry or htpasswd is missing: run make setup (Debian packages docker-registry, "
                "apache2-utils)"
            )
        self.folder = folder
        self.username = username
        self.password = secrets.token_hex(8)
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None
        folder.mkdir(parents=True, exist_ok=True)
        htpasswd = subprocess.run(
            ["htpasswd", "-Bbn", username, self.password], check=True, capture_output=True, text=True
        ).stdout
        (folder / "htpasswd").write_text(htpasswd)
        (folder / "config.yml").write_text(
            "version: 0.1\n"
            "log:\n  level: warn\n"
            f"storage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\n  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.address}\n"
            f"auth:\n  htpasswd:\n    realm: rollouts-test\n    path: {folder / 'htpasswd'}\n"
        )

    @property
    def auth_config(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}

    def start(self) -> None:
        log = (self.folder / "registry.log").open("ab")
        self._process = subprocess.Popen(
            [REGISTRY, "serve", str(self.folder / "config.yml")], stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"docker-registry exited at start: {(self.folder / 'registry.log').read_text()[-2000:]}"
                )
            try:
                urllib.request.urlopen(f"http://{self.address}/v2/", timeout=2)
            except urllib.error.HTTPError as error:
                if error.code == 401:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"docker-registry did not answer on {self.address} within {STARTUP_LIMIT_S:.0f} s")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
        self._process = None

    def push(self, client: docker.DockerClient, image: str, name: str | None = None) -> str:
        """Push the engine's ``image`` here as ``name`` (default: its own repository and tag) and drop that
        registry tag from the engine again; returns the pushed name (``127.0.0.1:PORT/...``)."""
        target = f"{self.address}/{name or image}"
        repository, _, tag = target.rpartition(":")
        client.images.get(image).tag(repository, tag)
        try:
            for event in client.api.push(repository, tag=tag, stream=True, decode=True, auth_config=self.auth_config):
                if "error" in event:
                    raise RuntimeError(f"push of {target} failed: {event['error']}")
        finally:
            client.images.remove(target)
        return target

    def manifest_requests(self, repository: str, methods: tuple[str, ...] = ("GET",)) -> int:
        """How many ``methods`` requests for ``repository``'s manifests the registry answered 200 (from its access
        log). Every pull by tag starts with a ``HEAD`` of the tag (so ``HEAD`` counts pulls); the engine then
        ``GET``s the manifest by digest unless it already has that manifest (an image pushed from it, say)."""
        text = (self.folder / "registry.log").read_text(errors="replace")
        wanted = tuple(f'"{method} /v2/{repository}/manifests/' for method in methods)
        return sum(1 for line in text.splitlines() if any(w in line for w in wanted) and '" 200 ' in line)


def build_with_random_layer(client: docker.DockerClient, base: str, blob_bytes: int) -> str:
    """A new local image: ``base`` plus ``blob_bytes`` of random bytes at ``/opt/random-layer`` (a layer no other
    image shares, so pulling the image moves real bytes); its tag."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (
            ("Dockerfile", f"FROM {base}\nCOPY blob /opt/random-layer\n".encode()),
            ("blob", os.urandom(blob_bytes)),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    tag = f"rollouts-random-layer:{uuid.uuid4().hex[:10]}"
    client.images.build(fileobj=buffer, custom_context=True, tag=tag, rm=True)
    return tag


def image_present(client: docker.DockerClient, name: str) -> bool:
    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


@contextmanager
def local_registry(folder: Path) -> Iterator[LocalRegistry]:
    registry = LocalRegistry(folder)
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()


class ThrottledFront:
    """A TCP front on loopback that forwards to ``upstream_port`` at most ``bytes_per_s`` downstream per
    connection (a registry as slow as a real one across a network); ``cut`` closes every connection."""

    def __init__(self, upstream_port: int, bytes_per_s: int) -> None:
        self.upstream_port = upstream_port
        self.bytes_per_s = bytes_per_s
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limited: bool) -> None:
        chunk = max(self.bytes_per_s // 20, 1024) if limited else 65536
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            while data := await reader.read(chunk):
                writer.write(data)
                await writer.drain()
                if limited:
                    await asyncio.sleep(len(data) / self.bytes_per_s)
        writer.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_writer.close()
            return
        self._writers |= {client_writer, upstream_writer}
        await asyncio.gather(
            self._pipe(client_reader, upstream_writer, False), self._pipe(upstream_reader, client_writer, True)
        )
        self._writers -= {client_writer, upstream_writer}

    def cut(self) -> None:
        for writer in list(self._writers):
            writer.close()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
