"""The names: SGLang's (plus ``auto`` and ``none``), the defaults the contracts carry, and unknown names as one
clear error listing the supported ones."""

import pytest

from durable_rollouts.contracts.session import PolicySpec, SessionConfig
from durable_rollouts.policy.parsers import (
    DEFAULT_REASONING_PARSER,
    DEFAULT_TOOL_CALL_PARSER,
    UnknownParser,
    parse_completion,
    reasoning_parser_named,
    reasoning_parser_names,
    tool_call_parser_named,
    tool_call_parser_names,
)


def test_the_names_are_sglangs():
    assert {
        "qwen3_coder",
        "qwen25",
        "qwen",
        "hermes",
        "glm45",
        "glm",
        "kimi_k2",
        "deepseekv31",
        "gpt-oss",
        "auto",
    } == set(tool_call_parser_names())
    assert {
        "qwen3",
        "qwen3-thinking",
        "deepseek-r1",
        "deepseek-v3",
        "glm45",
        "kimi",
        "kimi_k2",
        "gpt-oss",
        "none",
    } == set(reasoning_parser_names())
    assert tool_call_parser_names() == sorted(tool_call_parser_names())


def test_the_defaults_are_todays_behaviour_and_what_the_contracts_carry():
    assert (DEFAULT_TOOL_CALL_PARSER, DEFAULT_REASONING_PARSER) == ("auto", "qwen3")
    config = SessionConfig(policy_url="http://policy")
    assert (config.tool_parser, config.reasoning_parser) == (DEFAULT_TOOL_CALL_PARSER, DEFAULT_REASONING_PARSER)
    assert (PolicySpec().tool_parser, PolicySpec().reasoning_parser) == (None, None)  # None: the worker's


def test_a_session_spooled_before_reasoning_parser_existed_reads_as_qwen3():
    old = {"policy_url": "http://policy", "tool_parser": "auto"}
    assert SessionConfig.model_validate(old).reasoning_parser == "qwen3"


@pytest.mark.parametrize(
    "lookup, kind, names",
    [
        (tool_call_parser_named, "tool-call", tool_call_parser_names),
        (reasoning_parser_named, "reasoning", reasoning_parser_names),
    ],
)
def test_an_unknown_name_is_named_with_the_supported_ones(lookup, kind, names):
    with pytest.raises(UnknownParser) as raised:
        lookup("llama4")
    assert str(raised.value) == f"unknown {kind} parser 'llama4'; supported: {', '.join(names())}"


def test_parse_completion_checks_both_names_before_parsing():
    with pytest.raises(UnknownParser, match="unknown tool-call parser 'nope'"):
        parse_completion("", "nope")
    with pytest.raises(UnknownParser, match="unknown reasoning parser 'deepseek_r1'; supported: deepseek-r1, "):
        parse_completion("x", "auto", "deepseek_r1")


def test_no_reasoning_parser_leaves_the_thought_in_the_text():
    parsed = parse_completion("<think>x</think>y", "auto", "none")
    assert (parsed.reasoning, parsed.text) == ("", "<think>x</think>y")
