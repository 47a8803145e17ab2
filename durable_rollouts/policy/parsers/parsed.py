"""What parsing a completion yields, and the two kinds of parser every model family provides.

Invariant of every parser in this package: nothing the policy produced
disappears. A well-formed tool call leaves the visible text for
``tool_calls``; an ill-formed one stays in the visible text verbatim and is
reported in ``errors``; only reasoning leaves the text, for ``reasoning``
(without its own tags). No parser raises on what the policy wrote: the one
error is an unknown parser *name* (``durable_rollouts.policy.parsers.registry``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Tool name -> the JSON schema of its input (``durable_rollouts.policy.anthropic_translation.tool_schemas``).
Schemas = dict[str, dict[str, Any]]


class ToolCallFormatError(ValueError):
    """One candidate tool call is not well-formed; the message says why and goes to ``errors``."""


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


@dataclass
class ToolCalls:
    """What a tool-call parser found in the visible text: the calls, why the ill-formed ones are not calls,
    and the text with the well-formed calls cut out (the ill-formed ones still in it)."""

    calls: list[ParsedToolCall]
    errors: list[str]
    text: str


# The visible text (and the tools' input schemas, for typing arguments) -> what it holds.
ToolCallParser = Callable[[str, Schemas], ToolCalls]
# The whole completion -> (reasoning, the rest). The rest keeps every tool call verbatim for the tool-call parser.
ReasoningParser = Callable[[str], tuple[str, str]]
