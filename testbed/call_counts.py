"""``DockerSandboxes`` counting the engine calls made through it, by kind: ``exec`` (every command, whichever
verb ran it), ``archive written``, ``archive read``, ``create`` and ``remove``."""

from __future__ import annotations

import collections
from typing import Any

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.commands import ExecResult
from durable_rollouts.docker_sandbox.files import SandboxFile
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes


class CountingSandboxes(DockerSandboxes):
    def __init__(self, settings: SandboxSettings) -> None:
        super().__init__(settings)
        self.calls: collections.Counter[str] = collections.Counter()

    async def exec_in(self, *args: Any, **kwargs: Any) -> ExecResult:
        self.calls["exec"] += 1
        return await super().exec_in(*args, **kwargs)

    async def write_files(self, handle: SandboxHandle, files: list[SandboxFile]) -> None:
        self.calls["archive written"] += 1
        await super().write_files(handle, files)

    async def _read_archive(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["archive read"] += 1
        return await super()._read_archive(*args, **kwargs)

    def _create_container(self, *args: Any, **kwargs: Any) -> tuple[str, str]:
        self.calls["create"] += 1
        return super()._create_container(*args, **kwargs)

    def _remove(self, container_id: str) -> None:
        self.calls["remove"] += 1
        super()._remove(container_id)
