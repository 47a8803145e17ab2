"""The agent's patch: the workspace against the baseline recorded at boot, capped to what Temporal can carry.

The patch travels through Temporal (2 MiB payload limit): a changed file over ``MAX_DIFF_FILE_BYTES`` is
left out of it and named; a patch still over ``MAX_DIFF_BYTES`` is not graded. New files totalling more
than ``MAX_NEW_FILES_BYTES`` are not even hashed: their patch is taken to be over the cap.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from durable_rollouts.contracts.grading import CapturedDiff, DiffReport, OmittedFile
from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox import git_workspace
from durable_rollouts.docker_sandbox.commands import ContainerCommands, ExecResult
from durable_rollouts.docker_sandbox.container_layout import AGENT_USER
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.files import ContainerFiles
from durable_rollouts.docker_sandbox.git_workspace import DIFF_OUT
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

_SETUP_STEPS = ShellScript("durable_rollouts.docker_sandbox", "sandbox_setup_steps.sh")
_STEP_FAILED = 86
_LAST_FAILED = 87
_FAILED_STEP = re.compile(r"(?m)^step (\d+) (timed out|exit (\d+))\n?\Z")
SNAPSHOT_TIMEOUT_S = 300.0
MAX_DIFF_BYTES = 1 << 20
MAX_DIFF_FILE_BYTES = 1 << 20
MAX_NEW_FILES_BYTES = 256 << 20
MAX_LISTED_OMISSIONS = 100


def _diff_report(status: str, omitted: bytes) -> DiffReport:
    word, amount, count = status.split()
    fields = omitted.split(b"\0")
    listed = [
        OmittedFile(path=path.decode("utf-8", errors="replace"), size_bytes=int(size))
        for size, path in zip(fields[0:-1:2], fields[1::2], strict=False)
    ]
    limit = f"the {MAX_DIFF_BYTES:,}-byte cap"
    note = {
        "ok": "",
        "over": f"the patch is {int(amount):,} bytes, over {limit}",
        "untaken": f"the new files total {int(amount):,} bytes, more than {MAX_NEW_FILES_BYTES:,}: their patch would "
        f"exceed {limit}",
    }[word]
    return DiffReport(
        patch_bytes=int(amount) if word != "untaken" else 0,
        omitted=listed,
        omitted_count=int(count),
        over_cap=word != "ok",
        note=note,
    )


class WorkspaceDiff(ContainerCommands, ContainerFiles):
    async def capture_diff(self, handle: SandboxHandle) -> CapturedDiff:
        """The agent's patch: working tree (tracked and untracked files) against the workspace baseline, and its report.

        The baseline is the tree recorded at boot after ``before_repo_set_cmd`` and the pre-commands, so
        their side effects are not part of the patch (a grading sandbox reproduces them before applying
        it); it falls back to ``HEAD``. Excludes ``git_workspace.DIFF_EXCLUDES``; ``--binary`` keeps binary
        files. New files over ``MAX_DIFF_FILE_BYTES`` (and baseline files grown past ``MAX_NEW_FILES_BYTES``)
        are left out and named; a patch still over ``MAX_DIFF_BYTES`` (or new files over
        ``MAX_NEW_FILES_BYTES``) comes back empty with ``report.over_cap``. Raises ``SandboxError`` if git
        fails. Two Docker round trips.
        """
        limits = git_workspace.diff_args(MAX_DIFF_FILE_BYTES, MAX_DIFF_BYTES, MAX_NEW_FILES_BYTES, MAX_LISTED_OMISSIONS)
        result = await self.run_script(handle, git_workspace.DIFF_SCRIPT, *limits, timeout_s=300)
        if result.exit_code != 0:
            raise SandboxError(f"git diff failed in {handle.name}: {result.output.strip()[-2000:]}")
        files = await self.read_directory(handle, DIFF_OUT, MAX_DIFF_BYTES + 1)
        report = _diff_report(files["status"].decode(), files["omitted"])
        return CapturedDiff(diff=files.get("patch", b"").decode("utf-8", errors="replace"), report=report)

    async def record_baseline(
        self,
        handle: SandboxHandle,
        user: str = AGENT_USER,
        steps: Sequence[tuple[str, str]] = (),
        step_timeout_s: float = 900.0,
    ) -> None:
        """Run the set-up ``steps`` (label, shell text) in order, then record the workspace's tree as the baseline
        ``capture_diff`` compares against: one exec as ``user`` (the workdir's owner). Each step runs as
        ``bash -lc`` under ``set -e`` for at most ``step_timeout_s``; the first that fails raises ``SandboxError``
        naming its label, and nothing after it runs. A workdir in no git repository is made one first (``git
        init``, everything committed once as the baseline)."""
        argv, limit = baseline_command(steps, step_timeout_s)
        result = await self.exec_in(handle.container_id, argv, user=user, cwd=handle.workdir, timeout_s=limit)
        check_baseline(handle, steps, result)


def baseline_command(
    steps: Sequence[tuple[str, str]], step_timeout_s: float, last: str = ""
) -> tuple[list[str], float]:
    """The argv that runs ``record_baseline``'s steps and snapshot in the workdir, then the shell text ``last`` (files
    the baseline must not hold, written by the same exec: the agent's), and the time it may take."""
    argv = [
        "bash",
        "-c",
        _SETUP_STEPS.text,
        _SETUP_STEPS.name,
        f"{step_timeout_s:g}",
        str(len(steps)),
        last,
        *(command for _, command in steps),
        git_workspace.SNAPSHOT_SCRIPT.text,
        *git_workspace.snapshot_args(),
    ]
    return argv, step_timeout_s * len(steps) + SNAPSHOT_TIMEOUT_S


def check_baseline(handle: SandboxHandle, steps: Sequence[tuple[str, str]], result: ExecResult) -> None:
    """Raise ``SandboxError`` naming the failed step (label, why, what it printed), the failed snapshot or the
    failed last text."""
    if result.exit_code == _LAST_FAILED:
        raise SandboxError(f"writing files after the baseline failed in {handle.name}: {result.output.strip()[-2000:]}")
    failed = _FAILED_STEP.search(result.output) if result.exit_code == _STEP_FAILED else None
    if failed is not None:
        label, command = steps[int(failed.group(1))]
        why = "timed out" if failed.group(2) == "timed out" else f"exit {failed.group(3)}"
        raise SandboxError(f"{label} failed ({why}): {command[:300]!r}\n{result.output[: failed.start()][-2000:]}")
    if result.exit_code != 0:
        why = " (timed out)" if result.timed_out else ""
        raise SandboxError(f"could not snapshot the workspace of {handle.name}{why}: {result.output.strip()[-2000:]}")
