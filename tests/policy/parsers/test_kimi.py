"""Kimi-K2: a tool-calls section of ``functions.NAME:INDEX`` calls with JSON arguments, judged call by call; Kimi's
``◁think▷`` reasoning and Kimi-K2's ``<think>`` reasoning."""

from durable_rollouts.policy.anthropic_reply import reply_stop
from durable_rollouts.policy.parsers import parse_completion

BEGIN, END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def call(call_id: str, arguments: str) -> str:
    return f"<|tool_call_begin|>{call_id}<|tool_call_argument_begin|>{arguments}<|tool_call_end|>"


def test_reasoning_text_and_two_calls_in_one_section():
    text = (
        "<think>Read, then run.</think>I'll look at it."
        + BEGIN
        + call("functions.Read:0", '{"file_path": "/repo/a.py"}')
        + call("functions.Bash:1", '{"command": "cd /repo &&\\npytest -q", "env": {"CI": "1", "paths": ["a", "b"]}}')
        + END
    )
    parsed = parse_completion(text, "kimi_k2", "kimi_k2")
    assert parsed.reasoning == "Read, then run." and parsed.text == "I'll look at it."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("Read", {"file_path": "/repo/a.py"}),
        ("Bash", {"command": "cd /repo &&\npytest -q", "env": {"CI": "1", "paths": ["a", "b"]}}),
    ]
    assert parsed.errors == [] and reply_stop(parsed, "stop", None)[0] == "tool_use"


def test_the_functions_prefix_is_optional_and_whitespace_between_calls_is_kept_out():
    text = f"{BEGIN}\n{call('Read:0', '{}')}\n{call(' functions.mcp__fs__list:7 ', '{}')}\n{END}"
    parsed = parse_completion(text, "kimi_k2")
    assert [c.name for c in parsed.tool_calls] == ["Read", "mcp__fs__list"] and parsed.text == ""


def test_an_ill_formed_call_is_kept_and_its_well_formed_sibling_still_runs():
    bad = call("functions.Bash", '{"command": "ls"}')
    worse = call("functions.Bash:2", '{"command": ')
    parsed = parse_completion(BEGIN + call("functions.Read:0", '{"file_path": "/a"}') + bad + worse + END, "kimi_k2")
    assert [c.name for c in parsed.tool_calls] == ["Read"]
    assert parsed.text == bad + worse
    assert parsed.errors[0].startswith("tool call 1: expected functions.NAME:INDEX")
    assert parsed.errors[1].startswith("tool call 2: arguments: invalid JSON")


def test_a_section_cut_off_keeps_its_complete_calls_and_flags_the_cut_one():
    text = (
        "Checking."
        + BEGIN
        + call("functions.Read:0", "{}")
        + '<|tool_call_begin|>functions.Bash:1<|tool_call_argument_begin|>{"comm'
    )
    parsed = parse_completion(text, "kimi_k2")
    assert [c.name for c in parsed.tool_calls] == ["Read"]
    assert parsed.errors == ["tool call 1: missing <|tool_call_end|>"]
    assert parsed.text == 'Checking.<|tool_call_begin|>functions.Bash:1<|tool_call_argument_begin|>{"comm'


def test_a_section_without_calls_is_kept_whole():
    parsed = parse_completion(f"hm {BEGIN} nothing {END}", "kimi_k2")
    assert parsed.tool_calls == [] and parsed.text == f"hm {BEGIN} nothing {END}"
    assert parsed.errors == ["tool call 0: no <|tool_call_begin|> in the tool-calls section"]


def test_kimi_k2_reasoning_ends_where_the_section_begins_when_the_thought_is_not_closed():
    parsed = parse_completion(
        "<think>need the file" + BEGIN + call("functions.Read:0", "{}") + END, "kimi_k2", "kimi_k2"
    )
    assert parsed.reasoning == "need the file" and [c.name for c in parsed.tool_calls] == ["Read"]


def test_kimi_reasoning_uses_its_own_tags():
    parsed = parse_completion("◁think▷Let me see.◁/think▷The answer is 4.", "auto", "kimi")
    assert (parsed.reasoning, parsed.text) == ("Let me see.", "The answer is 4.")
    assert parse_completion("<think>x</think>y", "auto", "kimi").text == "<think>x</think>y"
