"""What the Python environments of a fresh grading sandbox import and load, read before the agent's diff is
applied: the baseline a grading run is held to (docs/grading.md, *What is closed before the tests run*).

``probe`` runs ``sandbox_scripts/python_env_probe.py`` with every interpreter the sandbox has on PATH or in the
usual environment roots (``python_env_probe.sh``), as root in the workdir, and folds their answers: ``names``
(the top-level modules they import from outside the workdir) and ``plugins`` (the pytest plugins their
distributions register) are unions over them, ``import_roots`` and ``site_dirs`` say where a new module would
be imported from. An image without Python yields ``PythonEnvs()``; an answer that does not parse is left out,
never guessed.

Invariant: the answer is fixed by the image (by its ID), the container's environment, the workdir and the setup
steps the boot ran. ``probe`` asks each such key once per process (at most ``MAX_REMEMBERED``, the least
recently used forgotten first), and a grading sandbox is probed only while fresh, before its diff applies, so
nothing a diff does reaches the memory; a probe cut short (its timeout) is used once and not remembered.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox import git_workspace
from durable_rollouts.docker_sandbox.files import SandboxFile
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript

PROBE_TIMEOUT_S = 120.0
MAX_REMEMBERED = 256
PROBE_FILE = git_workspace.harness_file("python_env_probe.py")
_PROBE = ShellScript("durable_rollouts.grading", "sandbox_scripts/python_env_probe.py")
_RUN_PROBE = ShellScript("durable_rollouts.grading", "sandbox_scripts/python_env_probe.sh")


@dataclass(frozen=True)
class PytestPlugin:
    """A ``pytest11`` entry point as its distribution declares it."""

    distribution: str
    name: str
    value: str


@dataclass(frozen=True)
class PythonEnvs:
    found: bool = False
    names: frozenset[str] = frozenset()
    plugins: tuple[PytestPlugin, ...] = ()
    # Workdir directories (relative, "." the workdir) some interpreter has on its ``sys.path`` by itself (a ``.pth``
    # file, ``PYTHONPATH``), plus "." (``python -m`` and pytest's rootdir insertion put it there): a new module there
    # shadows an installed one.
    import_roots: tuple[str, ...] = (".",)
    # Site-packages directories outside the workdir, absolute: a module written there is importable by that
    # interpreter whatever the row's command sets ``PYTHONPATH`` to.
    site_dirs: tuple[str, ...] = ()


def fold(lines: list[str]) -> PythonEnvs:
    """The probe's JSON lines, one per interpreter, folded (see the module docstring)."""
    answers = []
    for line in dict.fromkeys(line.strip() for line in lines):
        try:
            answer = json.loads(line)
            answers.append(
                (
                    {str(name) for name in answer["names"]},
                    [PytestPlugin(str(dist), str(name), str(value)) for dist, name, value in answer["plugins"]],
                    [str(path) for path in answer["workdir_paths"]],
                    [str(path) for path in answer["site_dirs"]],
                )
            )
        except (ValueError, KeyError, TypeError):
            continue
    if not answers:
        return PythonEnvs()
    return PythonEnvs(
        found=True,
        names=frozenset().union(*(names for names, _, _, _ in answers)),
        plugins=tuple(dict.fromkeys(plugin for _, plugins, _, _ in answers for plugin in plugins)),
        import_roots=tuple(dict.fromkeys([".", *sorted(path for _, _, paths, _ in answers for path in paths)])),
        site_dirs=tuple(dict.fromkeys(path for _, _, _, dirs in answers for path in dirs if path.startswith("/"))),
    )


_remembered: OrderedDict[tuple[object, ...], PythonEnvs] = OrderedDict()


def forget() -> None:
    """Forget every remembered answer: the next grading of each key probes again (``bench.grading_calls_bench``
    measures a worker's first grading of an image this way)."""
    _remembered.clear()


async def probe(sandboxes: DockerSandboxes, handle: SandboxHandle, task: TaskSpec) -> PythonEnvs:
    """The Python environments of the fresh grading sandbox ``handle`` booted for ``task``, as they are before the
    diff is applied: probed there, or remembered from a sandbox booted alike (see the module docstring)."""
    image, env = await sandboxes.image_and_env(handle.container_id)
    before_repo_set_cmd = task.swepro.before_repo_set_cmd if task.swepro is not None else ""
    # The image by its ID, a content address: a rebuilt or re-tagged image is a new key.
    key = (image, env, task.workdir, before_repo_set_cmd, tuple(task.pre_commands))
    if (known := _remembered.get(key)) is not None:
        _remembered.move_to_end(key)
        return known
    await sandboxes.write_files(handle, [SandboxFile(PROBE_FILE, _PROBE.text)])
    result = await sandboxes.exec(
        handle, _RUN_PROBE.invocation(handle.workdir, PROBE_FILE), user="root", timeout_s=PROBE_TIMEOUT_S
    )
    envs = fold(result.output.splitlines())
    if result.timed_out or result.exit_code != 0:
        return envs
    _remembered[key] = envs
    while len(_remembered) > MAX_REMEMBERED:
        _remembered.popitem(last=False)
    return envs
