"""Qwen's formats: ``<tool_call>`` blocks with an XML (Qwen3-Coder) or JSON (Qwen2.5, Hermes) body, and
Qwen3's ``<think>`` reasoning.

Each call is one ``<tool_call>…</tool_call>`` block; its body is read by ``qwen3_coder`` (SGLang
``qwen3_coder_detector.py``: ``<function=NAME>``, then ``<parameter=K>\\nV\\n</parameter>`` per argument, then
``</function>``, each value typed by the tool's schema), by ``qwen25`` / ``qwen`` / ``hermes`` (SGLang
``qwen25_detector.py``, ``hermes_detector.py``: ``{"name": NAME, "arguments": {…}}``) or by this project's
``auto`` (the JSON body when it starts with ``{``, else the Qwen3-Coder one). Reasoning: ``qwen3`` is
``<think>…</think>``, the opening tag optional (the project's default); ``qwen3-thinking`` always reasons first
(its template opens the thought in the generation prompt), as SGLang forces it. docs/adapter.md (*Completion
parsers: SGLang's names*) lists every parser.

Invariant: stricter than SGLang, text outside the parameters, or a parameter without ``</parameter>``, makes a
Qwen3-Coder call ill-formed (kept verbatim in the text and reported) instead of being dropped.
"""

from __future__ import annotations

import re
from typing import Any

from durable_rollouts.policy.parsers.arguments import arguments_object, decoded, typed_value
from durable_rollouts.policy.parsers.blocks import PayloadParser, cut_calls, delimited
from durable_rollouts.policy.parsers.parsed import (
    ParsedToolCall,
    Schemas,
    ToolCallFormatError,
    ToolCallParser,
    ToolCalls,
)
from durable_rollouts.policy.parsers.think_tags import ThinkTags

TOOL_CALL = ("<tool_call>", "</tool_call>")
FUNCTION = re.compile(r"<function=([^>\s]+)>(.*)</function>", re.DOTALL)
PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)

QWEN3_REASONING = ThinkTags("<think>", "</think>")
QWEN3_THINKING_REASONING = ThinkTags("<think>", "</think>", forced=True)


def function_body(body: str, schemas: Schemas) -> ParsedToolCall:
    match = FUNCTION.fullmatch(body.strip())
    if not match:
        raise ToolCallFormatError("expected <function=NAME>…</function>")
    name, inner = match.groups()
    properties = schemas.get(name, {}).get("properties", {})
    arguments = {}
    for key, raw in PARAMETER.findall(inner):
        value = raw.removeprefix("\n").removesuffix("\n")  # one newline each side is the template's; the rest is kept
        arguments[key] = typed_value(value, properties.get(key, {}))
    leftover = PARAMETER.sub("", inner).strip()
    if leftover:
        raise ToolCallFormatError(f"unexpected text inside <function={name}>: {leftover[:80]!r}")
    return ParsedToolCall(name=name, arguments=arguments)


def json_body(body: str, schemas: Schemas) -> ParsedToolCall:
    payload: Any = decoded(body, "call")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        raise ToolCallFormatError('expected {"name": …, "arguments": …}')
    # SGLang also reads ``parameters`` for ``arguments``, and so does this parser.
    arguments = payload["arguments"] if "arguments" in payload else payload.get("parameters", {})
    return ParsedToolCall(name=payload["name"], arguments=arguments_object(arguments))


def either_body(body: str, schemas: Schemas) -> ParsedToolCall:
    return json_body(body, schemas) if body.lstrip().startswith("{") else function_body(body, schemas)


def _tool_call_blocks(body: PayloadParser) -> ToolCallParser:
    def parse(text: str, schemas: Schemas) -> ToolCalls:
        return cut_calls(text, delimited(text, *TOOL_CALL), body, schemas)

    return parse


qwen3_coder_tool_calls = _tool_call_blocks(function_body)
json_tool_calls = _tool_call_blocks(json_body)
auto_tool_calls = _tool_call_blocks(either_body)
