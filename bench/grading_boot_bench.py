"""Grading-sandbox benchmark: grading on a repository of about 5,000 files with and without the ``chown -R``.

The bench builds its own image (``rollout-base:bookworm`` plus a git repository of ``--files`` small Python
files at ``/testbed``, about SWE-bench Verified's pylint-8898 at 5,569), removed again at the end, and grades a
one-line patch of it ``--rounds`` times per variant with the library (``durable_rollouts.grading.graders.evaluate``
over ``DockerSandboxes``, no Temporal), one grading at a time, variants alternating so drift on a shared
machine hits both alike:

* ``chown``: the grading sandbox's boot gives the workdir to ``agent`` first, as every boot did before;
* ``as-image`` (shipped): a grading sandbox keeps the image's ownership (``ContainerLifecycle.owns_workdir``).

It prints each grading's seconds (``evaluate`` called -> returned: boot, apply, the test command, destroy), the
median per variant, the verdicts, and the ratio chown / as-image of the medians. No thresholds. Run from the
repository root::

    .venv/bin/python -m bench.grading_boot_bench [--files 5000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import docker

from bench.harness.repo_image import PATCH, build_repo_image, repo_task
from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import graders


class ChowningSandboxes(DockerSandboxes):
    """Every boot gives the workdir to ``agent``, grading boots included: the boot before this change."""

    def owns_workdir(self, request: SandboxRequest) -> bool:
        return True


async def grade(sandboxes: DockerSandboxes, task: TaskSpec) -> tuple[float, bool]:
    started = time.perf_counter()
    graded = await graders.evaluate(
        sandboxes,
        EvalRequest(task=task, diff=PATCH, workflow_id=f"bench-grading-boot-{uuid.uuid4().hex[:8]}", timeout_s=300),
    )
    return time.perf_counter() - started, graded.result.solved


async def main(files: int, rounds: int) -> None:
    client = docker.from_env()
    image = await build_repo_image(client, files)
    task = repo_task(image, "grading-boot-bench")
    settings = SandboxSettings(lifetime_s=900)
    variants = {"chown": ChowningSandboxes(settings), "as-image": DockerSandboxes(settings)}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    try:
        await grade(variants["as-image"], task)  # warm the page cache and the engine once, unmeasured
        for round_index in range(rounds):
            order = list(variants) if round_index % 2 == 0 else list(reversed(variants))
            for name in order:
                took, solved = await grade(variants[name], task)
                seconds[name].append(took)
                print(f"round {round_index + 1} {name:9s} {took:6.2f} s  solved={solved}")
    finally:
        client.images.remove(image, force=True)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print()
    for name, median in medians.items():
        print(f"{name:9s} median {median:6.2f} s over {rounds} gradings")
    print(f"ratio chown / as-image: {medians['chown'] / medians['as-image']:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.files, args.rounds))
