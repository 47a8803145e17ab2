"""Completion parsing under SGLang's parser names: reasoning, visible text and tool calls.

``parse_completion(text, tool_parser, reasoning_parser, schemas)`` is the
entry point and ``stop_reason`` the Anthropic stop reason of its result.
``parsed`` holds the result types, ``registry`` the names, ``blocks`` the
cutting of calls out of the text, ``arguments`` the two argument shapes,
``think_tags`` tag-delimited reasoning, and one module per model family its
formats: ``qwen``, ``glm``, ``kimi``, ``deepseek``, ``gpt_oss``. No parser
drops what the policy wrote (see ``parsed``).
"""

from durable_rollouts.policy.parsers.completion import parse_completion
from durable_rollouts.policy.parsers.parsed import ParsedCompletion, ParsedToolCall
from durable_rollouts.policy.parsers.registry import (
    DEFAULT_REASONING_PARSER,
    DEFAULT_TOOL_CALL_PARSER,
    UnknownParser,
    known_parser_name,
    reasoning_parser_named,
    reasoning_parser_names,
    tool_call_parser_named,
    tool_call_parser_names,
)

__all__ = [
    "DEFAULT_REASONING_PARSER",
    "DEFAULT_TOOL_CALL_PARSER",
    "ParsedCompletion",
    "ParsedToolCall",
    "UnknownParser",
    "known_parser_name",
    "parse_completion",
    "reasoning_parser_named",
    "reasoning_parser_names",
    "tool_call_parser_named",
    "tool_call_parser_names",
]
