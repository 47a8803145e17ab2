"""Docker sandboxes for rollouts: boot, exec, detached commands, git diff, destroy, reap.

Invariants:

* Every container this module creates carries ``io.rollouts.managed=1`` plus
  labels naming its workflow, attempt, instance, purpose, host queue and
  expiry time, and runs ``sleep <lifetime_s>`` under ``init``, so it stops on
  its own if every worker dies; the reaper removes what is left.
* Blocking docker SDK calls run in threads (``asyncio.to_thread``). Commands
  inside a container run through the ``docker exec`` CLI as an asyncio
  subprocess: a timeout or a cancellation kills that client, and the command
  itself runs under ``timeout(1)`` inside the container, so it stops too.
* Environment values reach container processes through ``docker exec -e NAME``
  with the value in the CLI's own environment: never interpolated into a shell
  string, never visible on the host's command lines.
* Files enter a container through ``put_archive`` (an in-memory tar) and leave
  it through ``get_archive``; nothing is shell-quoted.
* Harness state lives under ``git_workspace.HARNESS_DIR`` (mode 1777): the
  workspace baseline tree, detached-command scripts, logs and exit markers.
* The bash scripts run inside containers are package data (``sandbox_*.sh``,
  ``git_workspace_*.sh``), sent as the ``bash -c`` text of the same exec,
  their values as positional parameters.
* Claude Code is bind-mounted read-only, never copied: an executable at
  ``/opt/claude/bin/claude``, or an install directory (``claude_tarballs``)
  at ``/opt/claude`` whose ``bin/claude`` runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import ipaddress
import json
import os
import re
import secrets
import shutil
import socket
import tarfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import docker.errors
from docker.types import Mount
from pydantic import BaseModel, Field
from temporalio import activity

from activities.activity_failures import Failure, Translation, application_error
from activities.error_types import ErrorType
from config.settings import SANDBOX_DISK_BYTES, SANDBOX_MEMORY_BYTES
from contracts.rollout import CapturedDiff, DiffReport, OmittedFile, SandboxHandle, SandboxRequest
from docker_sandbox import git_workspace
from docker_sandbox.git_workspace import DIFF_OUT, HARNESS_DIR, PROBLEM_STATEMENT_FILE
from docker_sandbox.shell_scripts import ShellScript
from grading import swebench

LABEL_PREFIX = "io.rollouts"
OWNER_ENV = "ROLLOUT_SANDBOX_OWNER"
# Root inside the sandbox only prepares the workspace (user, ownership, pre-commands); the agent
# runs as ``agent``, and no-new-privileges keeps it from regaining any of these.
PREPARE_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"]
MAX_CONCURRENT_BOOTS = 16
AGENT_USER = "agent"
AGENT_UID = 1000
AGENT_HOME = "/home/agent"
CLAUDE_MOUNT_ROOT = "/opt/claude"
CLAUDE_MOUNT_PATH = f"{CLAUDE_MOUNT_ROOT}/bin/claude"
CLAUDE_CONFIG = {"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True}
SWEBENCH_TESTBED_BIN = "/opt/miniconda3/envs/testbed/bin"
PREPARE_TIMEOUT_S = 900.0
# The patch travels through Temporal (2 MiB payload limit): a changed file over MAX_DIFF_FILE_BYTES is
# left out of it and named; a patch still over MAX_DIFF_BYTES is not graded. New files totalling more
# than MAX_NEW_FILES_BYTES are not even hashed: their patch is taken to be over the cap.
MAX_DIFF_BYTES = 1 << 20
MAX_DIFF_FILE_BYTES = 1 << 20
MAX_NEW_FILES_BYTES = 256 << 20
MAX_LISTED_OMISSIONS = 100
_DETACHED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_CLI_SLACK_S = 15.0
_TIMEOUT_EXIT_CODES = (124, 137)

_boot_slots = asyncio.Semaphore(MAX_CONCURRENT_BOOTS)


class SandboxError(RuntimeError):
    """A sandbox operation failed for a reason retrying will not fix."""


class SandboxImageMissing(SandboxError):
    """The task image is not present locally (there is no registry to pull from)."""


class SandboxGone(SandboxError):
    """The container no longer exists or is not running."""


class SandboxLimits(BaseModel):
    """Per-container resource caps; ``disk_bytes`` bounds what a sandbox writes after its boot (0: unbounded),
    enforced by ``disk_watch`` while the agent runs and while the grader runs the tests."""

    cpus: float = Field(1.0, gt=0)
    memory_bytes: int = Field(SANDBOX_MEMORY_BYTES, ge=64 << 20)
    pids: int = Field(512, ge=16)
    disk_bytes: int = Field(SANDBOX_DISK_BYTES, ge=0)


# The one default instance the functions below (and evaluate, script_runner) share; never mutated.
DEFAULT_LIMITS = SandboxLimits()


class ExecResult(BaseModel):
    """``output`` is stdout and stderr interleaved; ``timed_out`` means the command was killed at its timeout."""

    exit_code: int
    output: str
    timed_out: bool = False


class DetachedStatus(BaseModel):
    """``started``: its pid is recorded; ``running``: its process group is alive; ``exit_code``: its exit marker."""

    started: bool
    running: bool
    exit_code: int | None = None


class ManagedContainer(BaseModel):
    id: str
    name: str
    state: str
    labels: dict[str, str]


class SandboxSettings(BaseModel):
    """Per-worker defaults for the Temporal activities (see ``configure_sandbox_activities``)."""

    claude_code: Path | None = None
    network: str | None = None
    host_queue: str = ""
    limits: SandboxLimits = SandboxLimits()
    lifetime_s: int = Field(3600, ge=60)


_settings = SandboxSettings()


def configure_sandbox_activities(
    *,
    claude_code: Path | None = None,
    network: str | None = None,
    host_queue: str = "",
    limits: SandboxLimits = DEFAULT_LIMITS,
    lifetime_s: int = 3600,
) -> None:
    """Set the worker-wide settings the sandbox and evaluate activities use; call once at worker start."""
    global _settings
    _settings = SandboxSettings(claude_code=claude_code, network=network, host_queue=host_queue, limits=limits, lifetime_s=lifetime_s)


def sandbox_settings() -> SandboxSettings:
    return _settings


# --------------------------------------------------------------------------- the sandbox network

SANDBOX_NETWORK = "rollouts-sandbox"
SANDBOX_SUBNET = "172.30.0.0/24"


@dataclass(frozen=True)
class SandboxNetwork:
    name: str
    gateway: str
    bridge: str


def ensure_network(name: str = SANDBOX_NETWORK, subnet: str = SANDBOX_SUBNET) -> SandboxNetwork:
    """Create (once) the internal bridge network sandboxes run on; return it with the host's address on it.

    ``internal`` means no route out of the host: a sandbox can reach the
    worker at this gateway address (where the adapter listens) and nothing
    beyond the machine.
    """
    client = _client()
    try:
        network = client.networks.get(name)
    except docker.errors.NotFound:
        gateway = str(ipaddress.ip_network(subnet).network_address + 1)
        pool = docker.types.IPAMPool(subnet=subnet, gateway=gateway)
        try:
            network = client.networks.create(
                name,
                driver="bridge",
                internal=True,
                ipam=docker.types.IPAMConfig(pool_configs=[pool]),
                labels={f"{LABEL_PREFIX}.managed": "1"},
            )
        except docker.errors.APIError:
            network = client.networks.get(name)
    network.reload()
    bridge = network.attrs.get("Options", {}).get("com.docker.network.bridge.name") or f"br-{network.id[:12]}"
    return SandboxNetwork(name=name, gateway=network.attrs["IPAM"]["Config"][0]["Gateway"], bridge=bridge)


# --------------------------------------------------------------------------- docker plumbing


_client_instance: docker.DockerClient | None = None


def _client() -> docker.DockerClient:
    global _client_instance
    if _client_instance is None:
        _client_instance = docker.from_env()
    return _client_instance


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
    return proc.returncode, output


def _exec_args(container_id: str, user: str, cwd: str, env: dict[str, str] | None) -> list[str]:
    names = [arg for key in (env or {}) for arg in ("-e", key)]
    return ["exec", "-u", user, "-w", cwd, *names, container_id]


async def layer_bytes(container_id: str) -> int:
    """The size of the container's writable layer (Docker's ``SizeRw``: apparent sizes of what was written
    or copied up); Docker walks the layer's files to compute it (about 5 µs a file here)."""

    def size() -> int | None:
        found = _client().api.containers(all=True, filters={"id": container_id}, size=True)
        return next((int(c.get("SizeRw") or 0) for c in found if c["Id"] == container_id), None)

    value = await asyncio.to_thread(size)
    if value is None:
        raise SandboxGone(f"container {container_id[:12]} no longer exists")
    return value


async def _ensure_running(container_id: str) -> None:
    def state() -> str:
        return _client().containers.get(container_id).status

    try:
        status = await asyncio.to_thread(state)
    except docker.errors.NotFound:
        raise SandboxGone(f"container {container_id[:12]} no longer exists") from None
    if status != "running":
        raise SandboxGone(f"container {container_id[:12]} is {status}")


async def _exec_in(
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
        await _ensure_running(container_id)
        return ExecResult(exit_code=124, output="", timed_out=True)
    output = raw.decode("utf-8", errors="replace")
    if code != 0:
        await _ensure_running(container_id)
    timed_out = code in _TIMEOUT_EXIT_CODES and time.monotonic() - started >= timeout_s
    return ExecResult(exit_code=code, output=output, timed_out=timed_out)


async def _harness(handle: SandboxHandle, script: str, *args: str, timeout_s: float = 60.0, user: str = "root") -> ExecResult:
    """Run a packaged bash script (``shell_scripts``) as ``bash -c``; values arrive as positional parameters."""
    argv = ["bash", "-c", script, "harness", *args]
    return await _exec_in(handle.container_id, argv, user=user, cwd=handle.workdir, timeout_s=timeout_s)


# --------------------------------------------------------------------------- files


@dataclass(frozen=True)
class SandboxFile:
    """A file to write: absolute ``path``, content, owner ``uid`` and ``mode``."""

    path: str
    data: bytes | str
    uid: int = 0
    mode: int = 0o644


def _tar(files: Iterable[SandboxFile]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for file in files:
            payload = file.data.encode() if isinstance(file.data, str) else file.data
            info = tarfile.TarInfo(str(PurePosixPath(file.path).relative_to("/")))
            info.size, info.mode, info.mtime = len(payload), file.mode, int(time.time())
            info.uid = info.gid = file.uid
            archive.addfile(info, io.BytesIO(payload))
    return buffer.getvalue()


async def write_files(handle: SandboxHandle, files: list[SandboxFile]) -> None:
    """Write every file in one Docker round trip (one archive unpacked at ``/``); missing parents are created (root, 0755)."""
    archive = _tar(files)

    def put() -> bool:
        return _client().containers.get(handle.container_id).put_archive("/", archive)

    if not await asyncio.to_thread(put):
        raise SandboxError(f"could not write {', '.join(file.path for file in files)}")


async def write_file(handle: SandboxHandle, path: str, data: bytes | str, *, uid: int = 0, mode: int = 0o644) -> None:
    """Write ``data`` to the absolute ``path``, owned by ``uid``."""
    await write_files(handle, [SandboxFile(path, data, uid, mode)])


class _ChunkStream(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (the body of ``get_archive``)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            self._pending = next(self._chunks, b"")
            if not self._pending:
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n], self._pending = self._pending[:n], self._pending[n:]
        return n


def _read_member(chunks: Iterable[bytes], max_bytes: int, tail: bool) -> bytes:
    with tarfile.open(fileobj=io.BufferedReader(_ChunkStream(chunks)), mode="r|") as archive:
        member = next(iter(archive), None)
        stream = archive.extractfile(member) if member is not None else None
        if stream is None:
            raise IsADirectoryError("not a regular file")
        if not tail:
            return stream.read(max_bytes)
        kept = bytearray()
        while chunk := stream.read(1 << 16):
            kept += chunk
            del kept[:-max_bytes]
        return bytes(kept)


def _read_members(chunks: Iterable[bytes], max_bytes: int) -> dict[str, bytes]:
    files = {}
    with tarfile.open(fileobj=io.BufferedReader(_ChunkStream(chunks)), mode="r|") as archive:
        for member in archive:
            stream = archive.extractfile(member) if member.isfile() else None
            if stream is not None:
                files[PurePosixPath(member.name).name] = stream.read(max_bytes)
    return files


async def read_directory(handle: SandboxHandle, path: str, max_bytes: int) -> dict[str, bytes]:
    """The first ``max_bytes`` of every regular file in the directory ``path``, by file name, in one round trip."""

    def get() -> dict[str, bytes]:
        try:
            chunks, _ = _client().containers.get(handle.container_id).get_archive(path)
        except docker.errors.NotFound as error:
            raise FileNotFoundError(f"{path} in {handle.name}: {error.explanation}") from None
        return _read_members(chunks, max_bytes)

    return await asyncio.to_thread(get)


async def read_file(handle: SandboxHandle, path: str, max_bytes: int, *, tail: bool = False) -> bytes:
    """The first (or, with ``tail``, the last) ``max_bytes`` of a file; ``FileNotFoundError`` if it is missing."""

    def get() -> bytes:
        try:
            chunks, _ = _client().containers.get(handle.container_id).get_archive(path)
        except docker.errors.NotFound as error:
            raise FileNotFoundError(f"{path} in {handle.name}: {error.explanation}") from None
        return _read_member(chunks, max_bytes, tail)

    return await asyncio.to_thread(get)


# --------------------------------------------------------------------------- exec


async def exec(  # noqa: A001 - the sandbox's verb
    handle: SandboxHandle,
    cmd: str,
    *,
    user: str = AGENT_USER,
    timeout_s: float = 120,
    env: dict[str, str] | None = None,
) -> ExecResult:
    """Run ``bash -lc cmd`` in the workdir and wait at most ``timeout_s`` (plus a small client slack).

    Implemented with the ``docker exec`` CLI as a killable asyncio subprocess;
    the command runs under ``timeout -k 5`` in the container, so on expiry its
    process group is killed and the result says ``timed_out``.
    """
    return await _exec_in(handle.container_id, ["bash", "-lc", cmd], user=user, cwd=handle.workdir, timeout_s=timeout_s, env=env)


# --------------------------------------------------------------------------- detached commands

# The detached-command scripts take the harness directory and the name as $1 and $2.
_RUNNER = ShellScript("docker_sandbox", "sandbox_runner.sh").text
_LAUNCH = ShellScript("docker_sandbox", "sandbox_launch.sh").text
_STATUS = ShellScript("docker_sandbox", "sandbox_status.sh").text
_WAIT = ShellScript("docker_sandbox", "sandbox_wait.sh").text
_KILL = ShellScript("docker_sandbox", "sandbox_kill.sh").text


def _checked_name(name: str) -> str:
    if not _DETACHED_NAME.fullmatch(name):
        raise ValueError(f"detached command name {name!r} must match {_DETACHED_NAME.pattern}")
    return name


def _uid_of(user: str) -> int:
    return {"root": 0, AGENT_USER: AGENT_UID}.get(user, 0)


async def start_detached(handle: SandboxHandle, name: str, cmd: str, *, user: str = AGENT_USER, env: dict[str, str] | None = None) -> None:
    """Start ``cmd`` (a bash script, run as ``bash -l``) in the background in the workdir.

    Files under ``git_workspace.HARNESS_DIR``: ``<name>.sh`` (the script), ``.out`` / ``.err``
    (its output), ``.pid`` (its process group), ``.exit`` (its exit code,
    written atomically once it ends). A name runs at most once per container:
    starting an already-started name raises ``SandboxError`` (re-attach with
    ``wait_detached`` instead) and leaves the running command's files alone.
    Two Docker round trips: the script and runner are staged in one archive,
    and one exec checks, moves them into place and launches.
    """
    _checked_name(name)
    uid = _uid_of(user)
    staged = [
        SandboxFile(git_workspace.harness_file(f"{name}.sh.new"), cmd, uid, 0o755),
        SandboxFile(git_workspace.harness_file(f"{name}.run.new"), _RUNNER, uid, 0o755),
    ]
    await write_files(handle, staged)
    result = await _exec_in(
        handle.container_id,
        ["bash", "-c", _LAUNCH, "launch", HARNESS_DIR, name],
        user=user,
        cwd=handle.workdir,
        timeout_s=30,
        env=env,
    )
    if result.exit_code == 5:
        raise SandboxError(f"detached command {name} already started in {handle.name}")
    if result.exit_code != 0:
        raise SandboxError(f"could not start {name} in {handle.name}: {result.output.strip()}")


async def detached_status(handle: SandboxHandle, name: str) -> DetachedStatus:
    result = await _harness(handle, _STATUS, HARNESS_DIR, _checked_name(name))
    word, _, value = result.output.strip().partition(" ")
    if word == "none":
        return DetachedStatus(started=False, running=False)
    if word == "exit":
        return DetachedStatus(started=True, running=False, exit_code=int(value))
    return DetachedStatus(started=True, running=word == "running")


async def wait_detached(handle: SandboxHandle, name: str, timeout_s: float) -> int | None:
    """The exit code of ``name`` once it ends (at once if it already has), or None after ``timeout_s``.

    One blocking ``docker exec`` polls the exit marker every 0.2 s. Cancelling
    the awaiting task kills that client; the in-container poll then ends at
    its own ``timeout``, so long waits are best done in slices.
    """
    result = await _harness(handle, _WAIT, HARNESS_DIR, _checked_name(name), timeout_s=timeout_s)
    if result.timed_out:
        return None
    if result.exit_code == 3:
        raise SandboxError(f"detached command {name} was never started in {handle.name}")
    if result.exit_code == 4:
        raise SandboxError(f"detached command {name} in {handle.name} lost its runner before exiting")
    if result.exit_code != 0 or not result.output.strip().lstrip("-").isdigit():
        raise SandboxError(f"waiting for {name} in {handle.name} was interrupted: {result.output.strip()[:200]!r}")
    return int(result.output.strip())


async def kill_detached(handle: SandboxHandle, name: str) -> None:
    """TERM the command's process group, KILL it after 5 s; the runner then records 143 or 137."""
    await _harness(handle, _KILL, HARNESS_DIR, _checked_name(name))


# --------------------------------------------------------------------------- git


def _diff_report(status: str, omitted: bytes) -> DiffReport:
    word, amount, count = status.split()
    fields = omitted.split(b"\0")
    listed = [
        OmittedFile(path=path.decode("utf-8", errors="replace"), size_bytes=int(size))
        for size, path in zip(fields[0:-1:2], fields[1::2], strict=False)
    ]
    limit = f"the {MAX_DIFF_BYTES:,}-byte cap"
    note = {
        "ok": "",
        "over": f"the patch is {int(amount):,} bytes, over {limit}",
        "untaken": f"the new files total {int(amount):,} bytes, more than {MAX_NEW_FILES_BYTES:,}: their patch would exceed {limit}",
    }[word]
    return DiffReport(
        patch_bytes=int(amount) if word != "untaken" else 0,
        omitted=listed,
        omitted_count=int(count),
        over_cap=word != "ok",
        note=note,
    )


async def capture_diff(handle: SandboxHandle) -> CapturedDiff:
    """The agent's patch: working tree (tracked and untracked files) against the workspace baseline, and its report.

    The baseline is the tree recorded at boot after ``before_repo_set_cmd`` and
    the pre-commands, so their side effects are not part of the patch (a
    grading sandbox reproduces them before applying it); it falls back to
    ``HEAD``. Excludes ``git_workspace.DIFF_EXCLUDES``; ``--binary`` keeps binary files.
    New files over ``MAX_DIFF_FILE_BYTES`` (and baseline files grown past
    ``MAX_NEW_FILES_BYTES``) are left out and named; a patch still
    over ``MAX_DIFF_BYTES`` (or new files over ``MAX_NEW_FILES_BYTES``) comes
    back empty with ``report.over_cap``. Raises ``SandboxError`` if git fails.
    Two Docker round trips.
    """
    limits = git_workspace.diff_args(MAX_DIFF_FILE_BYTES, MAX_DIFF_BYTES, MAX_NEW_FILES_BYTES, MAX_LISTED_OMISSIONS)
    result = await _harness(handle, git_workspace.DIFF_SCRIPT.text, *limits, timeout_s=300)
    if result.exit_code != 0:
        raise SandboxError(f"git diff failed in {handle.name}: {result.output.strip()[-2000:]}")
    files = await read_directory(handle, DIFF_OUT, MAX_DIFF_BYTES + 1)
    report = _diff_report(files["status"].decode(), files["omitted"])
    return CapturedDiff(diff=files.get("patch", b"").decode("utf-8", errors="replace"), report=report)


async def _record_baseline(handle: SandboxHandle) -> None:
    snapshot = git_workspace.SNAPSHOT_SCRIPT.text
    result = await _harness(handle, snapshot, *git_workspace.snapshot_args(), timeout_s=300, user=AGENT_USER)
    if result.exit_code != 0:
        raise SandboxError(f"could not snapshot the workspace of {handle.name}: {result.output.strip()[-2000:]}")


# --------------------------------------------------------------------------- boot


_PREPARE = ShellScript("docker_sandbox", "sandbox_prepare.sh").text


def _labels(request: SandboxRequest, host_queue: str, lifetime_s: int) -> dict[str, str]:
    values = {
        "managed": "1",
        "workflow_id": request.workflow_id,
        "attempt": str(request.attempt),
        "instance_id": request.task.instance_id,
        "purpose": request.purpose,
        "host_queue": host_queue,
        "expires_at": str(int(time.time()) + lifetime_s),
        "owner": os.environ.get(OWNER_ENV, socket.gethostname()),
    }
    return {f"{LABEL_PREFIX}.{key}": value for key, value in values.items()}


def _container_name(request: SandboxRequest) -> str:
    digest = hashlib.sha256(request.workflow_id.encode()).hexdigest()[:10]
    return f"rollout-{digest}-{request.attempt}-{request.purpose}-{secrets.token_hex(3)}"


def _create_container(
    request: SandboxRequest,
    *,
    host_queue: str,
    lifetime_s: int,
    claude_code: Path | None,
    network: str | None,
    limits: SandboxLimits,
) -> tuple[str, str]:
    """Create and start the container (blocking); a container that fails to start is removed."""
    name = _container_name(request)
    mounts = []
    if claude_code is not None:
        target = CLAUDE_MOUNT_ROOT if claude_code.is_dir() else CLAUDE_MOUNT_PATH
        mounts.append(Mount(target, str(claude_code), type="bind", read_only=True))
    try:
        container = _client().containers.create(
            request.task.image,
            entrypoint=["sleep"],
            command=[str(lifetime_s)],
            name=name,
            labels=_labels(request, host_queue, lifetime_s),
            working_dir=request.task.workdir,
            init=True,
            auto_remove=False,
            nano_cpus=int(limits.cpus * 1e9),
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,
            pids_limit=limits.pids,
            mounts=mounts,
            network=network,
            cap_drop=["ALL"],
            cap_add=PREPARE_CAPABILITIES,
            security_opt=["no-new-privileges"],
        )
    except docker.errors.ImageNotFound:
        raise SandboxImageMissing(
            f"image {request.task.image} is not present locally (no registry: build it, e.g. scripts/build_task_images.sh)"
        ) from None
    try:
        container.start()
    except BaseException:
        container.remove(force=True)
        raise
    return container.id, name


async def _create(request: SandboxRequest, **options: Any) -> tuple[str, str]:
    """Create the container; if cancelled meanwhile, wait for the thread and remove what it made."""
    creation = asyncio.ensure_future(asyncio.to_thread(_create_container, request, **options))
    try:
        return await asyncio.shield(creation)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            container_id, _ = await creation
            await asyncio.to_thread(_remove, container_id)
        raise


async def _run_step(handle: SandboxHandle, command: str, label: str) -> None:
    result = await exec(handle, "set -e\n" + command, user=AGENT_USER, timeout_s=PREPARE_TIMEOUT_S)
    if result.exit_code != 0:
        why = "timed out" if result.timed_out else f"exit {result.exit_code}"
        raise SandboxError(f"{label} failed ({why}): {command[:300]!r}\n{result.output[-2000:]}")


async def _prepare_workspace(handle: SandboxHandle, request: SandboxRequest) -> None:
    task = request.task
    setup = await _exec_in(
        handle.container_id,
        ["bash", "-c", _PREPARE, "prepare", task.workdir, HARNESS_DIR, AGENT_USER, str(AGENT_UID), AGENT_HOME, SWEBENCH_TESTBED_BIN],
        user="root",
        cwd="/",
        timeout_s=PREPARE_TIMEOUT_S,
    )
    if setup.exit_code != 0:
        raise SandboxError(f"workspace setup failed in {handle.name}: {setup.output.strip()[-2000:]}")
    if task.swepro is not None and task.swepro.before_repo_set_cmd:
        await _run_step(handle, task.swepro.before_repo_set_cmd, "before_repo_set_cmd")
    for index, command in enumerate(task.pre_commands):
        await _run_step(handle, command, f"pre_commands[{index}]")
    await _record_baseline(handle)
    if request.purpose == "agent":
        await write_files(
            handle,
            [
                SandboxFile(f"{AGENT_HOME}/.claude.json", json.dumps(CLAUDE_CONFIG), AGENT_UID, 0o600),
                SandboxFile(f"{task.workdir.rstrip('/')}/{PROBLEM_STATEMENT_FILE}", task.problem_statement, AGENT_UID),
            ],
        )


async def boot(
    request: SandboxRequest,
    *,
    host_queue: str = "",
    lifetime_s: int = 3600,
    claude_code: Path | None = None,
    network: str | None = None,
    limits: SandboxLimits = DEFAULT_LIMITS,
) -> SandboxHandle:
    """Start a container from the task image and prepare its workspace.

    Preparation: the ``agent`` user (uid 1000), ``safe.directory '*'``, the
    workdir owned by ``agent``, then (as ``agent``, ``set -e``, in the workdir)
    ``before_repo_set_cmd`` and each pre-command, then the baseline snapshot
    for ``capture_diff``, then (purpose "agent" only) ``PROBLEM_STATEMENT.md``
    and a Claude Code config that skips onboarding, then, with a disk budget,
    the writable layer's size (``disk_baseline_bytes``, the budget's zero). Any failure after the container
    exists removes it before raising. At most ``MAX_CONCURRENT_BOOTS`` boots
    run at once per process.
    """
    async with _boot_slots:
        container_id, name = await _create(
            request,
            host_queue=host_queue,
            lifetime_s=lifetime_s,
            claude_code=claude_code,
            network=network,
            limits=limits,
        )
        handle = SandboxHandle(container_id=container_id, name=name, workdir=request.task.workdir, host_queue=host_queue)
        try:
            await _prepare_workspace(handle, request)
            if limits.disk_bytes > 0:
                handle.disk_baseline_bytes = await layer_bytes(container_id)
        except BaseException:
            await asyncio.shield(destroy(handle))
            raise
    return handle


# --------------------------------------------------------------------------- destroy and reap


def _remove(container_id: str) -> None:
    try:
        _client().containers.get(container_id).remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if error.status_code != 409:  # 409: removal already in progress
            raise


async def destroy(handle: SandboxHandle) -> None:
    """Force-remove the container; a container that is already gone is fine."""
    await asyncio.to_thread(_remove, handle.container_id)


async def list_managed() -> list[ManagedContainer]:
    """Every container (running or not) labelled ``io.rollouts.managed=1``."""

    def listing() -> list[ManagedContainer]:
        found = _client().containers.list(all=True, sparse=True, filters={"label": f"{LABEL_PREFIX}.managed=1"})
        return [
            ManagedContainer(
                id=c.attrs["Id"],
                name=(c.attrs.get("Names") or [""])[0].lstrip("/"),
                state=c.attrs.get("State", ""),
                labels=c.attrs.get("Labels") or {},
            )
            for c in found
        ]

    return await asyncio.to_thread(listing)


async def reap(predicate: Callable[[ManagedContainer], bool]) -> list[str]:
    """Remove the managed containers ``predicate`` selects; returns their names."""
    doomed = [container for container in await list_managed() if predicate(container)]
    for container in doomed:
        await asyncio.to_thread(_remove, container.id)
    return [container.name for container in doomed]


async def reap_expired(now: float | None = None) -> list[str]:
    """Remove managed containers whose ``expires_at`` label lies before ``now`` (default: the current time)."""
    cutoff = time.time() if now is None else now

    def expired(container: ManagedContainer) -> bool:
        stamp = container.labels.get(f"{LABEL_PREFIX}.expires_at", "")
        return stamp.isdigit() and int(stamp) < cutoff

    return await reap(expired)


# --------------------------------------------------------------------------- Temporal activities


@contextlib.asynccontextmanager
async def heartbeating(details: Callable[[], Any], interval_s: float = 5.0):
    """Heartbeat ``details()`` every ``interval_s`` while the body runs (so cancellation reaches it)."""

    async def beat() -> None:
        while True:
            activity.heartbeat(details())
            await asyncio.sleep(interval_s)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


BOOT_FAILURES = Translation(
    Failure(SandboxImageMissing, ErrorType.SANDBOX_IMAGE_MISSING),
    Failure(swebench.NotEvaluable, ErrorType.NOT_EVALUABLE),
    Failure(SandboxError, ErrorType.SANDBOX_BOOT_ERROR),
)
DIFF_FAILURES = Translation(Failure(SandboxGone, ErrorType.SANDBOX_GONE), Failure(SandboxError, ErrorType.GIT_DIFF_FAILED))


@activity.defn(name="boot_sandbox")
async def boot_sandbox(request: SandboxRequest) -> SandboxHandle:
    """Boot with the worker's settings; non-transient failures are non-retryable
    (``SandboxImageMissing``, ``SandboxBootError``). An agent sandbox is not booted
    for a SWE-bench row this worker could not grade (``NotEvaluable``), so no
    agent run is spent on it. It heartbeats from its start (the workflow gives it a
    short heartbeat timeout, so a worker lost mid-boot is noticed in seconds)."""
    settings = sandbox_settings()
    try:
        async with heartbeating(lambda: {"phase": "boot"}):
            if request.purpose == "agent" and request.task.grader == "swebench":
                await swebench.require_eval_script(request.task)
            return await boot(
                request,
                host_queue=settings.host_queue,
                lifetime_s=settings.lifetime_s,
                claude_code=settings.claude_code,
                network=settings.network,
                limits=settings.limits,
            )
    except BOOT_FAILURES.handled as error:
        raise BOOT_FAILURES(error) from error


@activity.defn(name="capture_diff")
async def capture_diff_activity(handle: SandboxHandle) -> CapturedDiff:
    """``capture_diff``, heartbeating; non-retryable failures: ``SandboxGone`` (the container died), ``GitDiffFailed``."""
    try:
        async with heartbeating(lambda: {"phase": "diff"}):
            return await capture_diff(handle)
    except DIFF_FAILURES.handled as error:
        raise DIFF_FAILURES(error) from error


@activity.defn(name="git_diff")
async def git_diff_activity(handle: SandboxHandle) -> str:
    """The bare patch text, for rollouts whose workflow scheduled ``git_diff`` (code before ``capture_diff``);
    a patch over the cap is ``GitDiffFailed`` there, as that code expects."""
    captured = await capture_diff_activity(handle)
    if captured.report.over_cap:
        raise application_error(SandboxError(f"the diff in {handle.name} is over the cap: {captured.report.note}"), ErrorType.GIT_DIFF_FAILED)
    return captured.diff


@activity.defn(name="destroy_sandbox")
async def destroy_sandbox(handle: SandboxHandle) -> None:
    await destroy(handle)
