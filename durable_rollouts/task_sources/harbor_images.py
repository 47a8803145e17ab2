"""The image a Harbor task runs in: its prebuilt ``[environment] docker_image``, or its ``environment/Dockerfile``
built on this Docker engine (the engine of the process reading the tasks: docs/task_sources.md, *Harbor task
directories*, says how a fleet's workers get the images).

Invariants:

* A built image's tag is ``harbor-<task name>:<hash>``, the hash over every file of the environment directory
  (``environment_hash``), so the image is rebuilt exactly when that directory changes, and an image already
  carrying the tag is used as it is. A build pulls nothing, so the Dockerfile builds ``FROM`` a local image; a
  prebuilt ``docker_image`` the engine lacks is pulled as ``ImageSettings`` says, and never rebuilt.
* The task's workdir is the image's ``WORKDIR``; an image without one (or with ``/``) is refused, since the
  agent's diff is taken over the workdir. Every failure is an ``ImageProblem`` naming the task's field
  (``environment.docker_image``, ``environment/Dockerfile``) and, for a build, the end of its log.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from durable_rollouts.docker_sandbox.errors import RegistryUnavailable, SandboxError
from durable_rollouts.docker_sandbox.image_pull import pull_image
from durable_rollouts.docker_sandbox.image_settings import ImageSettings

HASH_LABEL = "io.rollouts.harbor-environment-hash"
BUILD_LOG_TAIL_BYTES = 2000
_NOT_IN_TAG = re.compile(r"[^a-z0-9._-]+")


class ImageProblem(ValueError):
    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


@dataclass(frozen=True)
class TaskImage:
    """The image a task's sandboxes boot from, its workdir, and whether this call built it."""

    image: str
    workdir: str
    built: bool = False


def environment_hash(directory: Path) -> str:
    """16 hex digits over the directory's files (path, executable bit, content; symlinks by target), in path order."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
            path = Path(root) / name
            relative = path.relative_to(directory).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                digest.update(f"L\0{relative}\0{os.readlink(path)}\n".encode())
            elif stat.S_ISREG(info.st_mode):
                executable = "x" if info.st_mode & 0o111 else "-"
                digest.update(
                    f"F\0{relative}\0{executable}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode()
                )
    return digest.hexdigest()[:16]


def image_tag(task_name: str, directory: Path) -> str:
    """``harbor-<name>:<environment hash>``; the name lower-cased, anything a tag cannot hold replaced by ``-``."""
    slug = _NOT_IN_TAG.sub("-", task_name.lower()).strip("-._")[:100] or "task"
    return f"harbor-{slug}:{environment_hash(directory)}"


class HarborImages:
    """Finds or builds Harbor task images on one Docker engine (the client is made on first use unless given)."""

    def __init__(self, client: docker.DockerClient | None = None, images: ImageSettings | None = None):
        self._client = client
        self.images = images or ImageSettings()

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            self._client = docker.from_env()
        return self._client

    def resolve(self, task_name: str, environment: Path, docker_image: str | None, build_timeout_s: float) -> TaskImage:
        """The task's image and workdir: ``docker_image`` if named, else its ``environment/Dockerfile`` built once.
        An engine that cannot be reached fails the task too (``environment``), so the other tasks are still tried."""
        try:
            return self._resolve(task_name, environment, docker_image, build_timeout_s)
        except docker.errors.DockerException as error:
            raise ImageProblem("environment", f"the Docker engine failed: {error}") from None

    def _resolve(
        self, task_name: str, environment: Path, docker_image: str | None, build_timeout_s: float
    ) -> TaskImage:
        if docker_image:
            return TaskImage(docker_image, self._workdir(self._prebuilt(docker_image), "environment.docker_image"))
        if not (environment / "Dockerfile").is_file():
            raise ImageProblem("environment/Dockerfile", "missing (and task.toml names no environment.docker_image)")
        try:
            tag = image_tag(task_name, environment)
        except OSError as error:
            raise ImageProblem("environment", f"unreadable ({error})") from None
        image = self._present(tag)
        built = image is None
        if image is None:
            self._build(environment, tag, build_timeout_s)
            image = self._present(tag)
            if image is None:
                raise ImageProblem(
                    "environment/Dockerfile", f"the build reported success but {tag} is not on the engine"
                )
        return TaskImage(tag, self._workdir(image, "environment/Dockerfile"), built)

    def _prebuilt(self, docker_image: str) -> docker.models.images.Image:
        """The task's ``docker_image`` on this engine, pulled if the engine lacks it and the policy allows."""
        name = self.images.local_name(docker_image)
        image = self._present(name)
        if image is None and self.images.pull_policy != "never":
            try:
                pull_image(self.client, name, self.images.auth_for(name))
            except (SandboxError, RegistryUnavailable) as error:
                raise ImageProblem("environment.docker_image", str(error)) from None
            image = self._present(name)
        if image is None:
            raise ImageProblem(
                "environment.docker_image",
                f"{name} is not present on this Docker engine and ROLLOUT_PULL_POLICY is never",
            )
        return image

    def _present(self, name: str) -> docker.models.images.Image | None:
        try:
            return self.client.images.get(name)
        except docker.errors.ImageNotFound:
            return None

    @staticmethod
    def _workdir(image: docker.models.images.Image, field: str) -> str:
        workdir = ((image.attrs.get("Config") or {}).get("WorkingDir") or "").rstrip("/")
        if not workdir:
            raise ImageProblem(
                field,
                "the image sets no WORKDIR (or WORKDIR /): the agent works, and its diff is taken, in the WORKDIR",
            )
        return workdir

    def _build(self, environment: Path, tag: str, timeout_s: float) -> None:
        log: list[str] = []
        try:
            # The engine's legacy builder (the SDK's ``/build``, no BuildKit); ``forcerm`` removes the intermediate
            # containers even when the build fails; ``timeout`` is the SDK's read timeout: how long the engine may
            # stay silent, not the build's total time.
            for chunk in self.client.api.build(
                path=str(environment),
                dockerfile="Dockerfile",
                tag=tag,
                pull=False,
                rm=True,
                forcerm=True,
                decode=True,
                labels={HASH_LABEL: tag.rpartition(":")[2]},
                timeout=max(1, int(timeout_s)),
            ):
                if "stream" in chunk:
                    log.append(str(chunk["stream"]))
                if "error" in chunk:
                    raise ImageProblem(
                        "environment/Dockerfile", f"the build failed: {str(chunk['error']).strip()}\n{_tail(log)}"
                    )
        except (docker.errors.APIError, docker.errors.BuildError) as error:
            raise ImageProblem("environment/Dockerfile", f"the build failed: {error}\n{_tail(log)}") from None
        except requests.exceptions.ReadTimeout:
            raise ImageProblem(
                "environment/Dockerfile",
                f"the build was silent for more than build_timeout_sec ({timeout_s:g} s)\n{_tail(log)}",
            ) from None


def _tail(log: list[str]) -> str:
    text = "".join(log).strip()
    return text.encode()[-BUILD_LOG_TAIL_BYTES:].decode("utf-8", errors="replace")
