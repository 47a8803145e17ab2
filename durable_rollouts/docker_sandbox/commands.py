"""Commands inside a container: ``docker exec`` as a killable subprocess, bounded by ``timeout(1)`` inside.

Invariants:

* A command runs through the ``docker exec`` CLI as an asyncio subprocess: a timeout or a cancellation
  kills that client, and the command itself runs under ``timeout(1)`` inside the container, so it stops too.
* Environment values reach container processes through ``docker exec -e NAME`` with the value in the CLI's
  own environment: never interpolated into a shell string, never visible on the host's command lines.
* Packaged scripts (``shell_scripts``) run as the ``bash -c`` text of one exec, their values as
  positional parameters.
* A failed command in a container that is gone raises ``SandboxGone``, never a bare exit code.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time

import docker
import docker.errors
from pydantic import BaseModel

from durable_rollouts.contracts.rollout import SandboxHandle
from durable_rollouts.docker_sandbox.container_layout import AGENT_USER
from durable_rollouts.docker_sandbox.errors import SandboxError, SandboxGone
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

_CLI_SLACK_S = 15.0
_TIMEOUT_EXIT_CODES = (124, 137)


class ExecResult(BaseModel):
    """``output`` is stdout and stderr interleaved; ``timed_out`` means the command was killed at its timeout."""

    exit_code: int
    output: str
    timed_out: bool = False


def _docker_cli() -> str:
    """Absolute path of the docker CLI (a caller's PATH in ``env`` must not change which binary runs)."""
    found = shutil.which("docker")
    if found is None:
        raise SandboxError("the docker CLI is not on PATH")
    return found


async def _run_cli(args: list[str], env: dict[str, str] | None, timeout_s: float) -> tuple[int, bytes]:
    """Run ``docker <args>``; on timeout or cancellation kill the client before re-raising."""
    proc = await asyncio.create_subprocess_exec(
        _docker_cli(),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, output


def _exec_args(container_id: str, user: str, cwd: str, env: dict[str, str] | None) -> list[str]:
    names = [arg for key in (env or {}) for arg in ("-e", key)]
    return ["exec", "-u", user, "-w", cwd, *names, container_id]


class DockerAccess:
    """The Docker client one ``DockerSandboxes`` uses: given, or made once on first use (from any thread)."""

    def __init__(self, client: docker.DockerClient | None = None):
        self._client = client
        self._client_lock = threading.Lock()

    @property
    def client(self) -> docker.DockerClient:
        with self._client_lock:
            if self._client is None:
                self._client = docker.from_env()
            return self._client


class ContainerCommands(DockerAccess):
    async def layer_bytes(self, container_id: str) -> int:
        """The size of the container's writable layer (Docker's ``SizeRw``: apparent sizes of what was written
        or copied up); Docker walks the layer's files to compute it (about 5 µs a file here)."""

        def size() -> int | None:
            found = self.client.api.containers(all=True, filters={"id": container_id}, size=True)
            return next((int(c.get("SizeRw") or 0) for c in found if c["Id"] == container_id), None)

        value = await asyncio.to_thread(size)
        if value is None:
            raise SandboxGone(f"container {container_id[:12]} no longer exists")
        return value

    async def ensure_running(self, container_id: str) -> None:
        def state() -> str:
            return self.client.containers.get(container_id).status

        try:
            status = await asyncio.to_thread(state)
        except docker.errors.NotFound:
            raise SandboxGone(f"container {container_id[:12]} no longer exists") from None
        if status != "running":
            raise SandboxGone(f"container {container_id[:12]} is {status}")

    async def exec_in(
        self,
        container_id: str,
        argv: list[str],
        *,
        user: str,
        cwd: str,
        timeout_s: float,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run ``argv`` under ``timeout(1)`` in the container; a dead container raises ``SandboxGone``."""
        limit = f"{max(timeout_s, 0.001):.3f}"
        args = _exec_args(container_id, user, cwd, env) + ["timeout", "-k", "5", limit, *argv]
        started = time.monotonic()
        try:
            code, raw = await _run_cli(args, env, timeout_s + _CLI_SLACK_S)
        except TimeoutError:
            await self.ensure_running(container_id)
            return ExecResult(exit_code=124, output="", timed_out=True)
        output = raw.decode("utf-8", errors="replace")
        if code != 0:
            await self.ensure_running(container_id)
        timed_out = code in _TIMEOUT_EXIT_CODES and time.monotonic() - started >= timeout_s
        return ExecResult(exit_code=code, output=output, timed_out=timed_out)

    async def run_script(self, handle: SandboxHandle, script: ShellScript, *args: str, timeout_s: float = 60.0, user: str = "root") -> ExecResult:
        """Run a packaged bash script as ``bash -c`` in the workdir; values arrive as positional parameters."""
        argv = ["bash", "-c", script.text, script.name, *args]
        return await self.exec_in(handle.container_id, argv, user=user, cwd=handle.workdir, timeout_s=timeout_s)

    async def exec(  # noqa: A003 - the sandbox's verb
        self,
        handle: SandboxHandle,
        cmd: str,
        *,
        user: str = AGENT_USER,
        timeout_s: float = 120,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run ``bash -lc cmd`` in the workdir and wait at most ``timeout_s`` (plus a small client slack).

        The command runs under ``timeout -k 5`` in the container, so on expiry its process group is
        killed and the result says ``timed_out``.
        """
        return await self.exec_in(handle.container_id, ["bash", "-lc", cmd], user=user, cwd=handle.workdir, timeout_s=timeout_s, env=env)
