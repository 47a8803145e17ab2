"""Kimi's formats: Kimi-K2 tool calls (SGLang ``kimi_k2``: ``kimik2_detector.py``) and reasoning (``kimi``,
``kimi_k2``).

Calls are grouped in one section, each with an id ``functions.NAME:INDEX``
and JSON arguments::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|>…<|tool_calls_section_end|>

The ``functions.`` prefix is optional, as in SGLang; the index is not kept
(the Anthropic reply gives every call its own id). See ``blocks.sectioned``
for how a section's calls are judged one by one.

Reasoning: ``kimi`` is ``◁think▷…◁/think▷`` (SGLang's Kimi thinking detector;
never forced); ``kimi_k2`` is ``<think>…</think>``, where a tool-calls section
ends a thought the model did not close.
"""

from __future__ import annotations

import re

from durable_rollouts.policy.parsers.arguments import arguments_object, decoded
from durable_rollouts.policy.parsers.blocks import cut_calls, sectioned
from durable_rollouts.policy.parsers.parsed import ParsedToolCall, Schemas, ToolCallFormatError, ToolCalls
from durable_rollouts.policy.parsers.think_tags import ThinkTags

SECTION = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>")
CALL = ("<|tool_call_begin|>", "<|tool_call_end|>")
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_ID = re.compile(r"\s*(?:functions\.)?(\S+?):\d+\s*")

KIMI_REASONING = ThinkTags("◁think▷", "◁/think▷")
KIMI_K2_REASONING = ThinkTags("<think>", "</think>", interrupt=SECTION[0])


def call_body(body: str, schemas: Schemas) -> ParsedToolCall:
    call_id, separated, arguments = body.partition(ARGUMENT_BEGIN)
    match = CALL_ID.fullmatch(call_id)
    if not separated or not match:
        raise ToolCallFormatError(f"expected functions.NAME:INDEX{ARGUMENT_BEGIN}{{…}}")
    return ParsedToolCall(name=match.group(1), arguments=arguments_object(decoded(arguments, "arguments")))


def kimi_k2_tool_calls(text: str, schemas: Schemas) -> ToolCalls:
    return cut_calls(text, sectioned(text, SECTION, CALL), call_body, schemas)
