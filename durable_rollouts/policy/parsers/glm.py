"""GLM-4.5's formats (SGLang ``glm45`` / ``glm``: ``glm4_moe_detector.py``; reasoning ``glm45``).

A call is ``<tool_call>NAME`` then, per argument,
``<arg_key>K</arg_key><arg_value>V</arg_value>`` (the template puts a newline
after the name and after each tag pair), then ``</tool_call>``. The name
ends at the first whitespace or ``<``; a value is kept verbatim and typed by
the tool's schema (``arguments.typed_value``; the template writes strings
bare and other values as JSON). Text outside the pairs makes the call
ill-formed (SGLang drops it).

Reasoning is ``<think>…</think>``; a ``<tool_call>`` ends a thought the model
did not close (SGLang's ``tool_start_token`` for GLM-4.5).
"""

from __future__ import annotations

import re

from durable_rollouts.policy.parsers.arguments import typed_value
from durable_rollouts.policy.parsers.blocks import cut_calls, delimited
from durable_rollouts.policy.parsers.parsed import ParsedToolCall, Schemas, ToolCallFormatError, ToolCalls
from durable_rollouts.policy.parsers.think_tags import ThinkTags

TOOL_CALL = ("<tool_call>", "</tool_call>")
NAMED = re.compile(r"\s*([^\s<]+)(.*)", re.DOTALL)
ARGUMENT = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)

GLM45_REASONING = ThinkTags("<think>", "</think>", interrupt="<tool_call>")


def call_body(body: str, schemas: Schemas) -> ParsedToolCall:
    match = NAMED.fullmatch(body)
    if not match:
        raise ToolCallFormatError("expected NAME then <arg_key>…</arg_key><arg_value>…</arg_value> pairs")
    name, pairs = match.groups()
    properties = schemas.get(name, {}).get("properties", {})
    arguments = {
        key.strip(): typed_value(value, properties.get(key.strip(), {})) for key, value in ARGUMENT.findall(pairs)
    }
    leftover = ARGUMENT.sub("", pairs).strip()
    if leftover:
        raise ToolCallFormatError(f"unexpected text in the call of {name}: {leftover[:80]!r}")
    return ParsedToolCall(name=name, arguments=arguments)


def glm45_tool_calls(text: str, schemas: Schemas) -> ToolCalls:
    return cut_calls(text, delimited(text, *TOOL_CALL), call_body, schemas)
