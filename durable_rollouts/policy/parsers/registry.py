"""The parsers by name: SGLang's names (``--tool-call-parser``, ``--reasoning-parser``; slime's
``--sglang-tool-call-parser``, ``--sglang-reasoning-parser``), so a run names the same format here as there.

Each SGLang name parses the format SGLang's parser of that name parses (the
family modules say where this one is stricter or more lenient); aliases are
SGLang's own (``qwen``, ``hermes`` for ``qwen25``; ``glm`` for ``glm45``).
Two names are this project's: tool-call parser ``auto`` (Qwen3-Coder or
Qwen2.5 per block, the default) and reasoning parser ``none`` (no reasoning:
the whole completion is the answer). The default reasoning parser is
``qwen3``. A name not in these tables is an ``UnknownParser`` naming it and
listing the supported ones.
"""

from __future__ import annotations

from collections.abc import Callable

from durable_rollouts.policy.parsers import deepseek, glm, gpt_oss, kimi, qwen
from durable_rollouts.policy.parsers.parsed import ReasoningParser, ToolCallParser

DEFAULT_TOOL_CALL_PARSER = "auto"
DEFAULT_REASONING_PARSER = "qwen3"

TOOL_CALL_PARSERS: dict[str, ToolCallParser] = {
    "auto": qwen.auto_tool_calls,
    "qwen3_coder": qwen.qwen3_coder_tool_calls,
    "qwen25": qwen.json_tool_calls,
    "qwen": qwen.json_tool_calls,
    "hermes": qwen.json_tool_calls,
    "glm45": glm.glm45_tool_calls,
    "glm": glm.glm45_tool_calls,
    "kimi_k2": kimi.kimi_k2_tool_calls,
    "deepseekv31": deepseek.deepseek_v31_tool_calls,
    "gpt-oss": gpt_oss.gpt_oss_tool_calls,
}


def no_reasoning(text: str) -> tuple[str, str]:
    return "", text


REASONING_PARSERS: dict[str, ReasoningParser] = {
    "qwen3": qwen.QWEN3_REASONING,
    "qwen3-thinking": qwen.QWEN3_THINKING_REASONING,
    "deepseek-r1": deepseek.DEEPSEEK_R1_REASONING,
    "deepseek-v3": deepseek.DEEPSEEK_V3_REASONING,
    "glm45": glm.GLM45_REASONING,
    "kimi": kimi.KIMI_REASONING,
    "kimi_k2": kimi.KIMI_K2_REASONING,
    "gpt-oss": gpt_oss.gpt_oss_reasoning,
    "none": no_reasoning,
}


class UnknownParser(ValueError):
    """A parser name neither SGLang's table nor this project's has (the message lists the supported ones)."""


def tool_call_parser_names() -> list[str]:
    return sorted(TOOL_CALL_PARSERS)


def reasoning_parser_names() -> list[str]:
    return sorted(REASONING_PARSERS)


def tool_call_parser_named(name: str) -> ToolCallParser:
    if name not in TOOL_CALL_PARSERS:
        raise UnknownParser(f"unknown tool-call parser {name!r}; supported: {', '.join(tool_call_parser_names())}")
    return TOOL_CALL_PARSERS[name]


def reasoning_parser_named(name: str) -> ReasoningParser:
    if name not in REASONING_PARSERS:
        raise UnknownParser(f"unknown reasoning parser {name!r}; supported: {', '.join(reasoning_parser_names())}")
    return REASONING_PARSERS[name]


def known_parser_name(lookup: Callable[[str], object], name: str, where: str) -> str:
    """``name`` when ``lookup`` knows it, else an ``UnknownParser`` starting with ``where`` (what named it)."""
    try:
        lookup(name)
    except UnknownParser as error:
        raise UnknownParser(f"{where}: {error}") from None
    return name
