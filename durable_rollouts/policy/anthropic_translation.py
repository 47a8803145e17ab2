"""Translate an Anthropic Messages request into chat-template messages and tools.

Mapping (one direction only; the reply direction lives in ``anthropic_reply``):

* ``system`` (string or text blocks) -> a leading ``{"role": "system"}`` message;
* a ``role: "system"`` message inside ``messages`` (Claude Code sends one at
  index 1) is folded into the neighbouring user turn, preferring the one before;
* user text blocks -> one user message; ``tool_result`` blocks -> ``tool``
  messages (in order, before any text that shares their user turn);
* assistant ``thinking`` -> ``reasoning_content``, ``text`` -> ``content``,
  ``tool_use`` -> ``tool_calls`` with the original ids and dict arguments;
* ``cache_control``, ``signature``, ``metadata`` and unknown block types carry
  no meaning for the policy and are dropped.

The output is deterministic for equal inputs (modulo ``cache_control``), which
is what lets the token capture recognise a request that extends an earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class RequestError(ValueError):
    """A request the adapter cannot translate; the message names the offending field."""


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


def translate_request(body: dict[str, Any]) -> ChatRequest:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages: must be a non-empty list")
    chat: list[dict[str, Any]] = []
    system = _system_text(body.get("system"))
    if system:
        chat.append({"role": "system", "content": system})
    pending_system: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise RequestError(f"messages[{index}]: must be an object")
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            pending_system.append(_plain_text(content, f"messages[{index}].content"))
            _fold_system_into_previous_user(chat, pending_system)
        elif role == "user":
            chat.extend(_user_messages(content, f"messages[{index}].content", pending_system))
            pending_system = []
        elif role == "assistant":
            chat.append(_assistant_message(content, f"messages[{index}].content"))
        else:
            raise RequestError(f"messages[{index}].role: unknown role {role!r}")
    if pending_system:
        chat.append({"role": "user", "content": "\n\n".join(pending_system)})
    return ChatRequest(messages=chat, tools=translate_tools(body.get("tools")))


def translate_tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestError("tools: must be a list")
    out = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise RequestError(f"tools[{index}].name: must be a string")
        out.append(
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "parameters": tool.get("input_schema", {"type": "object", "properties": {}}),
                },
            }
        )
    return out


def tool_schemas(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Tool name -> JSON schema of its input, for typing parsed arguments."""
    return {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}


def _fold_system_into_previous_user(chat: list[dict[str, Any]], pending: list[str]) -> None:
    if chat and chat[-1]["role"] == "user":
        chat[-1] = {"role": "user", "content": "\n\n".join([chat[-1]["content"], *pending])}
        pending.clear()


def _system_text(system: Any) -> str:
    if system is None:
        return ""
    return _plain_text(system, "system")


def _plain_text(content: Any, field: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(f"{field}: must be a string or a list of blocks")
    parts = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise RequestError(f"{field}[{index}]: must be an object")
        if block.get("type") == "text":
            parts.append(_text_of(block, f"{field}[{index}]"))
    return "\n\n".join(parts)


def _text_of(block: dict[str, Any], field: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise RequestError(f"{field}.text: must be a string")
    return text


def _user_messages(content: Any, field: str, pending_system: list[str]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": "\n\n".join([*pending_system, content])}]
    if not isinstance(content, list):
        raise RequestError(f"{field}: must be a string or a list of blocks")
    tool_messages: list[dict[str, Any]] = []
    texts: list[str] = list(pending_system)
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise RequestError(f"{field}[{index}]: must be an object")
        kind = block.get("type")
        if kind == "text":
            texts.append(_text_of(block, f"{field}[{index}]"))
        elif kind == "tool_result":
            tool_messages.append(_tool_message(block, f"{field}[{index}]"))
        elif kind in ("image", "document"):
            texts.append(f"[{kind} omitted]")
    text_message = [{"role": "user", "content": "\n\n".join(texts)}] if texts else []
    return tool_messages + text_message


def _tool_message(block: dict[str, Any], field: str) -> dict[str, Any]:
    tool_use_id = block.get("tool_use_id")
    if not isinstance(tool_use_id, str):
        raise RequestError(f"{field}.tool_use_id: must be a string")
    body = block.get("content", "")
    if isinstance(body, list):
        text = "\n\n".join(
            b["text"] if b.get("type") == "text" and isinstance(b.get("text"), str) else f"[{b.get('type')} omitted]"
            for b in body
            if isinstance(b, dict)
        )
    elif isinstance(body, str):
        text = body
    else:
        raise RequestError(f"{field}.content: must be a string or a list of blocks")
    return {"role": "tool", "tool_call_id": tool_use_id, "content": text}


def _assistant_message(content: Any, field: str) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content.strip()}
    if not isinstance(content, list):
        raise RequestError(f"{field}: must be a string or a list of blocks")
    reasoning: list[str] = []
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise RequestError(f"{field}[{index}]: must be an object")
        kind = block.get("type")
        if kind == "thinking":
            reasoning.append(str(block.get("thinking", "")))
        elif kind == "text":
            texts.append(_text_of(block, f"{field}[{index}]"))
        elif kind == "tool_use":
            calls.append(_tool_call(block, f"{field}[{index}]"))
    message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(t.strip() for t in texts if t.strip())}
    if reasoning:
        message["reasoning_content"] = "\n\n".join(reasoning).strip()
    if calls:
        message["tool_calls"] = calls
    return message


def _tool_call(block: dict[str, Any], field: str) -> dict[str, Any]:
    name, call_id, arguments = block.get("name"), block.get("id"), block.get("input", {})
    if not isinstance(name, str) or not isinstance(call_id, str):
        raise RequestError(f"{field}: tool_use needs string id and name")
    if not isinstance(arguments, dict):
        raise RequestError(f"{field}.input: must be an object")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
