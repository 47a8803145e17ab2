"""A task image holding a large repository: ``rollout-base:bookworm`` plus a committed git repository of small
Python files at ``/testbed`` (SWE-bench Verified's pylint-8898 has 5,569), built for one bench run and removed."""

from __future__ import annotations

import asyncio
import io
import tarfile
import uuid

import docker

from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.container_layout import BASE_IMAGE

# A one-line fix of the repository's first module, and the command that checks it.
PATCH = """diff --git a/pkg/m0.py b/pkg/m0.py
--- a/pkg/m0.py
+++ b/pkg/m0.py
@@ -1 +1 @@
-VALUE = 0
+VALUE = 42
"""
CHECK = "python3 -c 'import pkg.m0 as m; assert m.VALUE == 42'"


def repository_context(files: int) -> io.BytesIO:
    """A build context: the base image plus ``files`` modules in ``pkg/`` (spread over 50 folders), committed."""
    dockerfile = (
        f"FROM {BASE_IMAGE}\n"
        "COPY testbed /testbed\n"
        "RUN cd /testbed && git init -q && git add -A && "
        "git -c user.email=b@b -c user.name=bench commit -qm base\n"
        "WORKDIR /testbed\n"
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:

        def add(name: str, text: str) -> None:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("Dockerfile", dockerfile)
        for index in range(files):
            folder = "pkg" if index == 0 else f"pkg/sub{index % 50}"
            add(f"testbed/{folder}/m{index}.py", f"VALUE = {index if index else 0}\n" + "# filler line\n" * 20)
    buffer.seek(0)
    return buffer


async def build_repo_image(client: docker.DockerClient, files: int) -> str:
    """Build the image (a fresh tag per run) and return its name; the caller removes it."""
    image = f"rollouts-bench-repo:{uuid.uuid4().hex[:8]}"
    print(f"building {image}: {BASE_IMAGE} + a git repository of {files} files at /testbed", flush=True)
    await asyncio.to_thread(
        client.images.build, fileobj=repository_context(files), custom_context=True, tag=image, rm=True
    )
    return image


def repo_task(image: str, instance_id: str) -> TaskSpec:
    """A task on that image whose fix is ``PATCH``."""
    return TaskSpec(
        instance_id=instance_id, image=image, workdir="/testbed", problem_statement="set VALUE to 42", eval_cmd=CHECK
    )
