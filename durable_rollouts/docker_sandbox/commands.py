"""Commands inside a container: ``docker exec`` through the engine's API, bounded by ``timeout(1)`` inside.

Invariants:

* A command runs as one exec on the event loop (``engine_exec``): a timeout or a cancellation drops the
  call, and the command itself runs under ``timeout(1)`` inside the container, so it stops too.
* Environment values reach container processes in the exec's own environment: never interpolated into a
  shell string, never visible on the host's command lines.
* Packaged scripts (``shell_scripts``) run as the ``bash -c`` text of one exec, their values as
  positional parameters.
* A failed command in a container that is gone raises ``SandboxGone``, never a bare exit code.
* ``exec_steps`` runs several shell texts in one exec, each in a subshell of its own with its stderr joined
  to its stdout, and splits their output on a boundary line drawn fresh for that exec (nothing a step
  prints can name it in advance): each step's exit code and output, as if it had been an exec of its own.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import threading
import time

import docker
import docker.errors
from pydantic import BaseModel

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.container_layout import AGENT_USER
from durable_rollouts.docker_sandbox.engine_exec import EngineEndpoint, exec_output
from durable_rollouts.docker_sandbox.errors import SandboxGone
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

_EXEC_SLACK_S = 15.0
# $1 = the boundary, then one shell text per step; after each step a line "<boundary> <its exit code>", and
# nothing more after the first step that fails.
_STEPS = (
    'b=$1; shift; for step; do (eval "$step") 2>&1; rc=$?; printf \'\\n%s %d\\n\' "$b" "$rc"; [ "$rc" -eq 0 ] || '
    "exit 0; done"
)
_TIMEOUT_EXIT_CODES = (124, 137)
# A value this long or shorter can be one exec argument: the kernel allows 128 KiB an argument (MAX_ARG_STRLEN).
MAX_ARGUMENT_BYTES = 120 * 1024


class ExecResult(BaseModel):
    """``output`` is stdout and stderr interleaved; ``timed_out`` means the command was killed at its timeout."""

    exit_code: int
    output: str
    timed_out: bool = False


class DockerAccess:
    """The Docker client one ``DockerSandboxes`` uses: given, or made once on first use (from any thread)."""

    def __init__(self, client: docker.DockerClient | None = None):
        self._client = client
        self._client_lock = threading.Lock()
        self._endpoint: EngineEndpoint | None = None

    @property
    def endpoint(self) -> EngineEndpoint:
        """The same engine as ``docker.from_env``, for calls made on the event loop."""
        if self._endpoint is None:
            self._endpoint = EngineEndpoint.from_env()
        return self._endpoint

    @property
    def client(self) -> docker.DockerClient:
        with self._client_lock:
            if self._client is None:
                self._client = docker.from_env()
            return self._client

    async def engine_answers(self) -> bool:
        """The Docker engine answers a ping (a failure while it does is the sandbox's, not the engine's)."""
        try:
            return bool(await asyncio.to_thread(self.client.ping))
        except Exception:  # any failure to reach it means no
            return False


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

    async def init_pid(self, container_id: str) -> int:
        """The host pid of the container's first process (0 when it is not running)."""

        def pid() -> int:
            return int(self.client.api.inspect_container(container_id)["State"]["Pid"])

        try:
            return await asyncio.to_thread(pid)
        except docker.errors.NotFound:
            raise SandboxGone(f"container {container_id[:12]} no longer exists") from None

    async def image_and_env(self, container_id: str) -> tuple[str, tuple[str, ...]]:
        """The ID of the image the container runs (a content address: the same ID is the same filesystem on
        any engine) and its environment as the engine set it."""

        def inspect() -> tuple[str, tuple[str, ...]]:
            attrs = self.client.api.inspect_container(container_id)
            return str(attrs["Image"]), tuple(attrs["Config"].get("Env") or ())

        try:
            return await asyncio.to_thread(inspect)
        except docker.errors.NotFound:
            raise SandboxGone(f"container {container_id[:12]} no longer exists") from None

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
        bounded = ["timeout", "-k", "5", limit, *argv]
        started = time.monotonic()
        try:
            code, raw = await asyncio.wait_for(
                exec_output(self.endpoint, container_id, bounded, user=user, cwd=cwd, env=env),
                timeout_s + _EXEC_SLACK_S,
            )
        except TimeoutError:
            await self.ensure_running(container_id)
            return ExecResult(exit_code=124, output="", timed_out=True)
        output = raw.decode("utf-8", errors="replace")
        if code != 0:
            await self.ensure_running(container_id)
        timed_out = code in _TIMEOUT_EXIT_CODES and time.monotonic() - started >= timeout_s
        return ExecResult(exit_code=code, output=output, timed_out=timed_out)

    async def run_script(
        self, handle: SandboxHandle, script: ShellScript, *args: str, timeout_s: float = 60.0, user: str = "root"
    ) -> ExecResult:
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
        return await self.exec_in(
            handle.container_id, ["bash", "-lc", cmd], user=user, cwd=handle.workdir, timeout_s=timeout_s, env=env
        )

    async def exec_steps(
        self, handle: SandboxHandle, steps: list[str], *, user: str = AGENT_USER, timeout_s: float = 120
    ) -> list[ExecResult]:
        """Run the shell texts ``steps`` in order in one login shell in the workdir, within ``timeout_s`` in all,
        stopping after the first that exits non-zero: the result of each step that ran, in order. A step the
        timeout cut is the last result, ``timed_out``, with what it printed."""
        boundary = secrets.token_hex(16)
        ran = await self.exec_in(
            handle.container_id,
            ["bash", "-lc", _STEPS, "steps", boundary, *steps],
            user=user,
            cwd=handle.workdir,
            timeout_s=timeout_s,
        )
        parts = re.split(rf"\n{boundary} (\d+)\n", ran.output)
        results = [
            ExecResult(exit_code=int(code), output=output)
            for output, code in zip(parts[0:-1:2], parts[1::2], strict=True)
        ]
        if len(results) < len(steps) and (ran.exit_code != 0 or not results or results[-1].exit_code == 0):
            results.append(ExecResult(exit_code=ran.exit_code or 1, output=parts[-1], timed_out=ran.timed_out))
        return results
