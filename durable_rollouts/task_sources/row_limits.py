"""The limits a dataset row must meet to travel through Temporal, checked when the row is read.

* Every string in a row, keys included, is valid Unicode: a lone surrogate
  (JSON ``"\\ud800"``) has no UTF-8 encoding, so no gRPC call could carry it.
* The instance id is at most ``MAX_INSTANCE_ID_BYTES`` (512) bytes of UTF-8
  with no control characters: it is part of the workflow id (Temporal allows
  1,000 bytes), the ``RolloutInstance`` search attribute (2 KiB per value) and
  the sandbox labels. Over-long ids are refused, not shortened, so a workflow
  id always shows the instance it runs.
* The task encodes to at most ``MAX_TASK_BYTES`` (512 KiB) of JSON: it is the
  workflow's start argument and travels again inside the grading request
  beside a patch of up to 1 MiB (Temporal refuses a payload over 2 MiB and gRPC a
  message over 4 MB) and is recorded again with the boot, agent and grading
  activities of every attempt (a history holds at most 50 MB).

A violation comes back as ``(field, reason)``: the row's field (the value is
never echoed) and the limit; ``dataset_rows`` raises it as that line's ``RowError``.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from durable_rollouts.contracts.tasks import TaskSpec

MAX_INSTANCE_ID_BYTES = 512
MAX_TASK_BYTES = 512 << 10
# TaskSpec field -> where a row may have carried it when metadata.<field> is absent.
FALLBACK_FIELDS = {
    "instance_id": ("metadata.remote_env_info.instance_id", "label"),
    "image": ("metadata.remote_env_info.image_url", "metadata.remote_env_info.image"),
    "workdir": ("metadata.remote_env_info.workdir",),
    "problem_statement": ("prompt",),
    "eval_cmd": ("metadata.remote_env_info.f2p_script",),
    "swebench": ("metadata.remote_env_info",),
    "pre_commands": ("metadata.remote_env_info.pre_commands",),
    "reference_patch": ("metadata.remote_env_info.patch",),
}


Problem = tuple[str, str]


def unicode_problem(row: Any) -> Problem | None:
    """Where a row holds a string (or key) that is not valid Unicode, if anywhere."""
    pending: list[tuple[str, Any]] = [("row", row)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str) and not _encodable(value):
            return _field(path), "contains a lone surrogate (not valid Unicode)"
        if isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                if not _encodable(key):
                    return _field(path), "has a key with a lone surrogate (not valid Unicode)"
                pending.append((f"{path}.{key}", item))
        elif isinstance(value, list):
            pending.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None


def task_problem(task: TaskSpec, row: dict[str, Any]) -> Problem | None:
    """How the task's instance id or encoded size breaks the limits above, if it does."""
    id_bytes = len(task.instance_id.encode())
    if id_bytes > MAX_INSTANCE_ID_BYTES:
        return (
            source_field(row, "instance_id"),
            f"{id_bytes:,} bytes of UTF-8, over the {MAX_INSTANCE_ID_BYTES}-byte limit (it is part of the workflow id, "
            f"which Temporal limits to 1,000)",
        )
    if any(unicodedata.category(c) == "Cc" for c in task.instance_id):
        return source_field(row, "instance_id"), "contains control characters"
    total = len(task.model_dump_json().encode())
    if total > MAX_TASK_BYTES:
        sizes = {
            name: len(json.dumps(value, ensure_ascii=False).encode())
            for name, value in task.model_dump(mode="json").items()
        }
        largest = max(sizes, key=sizes.__getitem__)
        return (
            source_field(row, largest),
            f"{sizes[largest]:,} bytes; the whole task encodes to {total:,} bytes, over the {MAX_TASK_BYTES:,}-byte "
            f"(512 KiB) limit"
            " for a rollout input (it travels with a patch of up to 1 MiB; Temporal refuses payloads over 2 MiB)",
        )
    return None


def source_field(row: dict[str, Any], name: str) -> str:
    """The row field a ``TaskSpec`` field was read from: ``metadata.<name>`` or the fallback that supplied it."""
    metadata = row.get("metadata")
    if isinstance(metadata, dict) and metadata.get(name):
        return f"metadata.{name}"
    for candidate in FALLBACK_FIELDS.get(name, ()):
        if _lookup(row, candidate):
            return candidate
    return f"metadata.{name}"


def _lookup(row: dict[str, Any], dotted: str) -> Any:
    value: Any = row
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _field(path: str) -> str:
    return path.removeprefix("row.") if path != "row" else "row"
