"""Encode a parsed completion as an Anthropic Messages reply: JSON or SSE.

Follows what Claude Code needs on the wire (CLAUDE_CODE_WIRE.md §2): ``event:``
lines, a unique message id per reply, ``content_block_stop`` after every
block, tool input only through ``input_json_delta``, and real token usage.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from durable_rollouts.policy.parsers import ParsedCompletion


def new_message_id() -> str:
    return f"msg_{secrets.token_hex(12)}"


def reply_blocks(parsed: ParsedCompletion) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if parsed.reasoning:
        blocks.append({"type": "thinking", "thinking": parsed.reasoning, "signature": ""})
    if parsed.text or not parsed.tool_calls:
        blocks.append({"type": "text", "text": parsed.text})
    for call in parsed.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{secrets.token_hex(12)}", "name": call.name, "input": call.arguments}
        )
    return blocks


def reply_stop(parsed: ParsedCompletion, finish_reason: str, stop_sequence: str | None) -> tuple[str, str | None]:
    """Anthropic's ``stop_reason`` and ``stop_sequence``: a parsed tool call wins (the agent must run it), then a
    matched stop sequence (``stop_sequence``, non-null only then), then a length cut-off, else ``end_turn``."""
    if parsed.tool_calls:
        return "tool_use", None
    if stop_sequence is not None:
        return "stop_sequence", stop_sequence
    return ("max_tokens" if finish_reason == "length" else "end_turn"), None


def message_body(
    message_id: str,
    model: str,
    blocks: list[dict[str, Any]],
    stop_reason: str | None,
    input_tokens: int,
    output_tokens: int,
    stop_sequence: str | None = None,
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}


def sse_event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


SSE_KEEPALIVE = b": keep-alive\n\n"


def sse_message_start(message_id: str, model: str, input_tokens: int) -> bytes:
    start = message_body(message_id, model, [], None, input_tokens, 0)
    return sse_event("message_start", {"type": "message_start", "message": start})


def sse_blocks_and_stop(
    blocks: list[dict[str, Any]], stop_reason: str, output_tokens: int, stop_sequence: str | None = None
) -> bytes:
    chunks = []
    for index, block in enumerate(blocks):
        chunks.extend(_sse_block(index, block))
    chunks.append(
        sse_event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    chunks.append(sse_event("message_stop", {"type": "message_stop"}))
    return b"".join(chunks)


def sse_error(error_type: str, message: str) -> bytes:
    return sse_event("error", error_body(error_type, message))


def _sse_block(index: int, block: dict[str, Any]) -> list[bytes]:
    kind = block["type"]
    start: dict[str, Any]
    if kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        delta = {"type": "thinking_delta", "thinking": block["thinking"]}
    elif kind == "text":
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}
    return [
        sse_event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
        sse_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
        sse_event("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]
