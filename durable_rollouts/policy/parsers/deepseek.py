"""DeepSeek's formats: DeepSeek-V3.1 tool calls (SGLang ``deepseekv31``: ``deepseekv31_detector.py``) and
reasoning (``deepseek-r1``, ``deepseek-v3``).

Calls are grouped in one section, each a name and JSON arguments, with
fullwidth bars (U+FF5C) and lower-eighth blocks (U+2581) in the markers::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>

See ``blocks.sectioned`` for how a section's calls are judged one by one.

Reasoning is ``<think>…</think>``. ``deepseek-r1`` always reasons first
(SGLang forces it: without ``</think>`` all of the completion is reasoning);
``deepseek-v3`` (V3.1's template opens the thought in the generation prompt
when thinking, closes it there when not) does not.
"""

from __future__ import annotations

from durable_rollouts.policy.parsers.arguments import arguments_object, decoded
from durable_rollouts.policy.parsers.blocks import cut_calls, sectioned
from durable_rollouts.policy.parsers.parsed import ParsedToolCall, Schemas, ToolCallFormatError, ToolCalls
from durable_rollouts.policy.parsers.think_tags import ThinkTags

SECTION = ("<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>")
CALL = ("<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>")
SEPARATOR = "<\uff5ctool\u2581sep\uff5c>"

DEEPSEEK_R1_REASONING = ThinkTags("<think>", "</think>", forced=True)
DEEPSEEK_V3_REASONING = ThinkTags("<think>", "</think>")


def call_body(body: str, schemas: Schemas) -> ParsedToolCall:
    name, separated, arguments = body.partition(SEPARATOR)
    name = name.strip()
    if not separated or not name or any(c.isspace() for c in name):
        raise ToolCallFormatError(f"expected NAME{SEPARATOR}{{…}}")
    return ParsedToolCall(name=name, arguments=arguments_object(decoded(arguments, "arguments")))


def deepseek_v31_tool_calls(text: str, schemas: Schemas) -> ToolCalls:
    return cut_calls(text, sectioned(text, SECTION, CALL), call_body, schemas)
