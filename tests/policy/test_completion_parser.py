"""Reasoning and tool-call parsing: formats, typing, and ill-formed calls flagged, not raised."""

import pytest

from policy.completion_parser import parse_completion, stop_reason

SCHEMAS = {
    "Read": {"type": "object", "properties": {"file_path": {"type": "string"}, "limit": {"type": "integer"}}},
    "Edit": {"type": "object", "properties": {"replace_all": {"type": "boolean"}, "old_string": {"type": "string"}}},
}


def test_qwen3_coder_call_with_reasoning_and_typed_parameters():
    text = (
        "<think>\nlook first\n</think>\n\nLet me read it.\n\n<tool_call>\n<function=Read>\n"
        "<parameter=file_path>\n/repo/a.py\n</parameter>\n<parameter=limit>\n20\n</parameter>\n</function>\n</tool_call>"
    )
    parsed = parse_completion(text, "qwen3_coder", SCHEMAS)
    assert parsed.reasoning == "look first"
    assert parsed.text == "Let me read it."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("Read", {"file_path": "/repo/a.py", "limit": 20})]
    assert parsed.errors == [] and stop_reason(parsed, "stop") == "tool_use"


def test_string_parameters_keep_inner_newlines_and_numbers_verbatim():
    text = "<tool_call>\n<function=Edit>\n<parameter=old_string>\n  x = 1\n\n</parameter>\n<parameter=replace_all>\ntrue\n</parameter>\n</function>\n</tool_call>"
    (call,) = parse_completion(text, "auto", SCHEMAS).tool_calls
    assert call.arguments == {"old_string": "  x = 1\n", "replace_all": True}


def test_hermes_json_calls_and_string_arguments():
    text = 'ok <tool_call>\n{"name": "Bash", "arguments": {"command": "ls"}}\n</tool_call><tool_call>{"name": "Bash", "arguments": "{\\"command\\": \\"pwd\\"}"}</tool_call>'
    parsed = parse_completion(text, "hermes")
    assert [c.arguments["command"] for c in parsed.tool_calls] == ["ls", "pwd"]
    assert parsed.text == "ok"


@pytest.mark.parametrize(
    "text, error",
    [
        ("<tool_call>\n<function=Bash>\n<parameter=command>\nls\n", "missing </tool_call>"),
        ("<tool_call>\n<function=Bash>oops</tool_call>", "expected <function=NAME>"),
        ("<tool_call>{not json}</tool_call>", "invalid JSON"),
        ("<tool_call>\n<function=Bash>\nstray\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>", "unexpected text"),
    ],
)
def test_ill_formed_calls_are_flagged_and_kept_as_text(text, error):
    parsed = parse_completion(text, "auto")
    assert parsed.tool_calls == []
    assert any(error in e for e in parsed.errors)
    assert "<tool_call>" in parsed.text
    assert stop_reason(parsed, "stop") == "end_turn"


def test_unterminated_reasoning_after_a_length_cut():
    parsed = parse_completion("<think>\nstill thinking about", "auto")
    assert parsed.reasoning == "still thinking about" and parsed.text == ""
    assert stop_reason(parsed, "length") == "max_tokens"


def test_unknown_parser_is_a_clear_error():
    with pytest.raises(KeyError, match="unknown tool parser"):
        parse_completion("x", "nope")
