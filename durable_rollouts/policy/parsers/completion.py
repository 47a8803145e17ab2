"""Split a decoded completion into reasoning, visible text and tool calls, with the parsers a session names.

The reasoning parser splits the whole completion first; the tool-call parser
then reads only what is not reasoning, so a call inside an unfinished
thought stays reasoning. The visible text is what is left, stripped. Both
names are looked up before anything is parsed: an unknown one is an
``UnknownParser`` whatever the text.
"""

from __future__ import annotations

from durable_rollouts.policy.parsers.parsed import ParsedCompletion, Schemas
from durable_rollouts.policy.parsers.registry import (
    DEFAULT_REASONING_PARSER,
    DEFAULT_TOOL_CALL_PARSER,
    reasoning_parser_named,
    tool_call_parser_named,
)


def parse_completion(
    text: str,
    tool_parser: str = DEFAULT_TOOL_CALL_PARSER,
    reasoning_parser: str = DEFAULT_REASONING_PARSER,
    schemas: Schemas | None = None,
) -> ParsedCompletion:
    find_calls = tool_call_parser_named(tool_parser)
    split_reasoning = reasoning_parser_named(reasoning_parser)
    reasoning, rest = split_reasoning(text)
    found = find_calls(rest, schemas or {})
    return ParsedCompletion(reasoning=reasoning, text=found.text.strip(), tool_calls=found.calls, errors=found.errors)
