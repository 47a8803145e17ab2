"""``parse_completion`` over every pair of parsers: it never raises on what a policy wrote, and nothing the policy
wrote disappears (every word ends up in the reasoning, the text or a call)."""

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_rollouts.policy.anthropic_reply import reply_stop
from durable_rollouts.policy.parsers import parse_completion, reasoning_parser_names, tool_call_parser_names
from durable_rollouts.policy.parsers.parsed import ParsedCompletion

WORDS = ["alpha", "beta", "gamma"]
MARKUP = [
    "<think>", "</think>", "◁think▷", "◁/think▷", "\n",
    "<tool_call>", "</tool_call>", "<function=Read>", "</function>", "<parameter=file_path>", "</parameter>",
    '{"name": "Read", "arguments": {"file_path": "/a"}}', "{", "}", '"',
    "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>",
    "<|tool_call_argument_begin|>", "functions.Read:0",
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>",
    "<|start|>assistant", "<|channel|>analysis", "<|channel|>final", "<|channel|>commentary to=functions.Read",
    "<|constrain|>json", "<|message|>", "<|end|>", "<|call|>", "<|return|>",
]  # fmt: skip
PAIRS = list(itertools.product(tool_call_parser_names(), reasoning_parser_names()))
completions = st.lists(st.sampled_from(WORDS + MARKUP), max_size=24).map(" ".join)


def everything_kept(parsed: ParsedCompletion) -> str:
    calls = [f"{call.name} {json.dumps(call.arguments)}" for call in parsed.tool_calls]
    return " ".join([parsed.reasoning, parsed.text, *calls])


@pytest.mark.parametrize(("tool_parser", "reasoning_parser"), PAIRS)
@settings(max_examples=40, deadline=None)
@given(text=completions)
def test_no_parser_raises_or_drops_a_word(tool_parser, reasoning_parser, text):
    parsed = parse_completion(
        text, tool_parser, reasoning_parser, {"Read": {"properties": {"file_path": {"type": "string"}}}}
    )
    assert reply_stop(parsed, "length", None)[0] in ("tool_use", "max_tokens")
    if "gpt-oss" in (tool_parser, reasoning_parser):
        return  # harmony headers (role, channel words) are structure, not text
    kept = everything_kept(parsed)
    assert [word for word in WORDS if word in text and word not in kept] == []


def test_reasoning_is_split_before_tool_calls_are_looked_for():
    text = "<think>maybe <tool_call>\n<function=Read>\n</function>\n</tool_call>"
    parsed = parse_completion(text)
    assert parsed.tool_calls == [] and parsed.reasoning.startswith("maybe <tool_call>")


def test_stop_reason_a_call_wins_then_a_length_cut_off():
    call = parse_completion("<tool_call>\n<function=Read>\n</function>\n</tool_call>")
    assert reply_stop(call, "length", None)[0] == "tool_use"
    assert reply_stop(parse_completion("cut"), "length", None)[0] == "max_tokens"
    assert reply_stop(parse_completion("done"), "stop", None)[0] == "end_turn"
