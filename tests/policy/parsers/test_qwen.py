"""Qwen's formats: Qwen3-Coder XML calls typed by schema, Qwen2.5 / Hermes JSON calls, ``auto`` per block, and
Qwen3 reasoning; ill-formed calls flagged and kept, never raised."""

import pytest

from durable_rollouts.policy.anthropic_reply import reply_stop
from durable_rollouts.policy.parsers import parse_completion

SCHEMAS = {
    "Read": {"type": "object", "properties": {"file_path": {"type": "string"}, "limit": {"type": "integer"}}},
    "Edit": {"type": "object", "properties": {"replace_all": {"type": "boolean"}, "old_string": {"type": "string"}}},
    "MultiEdit": {"type": "object", "properties": {"file_path": {"type": "string"}, "edits": {"type": "array"}}},
}


def test_qwen3_coder_call_with_reasoning_and_typed_parameters():
    text = (
        "<think>\nlook first\n</think>\n\nLet me read it.\n\n<tool_call>\n<function=Read>\n"
        "<parameter=file_path>\n/repo/a.py\n</parameter>\n<parameter=limit>\n20\n</parameter>\n</function>\n</tool_call>"
    )
    parsed = parse_completion(text, "qwen3_coder", "qwen3", SCHEMAS)
    assert parsed.reasoning == "look first"
    assert parsed.text == "Let me read it."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("Read", {"file_path": "/repo/a.py", "limit": 20})]
    assert parsed.errors == [] and reply_stop(parsed, "stop", None)[0] == "tool_use"


def test_string_parameters_keep_inner_newlines_and_numbers_verbatim():
    text = (
        "<tool_call>\n<function=Edit>\n<parameter=old_string>\n  x = "
        "1\n\n</parameter>\n<parameter=replace_all>\ntrue\n</parameter>\n</function>\n</tool_call>"
    )
    (call,) = parse_completion(text, "auto", schemas=SCHEMAS).tool_calls
    assert call.arguments == {"old_string": "  x = 1\n", "replace_all": True}


def test_qwen3_coder_several_calls_with_nested_json_values():
    text = (
        "Two edits, then a test "
        "run.\n<tool_call>\n<function=MultiEdit>\n<parameter=file_path>\n/repo/a.py\n</parameter>\n"
        '<parameter=edits>\n[{"old_string": "a\\nb", "new_string": "{\\"k\\": '
        '1}"}]\n</parameter>\n</function>\n</tool_call>\n'
        "<tool_call>\n<function=Bash>\n<parameter=command>\npytest -q \\\n  "
        "tests/\n</parameter>\n</function>\n</tool_call>"
    )
    parsed = parse_completion(text, "qwen3_coder", schemas=SCHEMAS)
    assert [c.name for c in parsed.tool_calls] == ["MultiEdit", "Bash"]
    assert parsed.tool_calls[0].arguments["edits"] == [{"old_string": "a\nb", "new_string": '{"k": 1}'}]
    assert parsed.tool_calls[1].arguments == {"command": "pytest -q \\\n  tests/"}
    assert parsed.text == "Two edits, then a test run." and parsed.errors == []


@pytest.mark.parametrize("parser", ["qwen25", "qwen", "hermes", "auto"])
def test_json_calls_with_object_or_string_arguments(parser):
    text = (
        'ok <tool_call>\n{"name": "Bash", "arguments": {"command": "ls"}}\n</tool_call>'
        '<tool_call>{"name": "Bash", "arguments": "{\\"command\\": \\"pwd\\"}"}</tool_call>'
    )
    parsed = parse_completion(text, parser)
    assert [c.arguments["command"] for c in parsed.tool_calls] == ["ls", "pwd"]
    assert parsed.text == "ok"


def test_qwen25_nested_arguments_and_newlines_in_strings():
    text = (
        "<think>\nplan\n</think>\n\n<tool_call>\n"
        '{"name": "Write", "arguments": {"file_path": "/a.json", "content": "{\\n  \\"x\\": [1, 2]\\n}\\n", "meta": '
        '{"tags": ["a", {"b": null}]}}}'
        "\n</tool_call>"
    )
    parsed = parse_completion(text, "qwen25")
    (call,) = parsed.tool_calls
    assert call.arguments == {
        "file_path": "/a.json",
        "content": '{\n  "x": [1, 2]\n}\n',
        "meta": {"tags": ["a", {"b": None}]},
    }
    assert parsed.reasoning == "plan" and parsed.text == ""


def test_qwen25_reads_parameters_for_arguments_as_sglang_does():
    (call,) = parse_completion(
        '<tool_call>\n{"name": "Bash", "parameters": {"command": "ls"}}\n</tool_call>', "qwen25"
    ).tool_calls
    assert call.arguments == {"command": "ls"}


@pytest.mark.parametrize(
    "parser, text, error",
    [
        ("auto", "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n", "missing </tool_call>"),
        ("auto", "<tool_call>\n<function=Bash>oops</tool_call>", "expected <function=NAME>"),
        ("auto", "<tool_call>{not json}</tool_call>", "invalid JSON"),
        (
            "auto",
            "<tool_call>\n<function=Bash>\nstray\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>",
            "unexpected text",
        ),
        ("qwen3_coder", '<tool_call>\n{"name": "Bash", "arguments": {}}\n</tool_call>', "expected <function=NAME>"),
        ("qwen25", "<tool_call>\n<function=Bash>\n</function>\n</tool_call>", "invalid JSON"),
        ("qwen25", '<tool_call>\n{"arguments": {}}\n</tool_call>', '"name"'),
        ("qwen25", '<tool_call>\n{"name": "Bash", "arguments": [1]}\n</tool_call>', "must be a JSON object"),
    ],
)
def test_ill_formed_calls_are_flagged_and_kept_as_text(parser, text, error):
    parsed = parse_completion(text, parser)
    assert parsed.tool_calls == []
    assert any(error in e for e in parsed.errors), parsed.errors
    assert "<tool_call>" in parsed.text
    assert reply_stop(parsed, "stop", None)[0] == "end_turn"


def test_a_well_formed_call_survives_an_ill_formed_sibling():
    bad = "<tool_call>\n<function=Bash>oops</tool_call>"
    text = f"<tool_call>\n<function=Read>\n<parameter=file_path>\n/a\n</parameter>\n</function>\n</tool_call>\n{bad}"
    parsed = parse_completion(text, "auto", schemas=SCHEMAS)
    assert [c.name for c in parsed.tool_calls] == ["Read"]
    assert parsed.text == bad and parsed.errors == ["tool call 1: expected <function=NAME>…</function>"]


def test_unterminated_reasoning_after_a_length_cut():
    parsed = parse_completion("<think>\nstill thinking about", "auto")
    assert parsed.reasoning == "still thinking about" and parsed.text == ""
    assert reply_stop(parsed, "length", None)[0] == "max_tokens"


def test_qwen3_reasoning_without_the_opening_tag_and_without_any_tag():
    assert (
        parse_completion("planned in the prompt's <think>\n</think>\n\nDone.").reasoning
        == "planned in the prompt's <think>"
    )
    plain = parse_completion("No thought at all.")
    assert (plain.reasoning, plain.text) == ("", "No thought at all.")


def test_qwen3_thinking_reasons_until_the_closing_tag_even_when_cut_off():
    parsed = parse_completion("the template opened the thought and the budget ran out", "auto", "qwen3-thinking")
    assert parsed.reasoning == "the template opened the thought and the budget ran out" and parsed.text == ""
    assert parse_completion("a</think>b", "auto", "qwen3-thinking").text == "b"
