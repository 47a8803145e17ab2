"""Where drift-task scripts run: a fresh Docker sandbox per call, or (tests, corpus checks) a host subprocess.

Both runners execute ``durable_rollouts/drift_repair/runner.py`` with a JSON job list, so
a script behaves the same way in either (same fork-per-input harness, same
time limit, same traceback shape); they differ only in isolation.

* ``SandboxScriptRunner.run`` boots one sandbox from the task image (workdir
  ``/srv``, a ``git init`` pre-command so the sandbox's workspace baseline
  exists), writes ``/srv/script.py``, runs every input in that one sandbox
  and always destroys it: one boot per episode phase, never shared across
  phases.
* ``LocalScriptRunner`` runs the harness as a child process of this host,
  with no isolation beyond the harness's own process groups and time limit:
  for the project's own corpus and tests, never for policy output in
  production.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Protocol

from durable_rollouts.contracts.drift_repair import DEFAULT_IMAGE, SCRIPT_NAME, RunOutcome
from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox import git_workspace
from durable_rollouts.docker_sandbox.container_layout import AGENT_UID
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.files import SandboxFile
from durable_rollouts.docker_sandbox.limits import DEFAULT_LIMITS, SandboxLimits
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes

RUNNER_SOURCE = Path(__file__).with_name("runner.py")
SANDBOX_WORKDIR = "/srv"
SANDBOX_RUNNER = git_workspace.harness_file("drift_runner.py")
SANDBOX_JOBS = git_workspace.harness_file("drift_jobs.json")
SANDBOX_RESULTS = git_workspace.harness_file("drift_results.json")
HARNESS_SLACK_S = 30.0
MAX_RESULTS_BYTES = 8 << 20
PARALLEL = 4


class ScriptRunner(Protocol):
    async def run(
        self,
        script: str,
        stdins: list[str],
        timeout_s: float,
        *,
        workflow_id: str,
        instance_id: str,
        image: str = DEFAULT_IMAGE,
    ) -> list[RunOutcome]:
        """Run ``script`` once per stdin text; one ``RunOutcome`` per input, in order."""
        ...


def harness_budget_s(inputs: int, timeout_s: float) -> float:
    """An upper bound on one harness call: every input hanging, ``PARALLEL`` at a time, plus slack."""
    waves = -(-inputs // PARALLEL)
    return waves * timeout_s + HARNESS_SLACK_S


def _jobs_document(jobs: list[tuple[str, str]], timeout_s: float) -> str:
    return json.dumps(
        {
            "timeout_s": timeout_s,
            "parallel": PARALLEL,
            "jobs": [{"script": path, "stdin": stdin} for path, stdin in jobs],
        }
    )


class LocalScriptRunner:
    """The harness in a host subprocess (see the module docstring for when that is acceptable)."""

    def run_many(self, jobs: list[tuple[str, str]], timeout_s: float) -> list[RunOutcome]:
        """Run many ``(script source, stdin)`` jobs in one harness call; identical sources share one file."""
        with tempfile.TemporaryDirectory(prefix="drift-local-") as root:
            paths: dict[str, str] = {}
            for source, _ in jobs:
                if source not in paths:
                    folder = Path(root, str(len(paths)))
                    folder.mkdir()
                    (folder / SCRIPT_NAME).write_text(source, encoding="utf-8")
                    paths[source] = str(folder / SCRIPT_NAME)
            jobs_file, results_file = Path(root, "jobs.json"), Path(root, "results.json")
            jobs_file.write_text(_jobs_document([(paths[source], stdin) for source, stdin in jobs], timeout_s))
            subprocess.run(
                [sys.executable, str(RUNNER_SOURCE), str(jobs_file), str(results_file)],
                check=True,
                stdin=subprocess.DEVNULL,
                timeout=harness_budget_s(len(jobs), timeout_s),
            )
            return [RunOutcome(**item) for item in json.loads(results_file.read_text())]

    async def run(
        self,
        script: str,
        stdins: list[str],
        timeout_s: float,
        *,
        workflow_id: str,
        instance_id: str,
        image: str = DEFAULT_IMAGE,
    ) -> list[RunOutcome]:
        return await asyncio.to_thread(self.run_many, [(script, stdin) for stdin in stdins], timeout_s)


class SandboxScriptRunner:
    """One fresh sandbox per ``run`` call (see the module docstring)."""

    def __init__(self, sandboxes: DockerSandboxes, limits: SandboxLimits = DEFAULT_LIMITS, lifetime_s: int = 900):
        self.sandboxes = sandboxes
        self.limits = limits
        self.lifetime_s = lifetime_s

    async def run(
        self,
        script: str,
        stdins: list[str],
        timeout_s: float,
        *,
        workflow_id: str,
        instance_id: str,
        image: str = DEFAULT_IMAGE,
    ) -> list[RunOutcome]:
        task = TaskSpec(
            instance_id=instance_id,
            image=image,
            workdir=SANDBOX_WORKDIR,
            problem_statement="",
            pre_commands=["git init -q"],
        )
        budget = harness_budget_s(len(stdins), timeout_s)
        handle = await self.sandboxes.boot(
            SandboxRequest(task=task, workflow_id=workflow_id, attempt=0, purpose="grading"),
            lifetime_s=max(self.lifetime_s, int(budget) + 300),
            limits=self.limits,
        )
        try:
            script_path = f"{SANDBOX_WORKDIR}/{SCRIPT_NAME}"
            await self.sandboxes.write_files(
                handle,
                [
                    SandboxFile(script_path, script, AGENT_UID),
                    SandboxFile(SANDBOX_RUNNER, RUNNER_SOURCE.read_bytes()),
                    SandboxFile(SANDBOX_JOBS, _jobs_document([(script_path, s) for s in stdins], timeout_s)),
                ],
            )
            done = await self.sandboxes.exec(
                handle, f"python3 {SANDBOX_RUNNER} {SANDBOX_JOBS} {SANDBOX_RESULTS}", timeout_s=budget
            )
            if done.exit_code != 0:
                raise SandboxError(
                    f"the script runner failed in {handle.name} (exit {done.exit_code}): {done.output[-2000:]}"
                )
            raw = await self.sandboxes.read_file(handle, SANDBOX_RESULTS, MAX_RESULTS_BYTES)
        finally:
            await self.sandboxes.destroy(handle)
        return [RunOutcome(**item) for item in json.loads(raw)]
