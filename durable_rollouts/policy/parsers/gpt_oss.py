"""gpt-oss's harmony format (SGLang ``gpt-oss`` for both parsers: ``gpt_oss_detector.py``, the reasoning
parser's ``GptOssDetector`` over ``harmony_parser.py``).

A completion is a run of messages (the generation prompt ends with ``<|start|>assistant``, so the first one
has no ``<|start|>``); a message ends at ``<|end|>``, ``<|call|>`` or ``<|return|>``, or where the next starts::

    <|channel|>analysis<|message|>THOUGHT<|end|>
    <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
    <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>

Reasoning (``gpt-oss``): the ``analysis`` messages; the rest is answer text. Tool calls (``gpt-oss``): a message
with a recipient ``to=…`` (in the channel header or after the role) is a candidate; it must name
``functions.NAME``, have json as its content type if it gives one (``<|constrain|>json`` or a bare ``json``), a
JSON object as its body (empty: no arguments, as SGLang reads it), and end with ``<|call|>`` (the stop token;
without it the message was cut off).
"""

from __future__ import annotations

import re

from durable_rollouts.policy.parsers.arguments import arguments_object, decoded
from durable_rollouts.policy.parsers.blocks import Block, cut_calls
from durable_rollouts.policy.parsers.parsed import ParsedToolCall, Schemas, ToolCallFormatError, ToolCalls

# <|start|>ROLE <|channel|>HEADER <|message|>BODY, then a closing marker or the start of the next message.
MESSAGE = re.compile(
    r"(?:<\|start\|>(?P<role>(?:(?!<\|).)*))?"
    r"<\|channel\|>(?P<header>(?:(?!<\|(?:message|start|channel|end|call|return)\|>).)*)"
    r"<\|message\|>(?P<body>(?:(?!<\|(?:start|channel|end|call|return)\|>).)*)"
    r"(?P<close><\|(?:end|call|return)\|>)?",
    re.DOTALL,
)
RECIPIENT = re.compile(r"\bto=([^\s<]+)")
FUNCTIONS = "functions."
CALL_END = "<|call|>"


def gpt_oss_reasoning(text: str) -> tuple[str, str]:
    thoughts: list[str] = []
    answer: list[str] = []
    cursor = 0
    for message in MESSAGE.finditer(text):
        answer.append(text[cursor : message.start()])
        cursor = message.end()
        words = _words(message["header"])
        channel = words[0] if words else ""
        # A tool call, or a channel harmony does not define, passes verbatim (markers and all) to the tool-call
        # parser; ``final`` and ``commentary`` bodies are the answer (a commentary without recipient is a preamble).
        if _recipient(message) is not None or channel not in ("analysis", "final", "commentary"):
            answer.append(message.group(0))
        elif channel == "analysis":
            thoughts.append(message["body"])
        else:
            answer.append(message["body"])
    answer.append(text[cursor:])
    return _joined(thoughts), _joined(answer)


def message_call(raw: str, schemas: Schemas) -> ParsedToolCall:
    message = MESSAGE.fullmatch(raw)
    recipient = _recipient(message) if message else None
    if message is None or recipient is None:
        raise ToolCallFormatError("expected a harmony message with a recipient")
    if not recipient.startswith(FUNCTIONS) or recipient == FUNCTIONS:
        raise ToolCallFormatError(f"recipient {recipient!r} is not functions.NAME")
    content_type = [word for word in _words(message["header"])[1:] if not word.startswith("to=")]
    if content_type not in ([], ["json"]):
        raise ToolCallFormatError(f"content type {' '.join(content_type)!r} is not json")
    if message["close"] != CALL_END:
        raise ToolCallFormatError(f"missing {CALL_END}")
    body = message["body"].strip()
    return ParsedToolCall(
        name=recipient.removeprefix(FUNCTIONS), arguments=arguments_object(decoded(body, "arguments")) if body else {}
    )


def gpt_oss_tool_calls(text: str, schemas: Schemas) -> ToolCalls:
    blocks = (
        Block(m.start(), m.end(), payload=m.group(0)) for m in MESSAGE.finditer(text) if _recipient(m) is not None
    )
    return cut_calls(text, blocks, message_call, schemas)


def _recipient(message: re.Match[str]) -> str | None:
    found = RECIPIENT.search(message["role"] or "") or RECIPIENT.search(message["header"])
    return found.group(1) if found else None


def _words(header: str) -> list[str]:
    return header.replace("<|constrain|>", " ").split()


def _joined(parts: list[str]) -> str:
    return "\n\n".join(part.strip() for part in parts if part.strip())
