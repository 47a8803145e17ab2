"""Modules a diff adds where the tests import from, under the name of a module the image already has.

A top-level ``argparse.py`` or ``pluggy/`` in the workdir is imported instead of the standard library's or
the installed distribution's (``python -m pytest`` and pytest's rootdir insertion put the workdir first on
``sys.path``), and runs before any test. Invariants:

* an entry counts when it is new (absent from the import root before the diff was applied), sits directly
  in one of ``PythonEnvs.import_roots``, and its module name (the entry's name up to its first dot:
  ``argparse.py``, ``argparse.cpython-311-x86_64-linux-gnu.so``, ``argparse/``) is one the image's Python
  imports from outside the workdir (``PythonEnvs.names``);
* ``pathspecs`` names each such entry literally (a literal pathspec of a directory covers what is inside);
  handed to ``task_tests.reset`` with the protected paths, the entries are removed before the tests run
  and listed in ``reset_paths``. Entries that were there before the diff are never touched.
"""

from __future__ import annotations

import posixpath
import shlex

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.docker_sandbox.commands import ExecResult
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading.python_envs import PythonEnvs

LIST_TIMEOUT_S = 60.0
# Printed before the listing (a login shell may print before it).
_MARKER = "import-roots:"


def listing(envs: PythonEnvs) -> str:
    """Shell text listing each import root's entries as ``root/entry`` (workdir-relative), NUL-separated, after a
    marker; a missing root lists nothing. ``entries_from`` reads its result."""
    quoted = " ".join(shlex.quote(root) for root in envs.import_roots)
    return (
        f'printf \'{_MARKER}\\0\'; for root in {quoted}; do [ -d "$root" ] && find "$root" -mindepth 1 -maxdepth '
        f"1 -printf '%h/%f\\0'; done; true"
    )


def entries_from(handle: SandboxHandle, result: ExecResult) -> frozenset[str]:
    """The workdir-relative paths ``listing`` found directly in each import root."""
    if result.exit_code != 0:
        raise SandboxError(f"could not list the import roots in {handle.name}: {result.output.strip()[-2000:]}")
    _, marker, found = result.output.partition(_MARKER + "\0")
    if not marker:
        raise SandboxError(f"listing the import roots in {handle.name} printed no listing: {result.output[-2000:]}")
    return frozenset(posixpath.normpath(path) for path in found.split("\0") if path.strip())


async def entries(sandboxes: DockerSandboxes, handle: SandboxHandle, envs: PythonEnvs) -> frozenset[str]:
    """The workdir-relative paths of what sits directly in each import root now."""
    return entries_from(handle, await sandboxes.exec(handle, listing(envs), user="root", timeout_s=LIST_TIMEOUT_S))


def shadowing(before: frozenset[str], after: frozenset[str], envs: PythonEnvs) -> list[str]:
    """The new entries that shadow a module of the image, sorted."""
    roots = {posixpath.normpath(root) for root in envs.import_roots}
    return sorted(
        path
        for path in after - before
        if (posixpath.dirname(path) or ".") in roots and posixpath.basename(path).split(".", 1)[0] in envs.names
    )


def pathspecs(paths: list[str]) -> list[str]:
    return [f":(literal){path}" for path in paths]
