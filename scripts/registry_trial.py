"""The example tasks with their images from a registry, on an engine emptied of them: ``python -m
scripts.registry_trial``.

Starts Debian's ``docker-registry`` on loopback with htpasswd auth (``testbed.local_registry``), pushes the
image of every example row and Harbor task to it under ``examples/``, removes those images from this engine, then
runs ``starter.py demo`` (a local dev server, a worker and ``starter.py run``'s path) over the example rows and
over the Harbor tasks with a mirror rule sending Docker Hub library names to the registry and its credentials in
the settings. It prints each image's pulls (one per host: this machine is one host) and each run's
exit code, and puts the engine's images back under their own names however it ends. Needs ``make setup``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import docker
import docker.errors

from durable_rollouts.paths import EXAMPLE_DATASET, PROJECT_ROOT
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.task_sources.harbor_tasks import read_harbor_tasks
from testbed.local_registry import LocalRegistry, image_present

HARBOR_TASKS = PROJECT_ROOT / "examples" / "harbor_tasks"


def example_images() -> list[str]:
    """The images the example rows and Harbor tasks name, each once."""
    rows = [item.task.image for item in read_dataset(EXAMPLE_DATASET) if isinstance(item, DatasetRow)]
    harbor = [item.task.image for item in read_harbor_tasks(HARBOR_TASKS) if isinstance(item, DatasetRow)]
    return list(dict.fromkeys([*rows, *harbor]))


def restore(client: docker.DockerClient, registry: LocalRegistry, image: str) -> None:
    """Put ``image`` back under its own name from the registry's copy (pulled by a run, or pulled here)."""
    remote = f"{registry.address}/examples/{image}"
    if not image_present(client, image):
        if not image_present(client, remote):
            client.images.pull(remote, auth_config=registry.auth_config)
        repository, _, tag = image.rpartition(":")
        client.images.get(remote).tag(repository, tag)
    if image_present(client, remote):
        client.images.remove(remote)


def main() -> int:
    client = docker.from_env()
    images = example_images()
    codes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="registry-trial-") as folder:
        registry = LocalRegistry(Path(folder) / "registry")
        registry.start()
        try:
            for image in images:
                registry.push(client, image, f"examples/{image}")
            for image in images:
                client.images.remove(image)
            print(f"registry {registry.address} holds {len(images)} images; the engine holds none of them", flush=True)
            env = {
                **os.environ,
                "ROLLOUT_IMAGE_MIRRORS": f"docker.io/library={registry.address}/examples",
                "ROLLOUT_REGISTRY": registry.address,
                "ROLLOUT_REGISTRY_USERNAME": registry.username,
                "ROLLOUT_REGISTRY_PASSWORD": registry.password,
            }
            run_id = f"registry-trial-{uuid.uuid4().hex[:6]}"
            for name, dataset in (("example rows", EXAMPLE_DATASET), ("Harbor tasks", HARBOR_TASKS)):
                out = Path(folder) / f"{name.split()[0]}.jsonl"
                argv = [
                    sys.executable,
                    "starter.py",
                    "demo",
                    "--dataset",
                    str(dataset),
                    "--run-id",
                    f"{run_id}-{name.split()[0]}",
                    "--out",
                    str(out),
                ]
                codes[name] = subprocess.run(argv, cwd=PROJECT_ROOT, env=env).returncode
            print(
                "\npulls per image (a pull resolves the tag with a HEAD, then GETs the manifest by digest if the "
                "engine lacks it):"
            )
            for image in images:
                repository = f"examples/{image.rpartition(':')[0]}"
                print(
                    f"  {image}: {registry.manifest_requests(repository, ('HEAD',))} (GET "
                    f"{registry.manifest_requests(repository)})"
                )
            print("runs: " + ", ".join(f"{name} exit {code}" for name, code in codes.items()))
        finally:
            for image in images:
                try:
                    restore(client, registry, image)
                except docker.errors.APIError as error:
                    print(f"could not put {image} back: {error}; make setup builds it again", file=sys.stderr)
            registry.stop()
    return max(codes.values(), default=1)


if __name__ == "__main__":
    sys.exit(main())
