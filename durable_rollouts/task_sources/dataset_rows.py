"""Dataset rows in slime's JSONL shape, normalised into a ``TaskSpec``.

A row is ``{"prompt", "label", "metadata"}``. Normalisation follows the reference ``_metadata()``, and
``task_from_row`` spells out each field: flat ``metadata.*`` first, then ``metadata.remote_env_info.*``; the
problem statement falls back to the prompt; an ``f2p_script`` is the grader when ``eval_cmd`` is absent; SWE-bench
fields make a ``swebench`` grader (workdir ``/testbed``); a ``swepro`` row's scripts are inlined from the dataset
root (``dataset_scripts``). A row in another project's flat shape (``row_shapes.registry``) is read by that shape.
docs/task_sources.md and docs/running.md (*Test files and harness scripts*) describe the fields.

Invariant: every problem is a ``RowError`` naming the field (and the line of the file when read from JSONL);
reading a file never stops at a bad row. Rows that could not travel through Temporal (a lone surrogate, an
over-long instance id, an oversized task) are refused here too (``row_limits``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from durable_rollouts.contracts.tasks import SweBenchSpec, TaskSpec, check_workdir_relative, f2p_eval_cmd
from durable_rollouts.task_sources.dataset_scripts import ScriptRefused, dataset_root, inline_swepro_scripts
from durable_rollouts.task_sources.row_limits import task_problem, unicode_problem
from durable_rollouts.task_sources.row_shapes.fields import ShapeProblem
from durable_rollouts.task_sources.row_shapes.registry import locate, task_fields
from durable_rollouts.task_sources.row_shapes.swebench_family import SWEBENCH_WORKDIR

# Row key in remote_env_info -> SweBenchSpec field.
SWEBENCH_FIELDS = {
    "repo": "repo",
    "version": "version",
    "base_commit": "base_commit",
    "test_patch": "test_patch",
    "FAIL_TO_PASS": "fail_to_pass",
    "PASS_TO_PASS": "pass_to_pass",
    "environment_setup_commit": "environment_setup_commit",
    "install_config": "install_config",
    "eval_script": "eval_script",
    "log_parser": "log_parser",
    "eval_type": "eval_type",
}


class RowError(ValueError):
    """``line``: the JSONL line, or the directory of a Harbor task (``durable_rollouts.task_sources.harbor_tasks``);
    None: not read from a file."""

    def __init__(self, field: str, reason: str, line: int | str | None = None):
        where = f"line {line}: " if isinstance(line, int) else f"{line}: " if line else ""
        super().__init__(f"{where}{field}: {reason}")
        self.field, self.reason, self.line = field, reason, line


@dataclass(frozen=True)
class DatasetRow:
    """``line``: the row's JSONL line, or a Harbor task's directory (which keys it in the results file)."""

    line: int | str
    task: TaskSpec
    raw: dict[str, Any]


def task_from_row(row: Any, line: int | None = None, root: str | Path | None = None) -> TaskSpec:
    """The row's task; script paths resolve in ``root`` (default ``$ROLLOUT_DATASET_ROOT``, else they are refused)."""
    if not isinstance(row, dict):
        raise RowError("row", "must be a JSON object", line)
    if (problem := unicode_problem(row)) is not None:
        raise RowError(*problem, line)
    if (located := locate(row)) is not None:
        return _shaped_task(row, *located, line)
    metadata = row.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise RowError("metadata", "must be an object", line)
    remote = metadata.get("remote_env_info") or {}
    if not isinstance(remote, dict):
        raise RowError("metadata.remote_env_info", "must be an object", line)
    label = row.get("label") if isinstance(row.get("label"), str) and len(row["label"]) < 256 else None
    swebench = _swebench(remote, line)
    image = metadata.get("image") or remote.get("image_url") or remote.get("image")
    workdir = metadata.get("workdir") or remote.get("workdir") or (SWEBENCH_WORKDIR if swebench else None)
    if not image:
        raise RowError("metadata.image", "missing (nor metadata.remote_env_info.image_url / .image)", line)
    if not workdir:
        raise RowError("metadata.workdir", "missing (nor metadata.remote_env_info.workdir)", line)
    f2p = remote.get("f2p_script")
    spec = {
        "instance_id": metadata.get("instance_id") or remote.get("instance_id") or label or "unknown",
        "image": image,
        "workdir": workdir,
        "problem_statement": metadata.get("problem_statement") or _prompt_text(row.get("prompt"), line),
        "swepro": _swepro(metadata.get("swepro"), root if isinstance(root, Path) else dataset_root(root), line),
        # An f2p script is written to a file verbatim (base64: no shell quoting can corrupt it) and run with python.
        "eval_cmd": metadata.get("eval_cmd") or (f2p_eval_cmd(f2p) if isinstance(f2p, str) and f2p else None),
        "swebench": swebench,
        "pre_commands": _pre_commands(metadata.get("pre_commands") or remote.get("pre_commands"), line),
        "reference_patch": metadata.get("reference_patch") or remote.get("patch"),  # the scripted oracle's
        "test_files": _test_files(metadata, remote, line),
    }
    try:
        task = TaskSpec.model_validate(spec)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "metadata." + ".".join(str(p) for p in first["loc"])
        raise RowError(field, first["msg"], line) from None
    if task.grader is None:
        raise RowError(
            "metadata",
            "no grader: needs swepro.run_script, eval_cmd, remote_env_info.f2p_script or SWE-bench fields"
            " (remote_env_info.test_patch, FAIL_TO_PASS, ...)",
            line,
        )
    if (problem := task_problem(task, row)) is not None:
        raise RowError(*problem, line)
    return task


# TaskSpec field -> the shape row's key that supplies it (or the largest part of it), for errors.
SHAPED_SOURCES = {
    "swebench": "test_patch",
    "eval_cmd": "PASS_TO_PASS",
    "pre_commands": "patch",
    "reference_patch": "patch",
}


def _shaped_task(row: dict[str, Any], prefix: str, fields: Any, line: int | None) -> TaskSpec:
    """The task of a row in a flat dataset shape (``prefix`` leads its field names: "" or "metadata.")."""
    try:
        _, spec = task_fields(fields)
    except ShapeProblem as problem:
        raise RowError(
            problem.field if problem.field == "row" else prefix + problem.field, problem.reason, line
        ) from None
    if not spec["problem_statement"]:
        if not isinstance(row.get("prompt"), (str, list)):
            raise RowError(prefix + "problem_statement", "missing, and the row has no prompt to fall back to", line)
        spec["problem_statement"] = _prompt_text(row.get("prompt"), line)
    try:
        task = TaskSpec.model_validate(spec)
    except ValidationError as exc:
        loc = [str(part) for part in exc.errors()[0]["loc"]]
        key = next(
            (k for k, f in SWEBENCH_FIELDS.items() if loc[0] == "swebench" and loc[1:2] == [f]),
            SHAPED_SOURCES.get(loc[0], loc[0]),
        )
        raise RowError(prefix + key, exc.errors()[0]["msg"], line) from None
    if (limit := task_problem(task, {})) is not None:
        name = limit[0].removeprefix("metadata.")
        raise RowError(prefix + SHAPED_SOURCES.get(name, name), limit[1], line)
    return task


def _swebench(remote: dict[str, Any], line: int | None) -> SweBenchSpec | None:
    """The SWE-bench spec of a row that carries ``test_patch`` or ``FAIL_TO_PASS``; errors name the row's key."""
    if not any(key in remote for key in ("test_patch", "FAIL_TO_PASS")):
        return None
    values = {field: remote[key] for key, field in SWEBENCH_FIELDS.items() if remote.get(key) not in (None, "")}
    if isinstance(values.get("version"), (int, float)):
        values["version"] = str(values["version"])
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        field = SWEBENCH_FIELDS[key]
        if isinstance(values.get(field), str):
            try:
                values[field] = json.loads(values[field])
            except json.JSONDecodeError as exc:
                raise RowError(f"metadata.remote_env_info.{key}", f"not a JSON list ({exc.msg})", line) from None
    try:
        return SweBenchSpec.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0])
        key = next((k for k, f in SWEBENCH_FIELDS.items() if f == field), field)
        raise RowError(f"metadata.remote_env_info.{key}", first["msg"], line) from None


def read_dataset(path: str | Path, root: str | Path | None = None) -> Iterator[DatasetRow | RowError]:
    """Yield each line's row, or the ``RowError`` that explains why it cannot be used.

    Script paths resolve in ``root``, else ``$ROLLOUT_DATASET_ROOT``; with neither they are refused.
    """
    root = dataset_root(root)
    with open(path, "rb") as handle:
        for number, data in enumerate(handle, start=1):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield RowError("row", f"not UTF-8 (byte {exc.start})", number)
                continue
            if not text.strip():
                continue
            try:
                raw = json.loads(text)
            except json.JSONDecodeError as exc:
                yield RowError("row", f"invalid JSON ({exc.msg})", number)
                continue
            except (ValueError, RecursionError) as exc:
                yield RowError("row", f"unreadable JSON ({exc})", number)
                continue
            try:
                yield DatasetRow(line=number, task=task_from_row(raw, number, root), raw=raw)
            except RowError as error:
                yield error


def _swepro(swepro: Any, root: Path | None, line: int | None) -> Any:
    try:
        return inline_swepro_scripts(swepro, root)
    except ScriptRefused as error:
        raise RowError(error.field, error.reason, line) from None


def _test_files(metadata: dict[str, Any], remote: dict[str, Any], line: int | None) -> list[str] | None:
    """The row's test file patterns, or None for the default; errors name the key the row used."""
    for field, source in (("metadata.test_files", metadata), ("metadata.remote_env_info.test_files", remote)):
        value = source.get("test_files")
        if value is None:
            continue
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise RowError(
                field, "must be a non-empty list of glob patterns (leave it out for the default test paths)", line
            )
        try:
            return check_workdir_relative(value)
        except ValueError as error:
            raise RowError(field, str(error), line) from None
    return None


def _prompt_text(prompt: Any, line: int | None) -> str:
    if isinstance(prompt, str) and prompt:
        return prompt
    if isinstance(prompt, list):
        for message in prompt:
            if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
                return message["content"]
    raise RowError("metadata.problem_statement", "missing and the prompt has no user text to fall back to", line)


def _pre_commands(value: Any, line: int | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value.replace("\\n", "\n")]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v]
    raise RowError("metadata.pre_commands", "must be a string or a list of strings", line)
