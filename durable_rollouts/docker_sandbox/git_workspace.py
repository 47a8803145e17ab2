"""The sandbox's harness directory and the workspace's git baseline: where the baseline, the diff output and
the detached commands' logs and markers live, and the scripts that record the baseline at boot, take the
agent's diff against it, back the index up before a three-way apply and put a conflicted one back to the baseline.

Invariants:

* Harness state lives under ``HARNESS_DIR`` (mode 1777, made at boot); every path in it comes from here.
* The baseline (``BASELINE_FILE``) is the tree of the working state after the boot's pre-commands, recorded
  through a private index: the repository's own index is never touched by recording or diffing. A workdir
  in no repository becomes one before its first baseline (``git init`` and one commit of its files).
* ``DIFF_EXCLUDES`` are never part of a patch, a baseline or a restore.
* The scripts (``git_workspace_*.sh``) take these paths as positional parameters; ``*_args`` build them.
"""

from __future__ import annotations

from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

HARNESS_DIR = "/tmp/rollout"
BASELINE_FILE = f"{HARNESS_DIR}/baseline-tree"
DIFF_OUT = f"{HARNESS_DIR}/diff-out"
# Where the grader's apply ladder backs the repository's index up before a three-way apply.
INDEX_BACKUP = f"{HARNESS_DIR}/index.before-apply"
PROBLEM_STATEMENT_FILE = "PROBLEM_STATEMENT.md"
# Paths never part of an agent's patch: the task text, harness state, byte-code caches.
DIFF_EXCLUDES = (
    f":(exclude){PROBLEM_STATEMENT_FILE}",
    ":(exclude,glob).claude/**",
    ":(exclude,glob)**/__pycache__/**",
    ":(exclude,glob)**/.pytest_cache/**",
)
# The agent's detached command (Claude Code) and its log.
AGENT_JOB = "claude"
AGENT_LOG = f"{HARNESS_DIR}/{AGENT_JOB}.out"
SNAPSHOT_SCRIPT = ShellScript("durable_rollouts.docker_sandbox", "git_workspace_snapshot.sh")
DIFF_SCRIPT = ShellScript("durable_rollouts.docker_sandbox", "git_workspace_diff.sh")
BACKUP_SCRIPT = ShellScript("durable_rollouts.docker_sandbox", "git_workspace_backup.sh")
RESTORE_SCRIPT = ShellScript("durable_rollouts.docker_sandbox", "git_workspace_restore.sh")


def harness_file(name: str) -> str:
    """The path of ``name`` in the harness directory."""
    return f"{HARNESS_DIR}/{name}"


def detached_output(name: str) -> str:
    """The stdout log of the detached command ``name``."""
    return harness_file(f"{name}.out")


def detached_errors(name: str) -> str:
    """The stderr log of the detached command ``name``."""
    return harness_file(f"{name}.err")


def snapshot_args() -> tuple[str, ...]:
    """The parameters of ``SNAPSHOT_SCRIPT``."""
    return (BASELINE_FILE, HARNESS_DIR, *DIFF_EXCLUDES)


def diff_args(max_file: int, max_patch: int, max_new: int, max_listed: int) -> tuple[str, ...]:
    """The parameters of ``DIFF_SCRIPT``: output in ``DIFF_OUT``, the limits in bytes, how many omissions to list."""
    limits = (str(max_file), str(max_patch), str(max_new), str(max_listed))
    return (DIFF_OUT, *limits, BASELINE_FILE, HARNESS_DIR, *DIFF_EXCLUDES)


def backup_args() -> tuple[str, ...]:
    """The parameters of ``BACKUP_SCRIPT``."""
    return (INDEX_BACKUP,)


def restore_args() -> tuple[str, ...]:
    """The parameters of ``RESTORE_SCRIPT``."""
    return (BASELINE_FILE, HARNESS_DIR, INDEX_BACKUP, *DIFF_EXCLUDES)
