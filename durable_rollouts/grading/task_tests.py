"""The task's tests: which files a grader runs or reads, and putting them back to the baseline before it does.

The protected paths of a task are glob patterns relative to the workdir, in git's ``:(glob)`` pathspec syntax:
the row's ``test_files`` (which replace ``DEFAULT_TEST_FILES``), plus always ``TEST_CONFIG_FILES``,
``METADATA_FILES`` (matched without regard to case) and, literally, a ``swepro`` row's ``selected_test_files``
(docs/running.md, *Test files and harness scripts*). ``reset`` also takes further pathspecs for one grading
(``durable_rollouts.grading.shadowing``: new modules that shadow the image's).

Invariant: ``record_script`` snapshots the protected paths in the fresh grading sandbox before the diff is
applied (files ``.gitignore`` hides included); ``reset``, after the diff applied and before the grader, puts
back every one that differs (modified, deleted, changed type, or added), in the working tree and in the index,
and returns them. Afterwards the protected paths equal the snapshot exactly, so the tests that run are the
task's, whatever the diff did: a new test the agent wrote is removed, never run.
"""

from __future__ import annotations

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.contracts.tasks import DEFAULT_TEST_FILES, TaskSpec
from durable_rollouts.docker_sandbox import git_workspace
from durable_rollouts.docker_sandbox.commands import ExecResult
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

# Files that decide what a test runner collects, loads or is: always protected.
TEST_CONFIG_FILES = (
    "**/conftest.py",
    "**/pytest.ini",
    "**/.pytest.ini",
    "**/tox.ini",
    "**/setup.cfg",
    "**/pyproject.toml",
    "**/jest.config.*",
    "**/vitest.config.*",
    "**/vite.config.*",
    "**/.mocharc*",
    "**/karma.conf*",
    # imported by every Python start-up that finds them on sys.path (the workdir, for editable installs)
    "**/sitecustomize.py",
    "**/usercustomize.py",
    # ``python -m pytest`` finds a module of that name in the workdir first
    "pytest.py",
    "pytest/**",
    "_pytest/**",
)
# Distribution metadata (a pytest plugin loads from any distribution on sys.path, and ``python -m`` and f2p
# scripts put the workdir there; Python finds it whatever its case: ``gamer-1.0.DIST-INFO``), eggs, and
# ``.pth`` files, matched without regard to case.
METADATA_FILES = (
    "**/*.dist-info/**",
    "**/*.egg-info/**",
    "**/*.egg/**",
    "**/*.egg-link",
    "**/*.pth",
)
RESET_TIMEOUT_S = 300.0
_INDEX = git_workspace.harness_file("task-tests.index")
_SNAPSHOT = git_workspace.harness_file("task-tests.tree")
# Printed before reset's NUL-separated listing of the changed paths (a login shell may print before it).
_MARKER = "task-tests-reset:"


def _pathspecs(pattern: str, magic: str = "glob") -> list[str]:
    specs = [f":({magic}){pattern}"]
    if pattern.endswith("/**") and len(pattern) > 3:
        specs.append(f":({magic}){pattern[:-3]}")
    return specs


def pathspecs(task: TaskSpec) -> list[str]:
    """The git pathspecs of ``task``'s protected paths (see the module docstring)."""
    patterns = [*(task.test_files or DEFAULT_TEST_FILES), *TEST_CONFIG_FILES]
    specs = [spec for pattern in patterns for spec in _pathspecs(pattern)]
    specs += [spec for pattern in METADATA_FILES for spec in _pathspecs(pattern, "glob,icase")]
    if task.swepro is not None:
        specs += [f":(literal){path}" for path in task.swepro.selected_test_files]
    return list(dict.fromkeys(specs))


# Before every git command the grader runs: no hook and no fsmonitor from any configuration (the diff never reaches
# the repository's own, ``diff_paths``; this closes what the image's could start).
GIT_SAFE_CONFIG = "export GIT_CONFIG_PARAMETERS=\"'core.hookspath=/dev/null' 'core.fsmonitor='\"\n"


def _script(mode: str, specs: list[str]) -> str:
    invocation = ShellScript("durable_rollouts.grading", "task_tests.sh").invocation(
        mode, _INDEX, _SNAPSHOT, git_workspace.BASELINE_FILE, _MARKER, *specs
    )
    return GIT_SAFE_CONFIG + invocation


def record_script(specs: list[str]) -> str:
    """Shell text that snapshots the protected paths before the diff is applied (run as root in the workdir;
    ``check_recorded`` reads its result)."""
    return _script("record", specs)


def check_recorded(handle: SandboxHandle, result: ExecResult) -> None:
    """Raises ``SandboxError`` if ``record_script`` failed."""
    if result.exit_code != 0:
        raise SandboxError(f"could not snapshot the task's tests in {handle.name}: {result.output.strip()[-2000:]}")


async def reset(sandboxes: DockerSandboxes, handle: SandboxHandle, specs: list[str]) -> list[str]:
    """Put the protected paths back to the snapshot ``record_script`` took; the paths that differed, sorted."""
    result = await sandboxes.exec(handle, _script("reset", specs), user="root", timeout_s=RESET_TIMEOUT_S)
    if result.exit_code != 0:
        raise SandboxError(f"could not reset the task's tests in {handle.name}: {result.output.strip()[-2000:]}")
    _, marker, listing = result.output.partition(_MARKER + "\0")
    if not marker:
        raise SandboxError(f"resetting the task's tests in {handle.name} printed no listing: {result.output[-2000:]}")
    return sorted(path for path in listing.split("\0") if path)
