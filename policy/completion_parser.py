"""Split a decoded completion into reasoning, visible text and tool calls.

Reasoning is what precedes ``</think>`` (an opening ``<think>`` is optional,
since templates may put it in the generation prompt). Tool calls are the
``<tool_call>…</tool_call>`` blocks; each block body is parsed by a registered
format parser:

* ``qwen3_coder``: ``<function=NAME><parameter=K>V</parameter>…</function>``;
  values are typed by the tool's JSON schema (strings stay verbatim);
* ``hermes``: ``{"name": NAME, "arguments": {…} | "<json>"}``;
* ``auto``: picks one of the two per block by its first character.

An ill-formed block never raises: it is reported in ``errors`` and its raw text
is kept in the visible text, so nothing the policy produced disappears.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
FUNCTION_BLOCK = re.compile(r"^\s*<function=([^>\s]+)>(.*)</function>\s*$", re.DOTALL)
PARAMETER_BLOCK = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)


class ToolCallFormatError(ValueError):
    pass


@dataclass(frozen=True)
class ParsedToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedCompletion:
    reasoning: str
    text: str
    tool_calls: list[ParsedToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


ToolCallParser = Callable[[str, dict[str, dict[str, Any]]], ParsedToolCall]


def parse_qwen3_coder(body: str, schemas: dict[str, dict[str, Any]]) -> ParsedToolCall:
    match = FUNCTION_BLOCK.match(body)
    if not match:
        raise ToolCallFormatError("expected <function=NAME>…</function>")
    name, inner = match.group(1), match.group(2)
    properties = schemas.get(name, {}).get("properties", {})
    arguments = {}
    for key, raw in PARAMETER_BLOCK.findall(inner):
        value = raw[1:] if raw.startswith("\n") else raw
        value = value[:-1] if value.endswith("\n") else value
        arguments[key] = _typed(value, properties.get(key, {}))
    leftover = PARAMETER_BLOCK.sub("", inner).strip()
    if leftover:
        raise ToolCallFormatError(f"unexpected text inside <function={name}>: {leftover[:80]!r}")
    return ParsedToolCall(name=name, arguments=arguments)


def parse_hermes(body: str, schemas: dict[str, dict[str, Any]]) -> ParsedToolCall:
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ToolCallFormatError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        raise ToolCallFormatError('expected {"name": …, "arguments": …}')
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolCallFormatError(f"arguments: invalid JSON: {exc.msg}") from None
    if not isinstance(arguments, dict):
        raise ToolCallFormatError("arguments: must be an object")
    return ParsedToolCall(name=payload["name"], arguments=arguments)


def parse_auto(body: str, schemas: dict[str, dict[str, Any]]) -> ParsedToolCall:
    if body.lstrip().startswith("{"):
        return parse_hermes(body, schemas)
    return parse_qwen3_coder(body, schemas)


TOOL_CALL_PARSERS: dict[str, ToolCallParser] = {
    "qwen3_coder": parse_qwen3_coder,
    "hermes": parse_hermes,
    "auto": parse_auto,
}


def parse_completion(text: str, parser: str = "auto", schemas: dict[str, dict[str, Any]] | None = None) -> ParsedCompletion:
    if parser not in TOOL_CALL_PARSERS:
        raise KeyError(f"unknown tool parser {parser!r}; known: {sorted(TOOL_CALL_PARSERS)}")
    parse_block = TOOL_CALL_PARSERS[parser]
    reasoning, content = split_reasoning(text)
    calls: list[ParsedToolCall] = []
    errors: list[str] = []
    kept: list[str] = []
    cursor = 0
    for match in TOOL_CALL_BLOCK.finditer(content):
        kept.append(content[cursor : match.start()])
        cursor = match.end()
        if not match.group(2):
            errors.append("tool call: missing </tool_call>")
            kept.append(match.group(0))
            continue
        try:
            calls.append(parse_block(match.group(1).strip("\n"), schemas or {}))
        except ToolCallFormatError as exc:
            errors.append(f"tool call {len(calls) + len(errors)}: {exc}")
            kept.append(match.group(0))
    kept.append(content[cursor:])
    return ParsedCompletion(reasoning=reasoning, text="".join(kept).strip(), tool_calls=calls, errors=errors)


def stop_reason(parsed: ParsedCompletion, finish_reason: str) -> str:
    """The Anthropic stop reason: a parsed tool call wins, then a length cut-off."""
    if parsed.tool_calls:
        return "tool_use"
    if finish_reason == "length":
        return "max_tokens"
    return "end_turn"


def split_reasoning(text: str) -> tuple[str, str]:
    if "</think>" in text:
        reasoning, content = text.split("</think>", 1)
        return reasoning.replace("<think>", "", 1).strip(), content
    if text.lstrip().startswith("<think>"):
        return text.replace("<think>", "", 1).strip(), ""
    return "", text


def _typed(value: str, schema: dict[str, Any]) -> Any:
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
