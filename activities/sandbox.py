"""The sandbox activities (``capture_diff``, ``destroy_sandbox``) and the boot that
``RolloutHost.boot_sandbox`` runs: thin faces over ``docker_sandbox.DockerSandboxes``.

Library errors become activity errors here (``BOOT_FAILURES``, ``DIFF_FAILURES``); each face heartbeats
its phase, so a cancellation reaches it and a lost worker is noticed at the heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError

from activities.activity_failures import Failure, Translation
from activities.error_types import ErrorType
from durable_rollouts.contracts.grading import CapturedDiff
from durable_rollouts.contracts.sandboxes import ImagePull, SandboxHandle, SandboxRequest
from durable_rollouts.docker_sandbox.errors import (
    RegistryAuthFailed,
    RegistryUnavailable,
    SandboxError,
    SandboxGone,
    SandboxImageMissing,
)
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import swebench

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def heartbeating(details: Callable[[], Any], interval_s: float = 5.0) -> AsyncIterator[None]:
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


PULL_SIGNAL_INTERVAL_S = 5.0

BOOT_FAILURES = Translation(
    Failure(SandboxImageMissing, ErrorType.SANDBOX_IMAGE_MISSING),
    Failure(RegistryAuthFailed, ErrorType.REGISTRY_AUTH_FAILED),
    Failure(RegistryUnavailable, ErrorType.REGISTRY_UNAVAILABLE, retryable=True),
    Failure(swebench.NotEvaluable, ErrorType.NOT_EVALUABLE),
    Failure(SandboxError, ErrorType.SANDBOX_BOOT_ERROR),
)
DIFF_FAILURES = Translation(
    Failure(SandboxGone, ErrorType.SANDBOX_GONE), Failure(SandboxError, ErrorType.GIT_DIFF_FAILED)
)


@contextlib.asynccontextmanager
async def signalling_pulls(client: Client | None, workflow_id: str) -> AsyncIterator[Callable[[ImagePull], None]]:
    """A listener for an image pull's progress that sends the latest to the workflow's ``image_pull`` signal
    at most every ``PULL_SIGNAL_INTERVAL_S``; its sender starts with the first progress, so a boot that pulls
    nothing (or has no client) runs no extra task."""
    latest: dict[str, ImagePull] = {}

    async def send() -> None:
        sent: ImagePull | None = None
        assert client is not None
        while True:
            await asyncio.sleep(PULL_SIGNAL_INTERVAL_S)
            current = latest.get("pull")
            if current is not None and current != sent:
                sent = current
                try:
                    await client.get_workflow_handle(workflow_id).signal("image_pull", sent)
                except (RPCError, RuntimeError) as error:
                    log.debug("image_pull signal to %s failed: %s", workflow_id, error)

    sender: list[asyncio.Task[None]] = []

    def remember(progress: ImagePull) -> None:
        latest["pull"] = progress
        if not sender and client is not None:
            sender.append(asyncio.create_task(send()))

    try:
        yield remember
    finally:
        for task in sender:
            task.cancel()


async def boot_sandbox(
    sandboxes: DockerSandboxes, request: SandboxRequest, client: Client | None = None
) -> SandboxHandle:
    """Boot with the worker's settings; non-transient failures are non-retryable (``SandboxImageMissing``,
    ``RegistryAuthFailed``, ``SandboxBootError``); ``RegistryUnavailable`` is retried. An agent sandbox is not
    booted for a SWE-bench row this worker could not grade (``NotEvaluable``), so no agent run is spent on
    it. It heartbeats from its start (the workflow gives it a short heartbeat timeout, so a worker lost
    mid-boot is noticed in seconds); while the host pulls the task image the heartbeat carries the pull's
    progress (``{"phase": "pull", "pull": ...}``) and, with ``client``, the workflow hears it too."""
    details: dict[str, Any] = {"phase": "boot"}
    try:
        async with signalling_pulls(client, request.workflow_id) as tell_workflow, heartbeating(lambda: dict(details)):

            def on_pull(progress: ImagePull) -> None:
                mine = progress.model_copy(update={"attempt": request.attempt})
                details.update(phase="pull", pull=mine.model_dump(mode="json"))
                tell_workflow(mine)

            if request.purpose == "agent" and request.task.grader == "swebench":
                await swebench.require_eval_script(request.task)
            return await sandboxes.boot(request, on_pull=on_pull)
    except BOOT_FAILURES.handled as error:
        raise BOOT_FAILURES(error) from error


class SandboxActivities:
    """The activities on a sandbox some earlier activity booted; registered on the host's own queue."""

    def __init__(self, sandboxes: DockerSandboxes):
        self.sandboxes = sandboxes

    @activity.defn(name="capture_diff")
    async def capture_diff(self, handle: SandboxHandle) -> CapturedDiff:
        """``capture_diff``, heartbeating; non-retryable failures: ``SandboxGone`` (the container died),
        ``GitDiffFailed``. The patch travels in the result (over the cap nothing was captured); the rollout keeps it in
        its own result (``DiffReport.kept_patch``) for a re-grade."""
        try:
            async with heartbeating(lambda: {"phase": "diff"}):
                return await self.sandboxes.capture_diff(handle)
        except DIFF_FAILURES.handled as error:
            raise DIFF_FAILURES(error) from error

    @activity.defn(name="destroy_sandbox")
    async def destroy_sandbox(self, handle: SandboxHandle) -> None:
        await self.sandboxes.destroy(handle)
