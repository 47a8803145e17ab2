"""The reply builder the adapter uses, for tests that drive a ``PolicySession`` directly."""

from typing import Any

from durable_rollouts.policy.anthropic_reply import reply_blocks
from durable_rollouts.policy.anthropic_translation import translate_request
from durable_rollouts.policy.parsers import ParsedCompletion


def anthropic_reply(parsed: ParsedCompletion, finish_reason: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The Anthropic blocks of ``parsed`` and the chat message the ledger records for them (as Claude Code echoes
    it)."""
    blocks = reply_blocks(parsed)
    return blocks, translate_request({"messages": [{"role": "assistant", "content": blocks}]}).messages[0]
