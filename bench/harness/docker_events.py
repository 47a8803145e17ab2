"""``docker events`` of the managed containers, streamed live while a bench runs.

The daemon replays only about 256 past events, so the stream starts before the first rollout and is read as it
comes: container create/start/die, every exec_create/exec_die and archive call, with nanosecond times, each tied
to its workflow and purpose (``agent`` or ``grading``) by the container's labels.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
from dataclasses import dataclass

from durable_rollouts.docker_sandbox.container_layout import LABEL_PREFIX


@dataclass
class DockerEvent:
    t: float
    action: str  # create, start, exec_create, exec_start, exec_die, extract-to-dir, archive-path, kill, die, destroy
    container_id: str
    workflow_id: str
    purpose: str


class DockerEvents:
    """``docker events`` for managed containers, streamed live (the daemon replays only ~256 past events)."""

    def __init__(self) -> None:
        self.events: list[DockerEvent] = []
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            shutil.which("docker") or "docker",
            "events",
            "--filter",
            "type=container",
            "--filter",
            f"label={LABEL_PREFIX}.managed=1",
            "--format",
            "{{json .}}",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            stdin=asyncio.subprocess.DEVNULL,
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while line := await self._proc.stdout.readline():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                raw = json.loads(line)
                attrs = raw.get("Actor", {}).get("Attributes", {}) or {}
                self.events.append(
                    DockerEvent(
                        raw["timeNano"] / 1e9,
                        str(raw.get("Action", "")).split(":")[0],
                        raw.get("Actor", {}).get("ID", ""),
                        attrs.get(f"{LABEL_PREFIX}.workflow_id", ""),
                        attrs.get(f"{LABEL_PREFIX}.purpose", ""),
                    )
                )

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.terminate()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 5)
            if self._proc.returncode is None:
                self._proc.kill()
                await self._proc.wait()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    def of(self, workflow_id: str, purpose: str) -> list[DockerEvent]:
        """The events of one workflow's containers with that purpose, in the order they came."""
        return [e for e in self.events if e.workflow_id == workflow_id and e.purpose == purpose]
