"""Reading a flat dataset row's fields; every problem is a ``ShapeProblem`` naming the row's own key.

Test lists arrive as lists or as JSON-encoded strings (Hugging Face exports
carry both); ``install_config`` as an object or a JSON-encoded one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class ShapeProblem(ValueError):
    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


def present(fields: Mapping[str, Any], key: str) -> bool:
    return fields.get(key) not in (None, "", [])


def text(fields: Mapping[str, Any], key: str) -> str:
    value = fields.get(key)
    if not isinstance(value, str) or not value:
        raise ShapeProblem(key, "missing" if value in (None, "") else "must be a string")
    return value


def optional_text(fields: Mapping[str, Any], key: str) -> str | None:
    return text(fields, key) if present(fields, key) else None


def version(fields: Mapping[str, Any], key: str = "version") -> str:
    value = fields.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return text(fields, key)


def test_list(fields: Mapping[str, Any], key: str, *, required: bool) -> list[str]:
    """A list of test names, decoded from JSON when the row carries a string; ``required`` ones may not be empty."""
    value = fields.get(key)
    if value is None:
        value = []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ShapeProblem(key, f"not a JSON list ({exc.msg})") from None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ShapeProblem(key, "must be a list of test names (or a JSON-encoded one)")
    if required and not value:
        raise ShapeProblem(key, "is empty: the row names no test its fix makes pass")
    return value


def json_object(fields: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = fields.get(key)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ShapeProblem(key, f"not a JSON object ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ShapeProblem(key, "must be an object (or a JSON-encoded one)")
    return value
