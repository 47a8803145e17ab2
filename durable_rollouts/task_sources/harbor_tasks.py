"""Harbor task directories as a dataset: each task directory becomes one ``TaskSpec`` with a ``harbor`` grader.

A Harbor task is a directory holding ``task.toml``, ``instruction.md`` (the problem statement),
``environment/Dockerfile`` (or a prebuilt ``[environment] docker_image``), ``tests/test.sh`` with the other
test files, and optionally ``solution/``. ``read_harbor_tasks(DIR)`` reads DIR as one task when it holds a
``task.toml``, else each of its subdirectories (sorted; hidden ones skipped) as one task. docs/task_sources.md
(*Harbor task directories*) gives what each ``task.toml`` field becomes.

Invariants: the whole ``tests/`` directory (regular files; a symlink only if it stays inside ``tests/``), at
most ``MAX_TESTS_BYTES``, is inlined into the task, so no worker ever reads a host path a task names. Every
problem is a ``HarborTaskError`` naming the task's file (or directory) and field, and never stops the other
tasks: reading yields each task's row or its error, as ``dataset_rows.read_dataset`` does for lines.
"""

from __future__ import annotations

import base64
import math
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from durable_rollouts.contracts.tasks import HarborSpec, HarborTestFile, TaskResources, TaskSpec
from durable_rollouts.docker_sandbox.image_settings import ImageSettings
from durable_rollouts.task_sources.dataset_rows import DatasetRow, RowError
from durable_rollouts.task_sources.row_limits import task_problem

MAX_TESTS_BYTES = 256 << 10
MAX_REFERENCE_PATCH_BYTES = 1 << 20
DEFAULT_VERIFIER_TIMEOUT_S = 600.0
DEFAULT_BUILD_TIMEOUT_S = 600.0
DEFAULT_CPUS = 1.0
DEFAULT_MEMORY_MB = 2048
DEFAULT_STORAGE_MB = 10240
REFERENCE_PATCH = "solution/reference.patch"
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*([KMG])B?", re.IGNORECASE)
_SIZE_MB = {"K": 1 / 1024, "M": 1, "G": 1024}
_CANARY = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)
# TaskSpec field -> (the task's field that supplies it, the file naming it in errors), for the limits' errors.
TASK_SOURCES = {
    "instance_id": ("task.name", "task.toml"),
    "problem_statement": ("instruction.md", None),
    "harbor": ("tests", None),
    "reference_patch": (REFERENCE_PATCH, None),
}


class HarborTaskError(RowError):
    """A task directory that cannot be used. ``line`` is the task directory (its key in the results file),
    ``field`` a task.toml key or the task's file at fault (``tests/test.sh``); the message names the file."""

    def __init__(self, task_dir: Path, field: str, reason: str, file: str | None = None):
        super().__init__(field, reason, str(task_dir))
        self.args = (f"{task_dir / file if file else task_dir}: {field}: {reason}",)


def task_directories(path: Path) -> list[Path]:
    """``path`` itself when it is a task (holds task.toml), else its subdirectories, sorted, hidden ones skipped."""
    if (path / "task.toml").exists():
        return [path]
    return sorted(child for child in path.iterdir() if child.is_dir() and not child.name.startswith("."))


if TYPE_CHECKING:
    from durable_rollouts.task_sources.harbor_images import HarborImages


def read_harbor_tasks(
    path: str | Path, images: HarborImages | None = None, image_settings: ImageSettings | None = None
) -> Iterator[DatasetRow | HarborTaskError]:
    """Yield each task directory's row (``line`` = the directory) or the error saying why it cannot be used;
    images are found, pulled or built with ``images`` (default: this host's Docker engine, pulling as
    ``image_settings`` say) once the rest of the task is valid."""
    root = Path(path)
    directories = task_directories(root)
    if not directories:
        yield HarborTaskError(root, "task.toml", "no Harbor task here: no task.toml and no task subdirectories")
        return
    from durable_rollouts.task_sources.harbor_images import (
        HarborImages,
    )  # docker: a worker's package, imported only to build images

    images = images or HarborImages(images=image_settings)
    seen: dict[str, Path] = {}
    for directory in directories:
        try:
            task, raw = read_task(directory, images)
            if task.instance_id in seen:
                raise HarborTaskError(
                    directory,
                    "task.name",
                    f"{task.instance_id!r} is also the name of {seen[task.instance_id]}",
                    "task.toml",
                )
            seen[task.instance_id] = directory
            yield DatasetRow(line=str(directory), task=task, raw=raw)
        except HarborTaskError as error:
            yield error


def read_task(directory: Path, images: HarborImages) -> tuple[TaskSpec, dict[str, Any]]:
    """One task directory's ``TaskSpec`` and its parsed task.toml; raises ``HarborTaskError``.
    The image is found or built last, once the rest of the task (its limits included) is valid."""
    config = _config(directory)
    name = _table(directory, config, "task").get("name", directory.name)
    if not isinstance(name, str) or not name.strip():
        raise HarborTaskError(directory, "task.name", "must be a non-empty string", "task.toml")
    verifier, agent, environment = (_table(directory, config, key) for key in ("verifier", "agent", "environment"))
    gpus = _number(directory, environment, "environment.gpus", 0)
    if gpus:
        raise HarborTaskError(
            directory, "environment.gpus", f"{gpus:g} requested; this project's sandboxes have no GPUs", "task.toml"
        )
    # ``RolloutBudgets.for_task`` folds the timeouts into the rollout's budgets.
    spec = HarborSpec(
        source=str(directory),
        tests=_tests(directory),
        verifier_timeout_s=_number(directory, verifier, "verifier.timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S),
        agent_timeout_s=_number(directory, agent, "agent.timeout_sec", None),
        verifier_env=_env(directory, verifier),
    )
    # ``docker_sandbox.limits.task_limits`` caps these at the worker's per-sandbox limits.
    resources = TaskResources(
        cpus=_number(directory, environment, "environment.cpus", DEFAULT_CPUS),
        memory_bytes=int(_megabytes(directory, environment, "memory", DEFAULT_MEMORY_MB) * (1 << 20)),
        disk_bytes=int(_megabytes(directory, environment, "storage", DEFAULT_STORAGE_MB) * (1 << 20)),
    )
    statement = _instruction(directory)
    reference = _reference_patch(directory)
    docker_image = environment.get("docker_image")
    if docker_image is not None and (not isinstance(docker_image, str) or not docker_image.strip()):
        raise HarborTaskError(directory, "environment.docker_image", "must be a non-empty string", "task.toml")
    build_timeout = _number(directory, environment, "environment.build_timeout_sec", DEFAULT_BUILD_TIMEOUT_S)
    try:
        # The limits are checked without the image first, so nothing is built for a task that breaks them.
        unresolved = TaskSpec(
            instance_id=name.strip(),
            image=docker_image or "",
            workdir="",
            problem_statement=statement,
            reference_patch=reference,
            harbor=spec,
            resources=resources,
        )
    except ValidationError as error:
        first = error.errors()[0]
        raise HarborTaskError(directory, ".".join(str(p) for p in first["loc"]), first["msg"]) from None
    _check_limits(directory, unresolved)
    from durable_rollouts.task_sources.harbor_images import ImageProblem

    try:
        image = images.resolve(name, directory / "environment", docker_image, build_timeout)
    except ImageProblem as problem:
        file = "task.toml" if problem.field == "environment.docker_image" else None
        raise HarborTaskError(directory, problem.field, problem.reason, file) from None
    task = unresolved.model_copy(update={"image": image.image, "workdir": image.workdir})
    _check_limits(directory, task)
    return task, config


def reference_patches(path: str | Path) -> list[tuple[str, str]]:
    """(problem statement, reference patch) of every readable task under ``path`` that has a reference patch;
    no image is looked at (what a worker's scripted oracle needs)."""
    found = []
    for directory in task_directories(Path(path)):
        try:
            patch = _reference_patch(directory)
            if patch:
                found.append((_instruction(directory), patch))
        except HarborTaskError:
            continue
    return found


def _config(directory: Path) -> dict[str, Any]:
    path = directory / "task.toml"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise HarborTaskError(
            directory,
            "task.toml",
            "missing (a Harbor task directory holds task.toml, instruction.md, environment/, tests/test.sh)",
        ) from None
    except OSError as error:
        raise HarborTaskError(directory, "task.toml", f"unreadable ({error.strerror})") from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise HarborTaskError(directory, "task.toml", "not UTF-8") from None
    except tomllib.TOMLDecodeError as error:
        raise HarborTaskError(directory, "task.toml", f"invalid TOML ({error})") from None


def _table(directory: Path, config: dict[str, Any], key: str) -> dict[str, Any]:
    value = config.get(key, {})
    if not isinstance(value, dict):
        raise HarborTaskError(directory, key, "must be a table", "task.toml")
    return value


def _number(directory: Path, table: dict[str, Any], field: str, default: float | None) -> Any:
    """A positive finite number at ``field``'s last key, or ``default`` when absent (0 is allowed only for gpus)."""
    value = table.get(field.rpartition(".")[2])
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise HarborTaskError(directory, field, "must be a number", "task.toml")
    if value < 0 or (value == 0 and not field.endswith("gpus")):
        raise HarborTaskError(directory, field, "must be positive", "task.toml")
    return float(value)


def _megabytes(directory: Path, environment: dict[str, Any], what: str, default: int) -> float:
    """``<what>_mb``, else the deprecated size string ``<what>`` ("2G", "512M", "1024K"), else ``default``."""
    if f"{what}_mb" in environment:
        return float(_number(directory, environment, f"environment.{what}_mb", default))
    size = environment.get(what)
    if size is None:
        return float(default)
    match = _SIZE.fullmatch(size.strip()) if isinstance(size, str) else None
    if match is None or float(match.group(1)) <= 0:
        raise HarborTaskError(
            directory,
            f"environment.{what}",
            f"must be a size like '2G' or '512M' (or use environment.{what}_mb)",
            "task.toml",
        )
    return float(match.group(1)) * _SIZE_MB[match.group(2).upper()]


def _env(directory: Path, verifier: dict[str, Any]) -> dict[str, str]:
    env = verifier.get("env", {})
    if not isinstance(env, dict):
        raise HarborTaskError(directory, "verifier.env", "must be a table of strings", "task.toml")
    for key, value in env.items():
        if not isinstance(value, str):
            raise HarborTaskError(directory, f"verifier.env.{key}", "must be a string", "task.toml")
    return dict(env)


def _instruction(directory: Path) -> str:
    path = directory / "instruction.md"
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise HarborTaskError(directory, "instruction.md", "missing (it is the problem statement)") from None
    except UnicodeDecodeError:
        raise HarborTaskError(directory, "instruction.md", "not UTF-8") from None
    except OSError as error:
        raise HarborTaskError(directory, "instruction.md", f"unreadable ({error.strerror})") from None
    lines = text.split("\n")
    start = 0
    while start < len(lines) and _CANARY.match(lines[start].strip()):
        start += 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    statement = "\n".join(lines[start:])
    if not statement.strip():
        raise HarborTaskError(directory, "instruction.md", "empty")
    return statement


def _tests(directory: Path) -> list[HarborTestFile]:
    """Every file of ``tests/`` inlined (paths relative to it, in path order); test.sh must be among them."""
    tests = directory / "tests"
    if not (tests / "test.sh").is_file():
        raise HarborTaskError(directory, "tests/test.sh", "missing (the verifier Harbor runs)")
    real_root = Path(os.path.realpath(tests))
    files: list[HarborTestFile] = []
    total = 0
    for root, dirs, names in os.walk(tests):
        dirs.sort()
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
            path = Path(root) / name
            relative = path.relative_to(tests).as_posix()
            field = f"tests/{relative}"
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(real_root):
                raise HarborTaskError(
                    directory, field, "a symlink out of tests/ (nothing outside the task's tests is inlined)"
                )
            try:
                info = real.stat()
                if not stat.S_ISREG(info.st_mode):
                    raise HarborTaskError(directory, field, "not a regular file")
                data = real.read_bytes()
            except OSError as error:
                raise HarborTaskError(directory, field, f"unreadable ({error.strerror})") from None
            total += len(data)
            if total > MAX_TESTS_BYTES:
                raise HarborTaskError(
                    directory,
                    "tests",
                    f"more than {MAX_TESTS_BYTES:,} bytes of test files (they are inlined into the task)",
                )
            mode = 0o755 if info.st_mode & 0o111 else 0o644
            files.append(HarborTestFile(path=relative, data_b64=base64.b64encode(data).decode(), mode=mode))
    return sorted(files, key=lambda file: file.path)


def _reference_patch(directory: Path) -> str | None:
    path = directory / REFERENCE_PATCH
    if not path.exists():
        return None
    try:
        data = path.read_bytes()
    except OSError as error:
        raise HarborTaskError(directory, REFERENCE_PATCH, f"unreadable ({error.strerror})") from None
    if len(data) > MAX_REFERENCE_PATCH_BYTES:
        raise HarborTaskError(directory, REFERENCE_PATCH, f"larger than {MAX_REFERENCE_PATCH_BYTES:,} bytes")
    try:
        return data.decode("utf-8") or None
    except UnicodeDecodeError:
        raise HarborTaskError(directory, REFERENCE_PATCH, "not UTF-8") from None


def _check_limits(directory: Path, task: TaskSpec) -> None:
    """The limits every task meets to travel through Temporal (``row_limits``), named by the task's field or file."""
    if (problem := task_problem(task, {})) is not None:
        name = problem[0].removeprefix("metadata.")
        field, file = TASK_SOURCES.get(name, (name, None))
        raise HarborTaskError(directory, field, problem[1], file)
