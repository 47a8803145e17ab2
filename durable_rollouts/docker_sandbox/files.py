"""Files into and out of a container: ``put_archive`` of an in-memory tar, ``get_archive`` streamed; or, for a root
exec about to run anyway, small files written by that exec from its arguments (``files_step``)."""

from __future__ import annotations

import asyncio
import io
import tarfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TypeVar

import docker.errors

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.commands import MAX_ARGUMENT_BYTES, DockerAccess
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

T = TypeVar("T")
_WRITE = ShellScript("durable_rollouts.docker_sandbox", "sandbox_write_files.sh")


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


def files_step(files: Iterable[SandboxFile]) -> str | None:
    """Shell text that writes ``files`` as ``write_files`` does (owner, group, mode, missing parents), to run as the
    first step of a root exec (``exec_steps``) instead of an archive of its own; None when it would not fit in one
    exec argument (``MAX_ARGUMENT_BYTES``) or a file is not text a shell can hold (not UTF-8, or a NUL byte)."""
    args: list[str] = []
    for file in files:
        try:
            text = file.data.decode() if isinstance(file.data, bytes) else file.data
        except UnicodeDecodeError:
            return None
        if "\0" in text:
            return None
        args += [file.path, str(file.uid), f"{file.mode:o}", text]
    step = _WRITE.invocation(*args)
    return step if len(step.encode()) <= MAX_ARGUMENT_BYTES else None


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


def _first_member(chunks: Iterable[bytes], max_bytes: int, tail: bool) -> bytes:
    with tarfile.open(fileobj=io.BufferedReader(_ChunkStream(chunks)), mode="r|") as archive:
        member = next(iter(archive), None)
        # Only a regular file is read: a directory, a symlink (never followed) or a device is refused alike.
        stream = archive.extractfile(member) if member is not None and member.isfile() else None
        if stream is None:
            raise IsADirectoryError("not a regular file")
        if not tail:
            return stream.read(max_bytes)
        kept: deque[bytes] = deque()
        size = 0
        while chunk := stream.read(1 << 16):
            kept.append(chunk)
            size += len(chunk)
            while len(kept) > 1 and size - len(kept[0]) >= max_bytes:
                size -= len(kept.popleft())
        return b"".join(kept)[-max_bytes:] if max_bytes > 0 else b""


class TooManyFiles(Exception):
    """A directory holds more regular files than its reader takes."""


def _regular_members(chunks: Iterable[bytes], max_bytes: int, max_files: int | None) -> dict[str, bytes]:
    """The regular files directly in the archived directory (its members one level down), by name."""
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BufferedReader(_ChunkStream(chunks)), mode="r|") as archive:
        for member in archive:
            parts = PurePosixPath(member.name).parts
            stream = archive.extractfile(member) if member.isfile() and len(parts) == 2 else None
            if stream is None:
                continue
            if max_files is not None and len(files) == max_files:
                raise TooManyFiles(f"more than {max_files} files")
            files[parts[1]] = stream.read(max_bytes)
    return files


class ContainerFiles(DockerAccess):
    async def write_files(self, handle: SandboxHandle, files: list[SandboxFile]) -> None:
        """Write every file in one Docker round trip (one archive unpacked at ``/``); missing parents are created (root,
        0755)."""
        archive = _tar(files)

        def put() -> bool:
            return bool(self.client.api.put_archive(handle.container_id, "/", archive))

        if not await asyncio.to_thread(put):
            raise SandboxError(f"could not write {', '.join(file.path for file in files)}")

    async def write_file(
        self, handle: SandboxHandle, path: str, data: bytes | str, *, uid: int = 0, mode: int = 0o644
    ) -> None:
        """Write ``data`` to the absolute ``path``, owned by ``uid``."""
        await self.write_files(handle, [SandboxFile(path, data, uid, mode)])

    async def _read_archive(self, handle: SandboxHandle, path: str, read: Callable[[Iterable[bytes]], T]) -> T:
        """``read`` over the archive of ``path``, in one thread: the response is consumed where it was opened."""

        def get() -> T:
            try:
                chunks, _ = self.client.api.get_archive(handle.container_id, path)
            except docker.errors.NotFound as error:
                raise FileNotFoundError(f"{path} in {handle.name}: {error.explanation}") from None
            return read(chunks)

        return await asyncio.to_thread(get)

    async def read_directory(
        self, handle: SandboxHandle, path: str, max_bytes: int, *, max_files: int | None = None
    ) -> dict[str, bytes]:
        """The first ``max_bytes`` of every regular file directly in the directory ``path``, by file name, in one
        round trip; ``FileNotFoundError`` if it is missing, ``TooManyFiles`` past ``max_files`` files."""
        return await self._read_archive(handle, path, lambda chunks: _regular_members(chunks, max_bytes, max_files))

    async def read_file(self, handle: SandboxHandle, path: str, max_bytes: int, *, tail: bool = False) -> bytes:
        """The first (or, with ``tail``, the last) ``max_bytes`` of a file; ``FileNotFoundError`` if it is missing,
        ``IsADirectoryError`` if it is anything but a regular file (a symlink is not followed)."""
        return await self._read_archive(handle, path, lambda chunks: _first_member(chunks, max_bytes, tail))
