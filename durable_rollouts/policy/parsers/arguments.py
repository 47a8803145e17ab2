"""Tool-call arguments in the two shapes the formats write them.

* JSON formats (Qwen2.5 / Hermes, Kimi-K2, DeepSeek-V3.1, gpt-oss) write one
  JSON object; a JSON *string* holding the object is accepted too (templates
  that ``tojson`` arguments already serialised as a string). Anything else is
  a ``ToolCallFormatError``.
* XML formats (Qwen3-Coder, GLM-4.5) write each parameter's value as bare
  text; ``typed_value`` types it by the tool's JSON schema: a ``string``
  parameter keeps its text verbatim, any other declared type is decoded as
  JSON when it decodes (else kept as text), and an undeclared parameter is
  decoded only when it looks like a JSON object, array or literal.
"""

from __future__ import annotations

import json
from typing import Any

from durable_rollouts.policy.parsers.parsed import ToolCallFormatError


def decoded(raw: str, what: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ToolCallFormatError(f"{what}: invalid JSON: {exc.msg}") from None


def arguments_object(value: Any) -> dict[str, Any]:
    """``value`` as the arguments of a call: a dict, or a JSON string of one."""
    if isinstance(value, str):
        value = decoded(value, "arguments")
    if not isinstance(value, dict):
        raise ToolCallFormatError("arguments: must be a JSON object")
    return value


def typed_value(value: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "string" or kind is None and not _looks_like_json(value):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _looks_like_json(value: str) -> bool:
    stripped = value.strip()
    return stripped[:1] in ("{", "[") or stripped in ("true", "false", "null")
