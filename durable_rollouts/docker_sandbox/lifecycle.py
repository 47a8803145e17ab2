"""Container lifecycle: boot a sandbox from its task image and prepare its workspace, destroy it, reap leftovers.

Invariants:

* Every container created here carries ``io.rollouts.managed=1`` plus labels naming its workflow, attempt,
  instance, purpose, host queue and expiry time, and runs ``sleep <lifetime_s>`` under ``init``, so it
  stops on its own if every worker dies; the reaper removes what is left.
* Blocking Docker SDK calls run in threads (``asyncio.to_thread``); a boot cancelled while its container is
  being created removes that container once the creation returns.
* Root inside an agent sandbox only prepares the workspace (user, ownership, pre-commands); the agent runs
  as ``agent``, and no-new-privileges keeps it from regaining the few capabilities preparation needs. A
  grading sandbox runs everything as root and keeps the image's ownership.
* Grading containers have no network (Docker's ``none``) unless ``SandboxSettings.grading_offline`` is
  off; agent containers join ``SandboxSettings.network``. With ``offline_tools`` every container's
  environment is ``offline_tools.OFFLINE_ENV``.
* Claude Code is bind-mounted read-only into agent sandboxes only, never copied: an executable at
  ``/opt/claude/bin/claude``, or an install directory (``durable_rollouts.claude_code.tarballs``) at ``/opt/claude``
  whose ``bin/claude`` runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import docker
import docker.errors
from docker.types import Mount
from pydantic import BaseModel

from durable_rollouts.contracts.sandboxes import SandboxHandle, SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox import workspace_diff
from durable_rollouts.docker_sandbox.container_layout import (
    AGENT_HOME,
    AGENT_UID,
    AGENT_USER,
    CLAUDE_CONFIG,
    CLAUDE_MOUNT_PATH,
    CLAUDE_MOUNT_ROOT,
    LABEL_PREFIX,
    OWNER_ENV,
    SWEBENCH_TESTBED_BIN,
)
from durable_rollouts.docker_sandbox.detached import DetachedCommands
from durable_rollouts.docker_sandbox.errors import SandboxError, SandboxImageMissing
from durable_rollouts.docker_sandbox.files import SandboxFile, files_step
from durable_rollouts.docker_sandbox.git_workspace import HARNESS_DIR, PROBLEM_STATEMENT_FILE
from durable_rollouts.docker_sandbox.image_cache import ImageCache
from durable_rollouts.docker_sandbox.image_pull import ImagePuller, ProgressListener
from durable_rollouts.docker_sandbox.limits import SandboxLimits, SandboxSettings, task_limits
from durable_rollouts.docker_sandbox.offline_tools import offline_environment
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript
from durable_rollouts.docker_sandbox.workspace_diff import WorkspaceDiff

PREPARE_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"]
PREPARE_TIMEOUT_S = 900.0
_PREPARE = ShellScript("durable_rollouts.docker_sandbox", "sandbox_prepare.sh")
_PREPARE_FAILED = 85


class ManagedContainer(BaseModel):
    id: str
    name: str
    state: str
    labels: dict[str, str]


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


def expired_before(cutoff: float) -> Callable[[ManagedContainer], bool]:
    """Selects managed containers whose ``expires_at`` label lies before ``cutoff``."""

    def expired(container: ManagedContainer) -> bool:
        stamp = container.labels.get(f"{LABEL_PREFIX}.expires_at", "")
        return stamp.isdigit() and int(stamp) < cutoff

    return expired


class ContainerLifecycle(DetachedCommands, WorkspaceDiff):
    """Needs ``settings`` (how to boot), ``boot_slots`` (how many boots at once) and ``images`` (the puller),
    given by ``DockerSandboxes``."""

    settings: SandboxSettings
    boot_slots: asyncio.Semaphore
    images: ImagePuller
    image_cache: ImageCache

    def _create_container(
        self, image: str, request: SandboxRequest, lifetime_s: int, limits: SandboxLimits
    ) -> tuple[str, str]:
        """Create and start the container from ``image`` (blocking); a container that fails to start is
        removed. Raises ``docker.errors.ImageNotFound`` when the engine lacks ``image``."""
        name = _container_name(request)
        claude_code: Path | None = self.settings.claude_code if request.purpose == "agent" else None
        mounts = []
        if claude_code is not None:
            target = CLAUDE_MOUNT_ROOT if claude_code.is_dir() else CLAUDE_MOUNT_PATH
            mounts.append(Mount(target, str(claude_code), type="bind", read_only=True))
        offline = request.purpose == "grading" and self.settings.grading_offline
        container = self.client.containers.create(
            image,
            entrypoint=["sleep"],
            command=[str(lifetime_s)],
            name=name,
            labels=_labels(request, self.settings.host_queue, lifetime_s),
            working_dir=request.task.workdir,
            init=True,
            auto_remove=False,
            nano_cpus=int(limits.cpus * 1e9),
            mem_limit=limits.memory_bytes,
            memswap_limit=limits.memory_bytes,
            pids_limit=limits.pids,
            mounts=mounts,
            network=None if offline else self.settings.network,
            network_mode="none" if offline else None,
            environment=offline_environment() if self.settings.offline_tools else None,
            cap_drop=["ALL"],
            cap_add=PREPARE_CAPABILITIES,
            security_opt=["no-new-privileges"],
        )
        try:
            container.start()
        except BaseException:
            container.remove(force=True)
            raise
        return container.id, name

    def _present(self, image: str) -> bool:
        try:
            self.client.images.get(image)
        except docker.errors.ImageNotFound:
            return False
        return True

    async def _ensure_image(self, image: str, request: SandboxRequest, on_pull: ProgressListener | None) -> bool:
        """Pull ``image`` as the pull policy says (``image_pull``), before the boot takes a boot slot: ``always``
        before every boot, ``missing`` when the engine lacks it (asked of the engine only when the cache does not
        know it held), never under ``never``. Whether it pulled."""
        policy = self.images.settings.pull_policy
        if policy == "always" or (
            policy == "missing"
            and not self.image_cache.holds(image)
            and not await asyncio.to_thread(self._present, image)
        ):
            await self._pull(image, request, on_pull)
            return True
        return False

    async def prefetch(
        self, image: str, timeout_s: float, on_pull: ProgressListener | None = None
    ) -> Literal["pulled", "held", "skipped"]:
        """Have ``image`` (as the rows name it) on this engine before a boot asks for it: ``held`` if it is already
        here, ``skipped`` under the pull policy ``never``, else pulled (joining a pull in flight) and then
        ``pulled``. Either way the cache counts it as just used, so it is the last one a budget removes (and not
        the one this pull's own budget check removes)."""
        local = self.images.settings.local_name(image)
        if self.images.settings.pull_policy == "never":
            return "skipped"
        with self.image_cache.in_use(local):
            if self.image_cache.holds(local) or await asyncio.to_thread(self._present, local):
                self.image_cache.held(local)
                return "held"
            await self.images.pull(local, timeout_s, on_pull)
            self.image_cache.held(local)
            await self.image_cache.enforce()
        return "pulled"

    async def _create(
        self,
        image: str,
        request: SandboxRequest,
        lifetime_s: int,
        limits: SandboxLimits,
        on_pull: ProgressListener | None,
    ) -> tuple[str, str]:
        """Create the container from ``image``; an image gone since ``_ensure_image`` (evicted, removed by hand)
        is pulled again, except under ``never``, where it is missing."""
        try:
            created = await self._create_from(image, request, lifetime_s, limits)
        except docker.errors.ImageNotFound:
            if self.images.settings.pull_policy == "never":
                raise SandboxImageMissing(
                    f"image {image} is not on this host's engine and ROLLOUT_PULL_POLICY is never"
                ) from None
            await self._pull(image, request, on_pull)
            try:
                created = await self._create_from(image, request, lifetime_s, limits)
            except docker.errors.ImageNotFound as error:
                raise SandboxImageMissing(
                    f"image {image} was pulled but the engine cannot run it: {error.explanation}"
                ) from None
        self.image_cache.held(image)
        return created

    async def _pull(self, image: str, request: SandboxRequest, on_pull: ProgressListener | None) -> None:
        """Pull ``image`` (this boot holds it in the cache meanwhile), then bring the cache back under its budget."""
        await self.images.pull(image, request.pull_timeout_s, on_pull)
        await self.image_cache.enforce()

    async def _create_from(
        self, image: str, request: SandboxRequest, lifetime_s: int, limits: SandboxLimits
    ) -> tuple[str, str]:
        """Create the container; if cancelled meanwhile, wait for the thread and remove what it made."""
        creation = asyncio.ensure_future(asyncio.to_thread(self._create_container, image, request, lifetime_s, limits))
        try:
            return await asyncio.shield(creation)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                container_id, _ = await creation
                await asyncio.to_thread(self._remove, container_id)
            raise

    async def _prepare_workspace(self, handle: SandboxHandle, request: SandboxRequest) -> None:
        """The workspace set-up, then the set-up steps, the baseline and the agent's files (``_agent_files``, by the
        same exec when they fit in its arguments, else by an archive after it): two execs in an agent sandbox (the
        steps run as ``agent``), one in a grading sandbox (all as root: the prepare script becomes the steps' exec)."""
        task = request.task
        agent = request.purpose == "agent"
        owned = self.owns_workdir(request)
        user = AGENT_USER if owned else "root"
        steps = [(f"pre_commands[{index}]", command) for index, command in enumerate(task.pre_commands)]
        if task.swepro is not None and task.swepro.before_repo_set_cmd:
            steps.insert(0, ("before_repo_set_cmd", task.swepro.before_repo_set_cmd))
        prepare = [
            "bash",
            "-c",
            _PREPARE.text,
            "prepare",
            task.workdir,
            HARNESS_DIR,
            AGENT_USER,
            str(AGENT_UID),
            AGENT_HOME,
            SWEBENCH_TESTBED_BIN,
            str(int(owned)),
        ]
        files = self._agent_files(task) if agent else []
        write_step = files_step(files) if files else None
        then, limit = workspace_diff.baseline_command(steps, PREPARE_TIMEOUT_S, write_step or "")
        if user == "root":
            result = await self.exec_in(
                handle.container_id, [*prepare, *then], user="root", cwd="/", timeout_s=PREPARE_TIMEOUT_S + limit
            )
            if result.exit_code == _PREPARE_FAILED:
                raise SandboxError(f"workspace setup failed in {handle.name}: {result.output.strip()[-2000:]}")
        else:
            setup = await self.exec_in(handle.container_id, prepare, user="root", cwd="/", timeout_s=PREPARE_TIMEOUT_S)
            if setup.exit_code != 0:
                raise SandboxError(f"workspace setup failed in {handle.name}: {setup.output.strip()[-2000:]}")
            result = await self.exec_in(handle.container_id, then, user=user, cwd=handle.workdir, timeout_s=limit)
        workspace_diff.check_baseline(handle, steps, result)
        if files and write_step is None:
            await self.write_files(handle, files)

    @staticmethod
    def _agent_files(task: TaskSpec) -> list[SandboxFile]:
        """What an agent sandbox holds besides the image: a Claude Code config that skips onboarding and the task's
        problem statement, both the agent's, written after the baseline (and after the set-up steps, which may clean
        the workdir)."""
        return [
            SandboxFile(f"{AGENT_HOME}/.claude.json", json.dumps(CLAUDE_CONFIG), AGENT_UID, 0o600),
            SandboxFile(f"{task.workdir.rstrip('/')}/{PROBLEM_STATEMENT_FILE}", task.problem_statement, AGENT_UID),
        ]

    def owns_workdir(self, request: SandboxRequest) -> bool:
        """Whether the boot gives the workdir to ``agent`` (and runs the pre-commands as ``agent``): in an agent
        sandbox only; a grading sandbox runs everything as root and skips the ``chown -R``."""
        return request.purpose == "agent"

    def limits_for(self, task: TaskSpec) -> SandboxLimits:
        """The limits ``task``'s sandboxes boot with and their disk budget: its resource request capped at the
        settings' limits (``limits.task_limits``)."""
        return task_limits(self.settings.limits, task.resources)

    async def boot(
        self,
        request: SandboxRequest,
        *,
        lifetime_s: int | None = None,
        limits: SandboxLimits | None = None,
        on_pull: ProgressListener | None = None,
    ) -> SandboxHandle:
        """Start a container from the task image and prepare its workspace; ``lifetime_s`` defaults to the
        settings', ``limits`` to ``limits_for(request.task)``.

        Preparation: the ``agent`` user (uid 1000), ``safe.directory '*'``, then in an agent sandbox the
        workdir owned by ``agent`` (a grading sandbox, where everything runs as root, leaves ownership as the
        image has it: no ``chown -R`` of a large repository), then (as the workdir's user: ``agent``, or
        root in a grading sandbox; ``set -e``, in the workdir) ``before_repo_set_cmd`` and each
        pre-command, then the baseline snapshot for ``capture_diff``, then (purpose "agent" only)
        ``PROBLEM_STATEMENT.md`` and a Claude Code config that skips onboarding, then, with a disk budget,
        the writable layer's size (``disk_baseline_bytes``, the budget's zero). Any failure after the
        container exists removes it before raising. At most ``boot_slots`` boots create and prepare containers
        at once; a pull of the task image (``_ensure_image``) waits for no boot slot and reports its progress to
        ``on_pull``.
        """
        lifetime_s = lifetime_s or self.settings.lifetime_s
        limits = limits or self.limits_for(request.task)
        image = self.images.settings.local_name(request.task.image)
        with self.image_cache.in_use(image):
            if not await self._ensure_image(image, request, on_pull):
                self.images.metrics.hit()
            async with self.boot_slots:
                container_id, name = await self._create(image, request, lifetime_s, limits, on_pull)
                handle = SandboxHandle(
                    container_id=container_id,
                    name=name,
                    workdir=request.task.workdir,
                    host_queue=self.settings.host_queue,
                    attempt=request.attempt,
                )
                try:
                    await self._prepare_workspace(handle, request)
                    if limits.disk_bytes > 0:
                        handle.disk_baseline_bytes = await self.layer_bytes(container_id)
                except BaseException:
                    await asyncio.shield(self.destroy(handle))
                    raise
        return handle

    def _remove(self, container_id: str) -> None:
        try:
            self.client.api.remove_container(container_id, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as error:
            if error.status_code != 409:  # 409: removal already in progress
                raise

    async def destroy(self, handle: SandboxHandle) -> None:
        """Force-remove the container; a container that is already gone is fine."""
        await asyncio.to_thread(self._remove, handle.container_id)

    async def list_managed(self) -> list[ManagedContainer]:
        """Every container (running or not) labelled ``io.rollouts.managed=1``."""

        def listing() -> list[ManagedContainer]:
            found = self.client.containers.list(all=True, sparse=True, filters={"label": f"{LABEL_PREFIX}.managed=1"})
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

    async def reap(self, predicate: Callable[[ManagedContainer], bool]) -> list[str]:
        """Remove the managed containers ``predicate`` selects; returns their names."""
        doomed = [container for container in await self.list_managed() if predicate(container)]
        for container in doomed:
            await asyncio.to_thread(self._remove, container.id)
        return [container.name for container in doomed]

    async def reap_expired(self, now: float | None = None) -> list[str]:
        """Remove managed containers whose ``expires_at`` label lies before ``now`` (default: the current time)."""
        return await self.reap(expired_before(time.time() if now is None else now))
