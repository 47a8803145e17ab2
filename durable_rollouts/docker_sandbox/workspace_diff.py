"""The agent's patch: the workspace against the baseline recorded at boot, capped to what Temporal can carry.

The patch travels through Temporal (2 MiB payload limit): a changed file over ``MAX_DIFF_FILE_BYTES`` is
left out of it and named; a patch still over ``MAX_DIFF_BYTES`` is not graded. New files totalling more
than ``MAX_NEW_FILES_BYTES`` are not even hashed: their patch is taken to be over the cap.
"""

from __future__ import annotations

from durable_rollouts.contracts.rollout import CapturedDiff, DiffReport, OmittedFile, SandboxHandle
from durable_rollouts.docker_sandbox import git_workspace
from durable_rollouts.docker_sandbox.commands import ContainerCommands
from durable_rollouts.docker_sandbox.container_layout import AGENT_USER
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.files import ContainerFiles
from durable_rollouts.docker_sandbox.git_workspace import DIFF_OUT

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
        "untaken": f"the new files total {int(amount):,} bytes, more than {MAX_NEW_FILES_BYTES:,}: their patch would exceed {limit}",
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

    async def record_baseline(self, handle: SandboxHandle, user: str = AGENT_USER) -> None:
        """Record the workspace's current tree as the baseline ``capture_diff`` compares against, as ``user`` (the
        workdir's owner); a workdir in no git repository is made one first (``git init``, everything committed
        once as the baseline)."""
        result = await self.run_script(handle, git_workspace.SNAPSHOT_SCRIPT, *git_workspace.snapshot_args(), timeout_s=300, user=user)
        if result.exit_code != 0:
            raise SandboxError(f"could not snapshot the workspace of {handle.name}: {result.output.strip()[-2000:]}")
