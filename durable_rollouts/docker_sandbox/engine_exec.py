"""``docker exec`` through the engine's HTTP API on the event loop: no CLI process and no thread per command.

Invariants:

* The engine is the one ``docker.from_env`` reaches (``DOCKER_HOST``, ``DOCKER_TLS_VERIFY``,
  ``DOCKER_CERT_PATH``): a unix socket, TCP, or TCP with TLS. Another scheme (``ssh://``) is refused with
  the variable named.
* One exec is three calls (create, start attached, inspect) on one session of its own, closed when the
  exec returns or is cancelled: nothing outlives the caller. Closing the stream does not stop the
  command in the container; the caller bounds it there (``timeout(1)``).
* Environment values travel in the create call's body, never on a command line.
* The output is stdout and stderr interleaved as the engine framed them: each stream in its own order
  (the engine reads them from two pipes, so their relative order is not kept).
* A container that is gone or stopped raises ``SandboxGone``; any other refusal raises ``SandboxError``
  with the engine's message, and so does an engine it cannot reach (with its address).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import struct
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
import docker.utils

from durable_rollouts.docker_sandbox.errors import SandboxError, SandboxGone

_FRAME_HEADER = struct.Struct(">BxxxI")
_INSPECT_TRIES = 50
_INSPECT_PAUSE_S = 0.01


@dataclass(frozen=True)
class EngineEndpoint:
    """Where the engine listens: ``base_url`` (``http://docker`` for a socket) and how to connect to it."""

    base_url: str
    socket_path: str | None = None
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def from_env(cls) -> EngineEndpoint:
        settings = docker.utils.kwargs_from_env()
        tls = settings.get("tls")
        host = docker.utils.parse_host(settings.get("base_url"), False, tls=bool(tls))
        scheme = urlsplit(host).scheme
        if scheme == "http+unix":
            return cls("http://docker", socket_path=host.removeprefix("http+unix://"))
        if scheme == "http":
            return cls(host)
        if scheme == "https" and tls:
            context = ssl.create_default_context(cafile=tls.ca_cert)
            if not tls.verify:
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            if tls.cert:
                context.load_cert_chain(*tls.cert)
            return cls(host, ssl_context=context)
        raise SandboxError(
            f"DOCKER_HOST={os.environ.get('DOCKER_HOST', '')!r}: sandboxes reach the engine over a unix socket or TCP "
            f"(with TLS), not {scheme}"
        )

    def session(self) -> aiohttp.ClientSession:
        connector = (
            aiohttp.UnixConnector(path=self.socket_path)
            if self.socket_path
            else aiohttp.TCPConnector(ssl=self.ssl_context or False)
        )
        return aiohttp.ClientSession(self.base_url, connector=connector, timeout=aiohttp.ClientTimeout(total=None))


async def _refusal(response: aiohttp.ClientResponse, container_id: str) -> Exception:
    try:
        message = (await response.json()).get("message", "")
    except (aiohttp.ContentTypeError, ValueError):
        message = await response.text()
    if response.status == 404 or (response.status == 409 and "not running" in message):
        return SandboxGone(f"container {container_id[:12]}: {message or response.reason}")
    return SandboxError(
        f"docker exec in {container_id[:12]} refused (HTTP {response.status}): {message or response.reason}"
    )


async def _read_frames(stream: aiohttp.StreamReader) -> bytes:
    """The frames' payloads until the stream ends; a stream cut short (the container killed under the exec) ends
    it too, and the inspect after it says what became of the command."""
    output = bytearray()
    while True:
        try:
            header = await stream.readexactly(_FRAME_HEADER.size)
            _, size = _FRAME_HEADER.unpack(header)
            output += await stream.readexactly(size)
        except (asyncio.IncompleteReadError, aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
            return bytes(output)


async def exec_output(
    endpoint: EngineEndpoint, container_id: str, argv: list[str], *, user: str, cwd: str, env: dict[str, str] | None
) -> tuple[int, bytes]:
    """Run ``argv`` in the container as ``user`` in ``cwd``; its exit code and its output. An engine it cannot
    reach (refused, a certificate it does not trust) raises ``SandboxError`` naming the engine's address."""
    try:
        return await _exec(endpoint, container_id, argv, user=user, cwd=cwd, env=env)
    except (
        aiohttp.ClientConnectorError
    ) as error:  # connecting (refused, TLS); a stream cut mid-exec is the caller's to judge
        where = endpoint.socket_path or endpoint.base_url
        raise SandboxError(
            f"cannot reach the Docker engine at {where} (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH): {error}"
        ) from None


async def _exec(
    endpoint: EngineEndpoint, container_id: str, argv: list[str], *, user: str, cwd: str, env: dict[str, str] | None
) -> tuple[int, bytes]:
    config = {
        "Cmd": argv,
        "User": user,
        "WorkingDir": cwd,
        "Env": [f"{key}={value}" for key, value in (env or {}).items()],
        "AttachStdin": False,
        "AttachStdout": True,
        "AttachStderr": True,
        "Tty": False,
    }
    async with endpoint.session() as session:
        async with session.post(f"/containers/{container_id}/exec", json=config) as created:
            if created.status != 201:
                raise await _refusal(created, container_id)
            exec_id = (await created.json())["Id"]
        async with session.post(f"/exec/{exec_id}/start", json={"Detach": False, "Tty": False}) as started:
            if started.status != 200:
                raise await _refusal(started, container_id)
            output = await _read_frames(started.content)
        for _ in range(_INSPECT_TRIES):
            async with session.get(f"/exec/{exec_id}/json") as inspected:
                if inspected.status != 200:
                    raise await _refusal(inspected, container_id)
                state = await inspected.json()
            if not state["Running"] and state["ExitCode"] is not None:
                return int(state["ExitCode"]), output
            await asyncio.sleep(_INSPECT_PAUSE_S)
    raise SandboxError(
        f"docker exec in {container_id[:12]}: the stream ended but the engine still reports the command running"
    )
