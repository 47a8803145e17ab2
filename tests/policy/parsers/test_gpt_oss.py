"""gpt-oss harmony: the analysis channel is the reasoning, the final channel (and commentary preambles) the
answer, and commentary messages addressed ``to=functions.NAME`` reach the tool-call parser as calls."""

import pytest

from durable_rollouts.policy.anthropic_reply import reply_stop
from durable_rollouts.policy.parsers import parse_completion

ANALYSIS = "<|channel|>analysis<|message|>Need to read the file, then run the tests.<|end|>"


def tool_message(name: str, arguments: str, header: str = "") -> str:
    return (
        f"<|start|>assistant<|channel|>commentary to=functions.{name} "
        f"{header}<|constrain|>json<|message|>{arguments}<|call|>"
    )


def test_reasoning_then_a_tool_call():
    parsed = parse_completion(ANALYSIS + tool_message("Read", '{"file_path": "/repo/a.py"}'), "gpt-oss", "gpt-oss")
    assert parsed.reasoning == "Need to read the file, then run the tests."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("Read", {"file_path": "/repo/a.py"})]
    assert parsed.text == "" and parsed.errors == [] and reply_stop(parsed, "stop", None)[0] == "tool_use"


def test_reasoning_then_the_final_answer():
    parsed = parse_completion(
        ANALYSIS + "<|start|>assistant<|channel|>final<|message|>All **tests** pass.\nDone.", "gpt-oss", "gpt-oss"
    )
    assert parsed.reasoning == "Need to read the file, then run the tests."
    assert (parsed.text, parsed.tool_calls) == ("All **tests** pass.\nDone.", [])


def test_a_preamble_and_two_calls_with_nested_json_and_the_recipient_before_the_channel():
    second = (
        '<|start|>assistant to=functions.Bash<|channel|>commentary json<|message|>{"command": "cd /repo '
        '&&\\npytest", "env": {"A": ["1"]}}<|call|>'
    )
    text = (
        ANALYSIS
        + "<|start|>assistant<|channel|>commentary<|message|>Reading first.<|end|>"
        + tool_message("Read", "{}")
        + second
    )
    parsed = parse_completion(text, "gpt-oss", "gpt-oss")
    assert parsed.text == "Reading first."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("Read", {}),
        ("Bash", {"command": "cd /repo &&\npytest", "env": {"A": ["1"]}}),
    ]


def test_an_empty_body_is_a_call_without_arguments():
    (call,) = parse_completion(tool_message("Status", ""), "gpt-oss", "gpt-oss").tool_calls
    assert (call.name, call.arguments) == ("Status", {})


@pytest.mark.parametrize(
    "message, error",
    [
        (
            '<|start|>assistant<|channel|>commentary to=functions.Bash <|constrain|>json<|message|>{"command": "l',
            "missing <|call|>",
        ),
        (tool_message("Bash", "{not json}"), "arguments: invalid JSON"),
        (
            '<|start|>assistant<|channel|>analysis to=browser.search <|constrain|>json<|message|>{"q": "x"}<|call|>',
            "is not functions.NAME",
        ),
        (
            "<|start|>assistant<|channel|>commentary to=functions.Bash <|constrain|>yaml<|message|>command: ls<|call|>",
            "content type 'yaml'",
        ),
    ],
)
def test_ill_formed_calls_are_flagged_and_kept_verbatim(message, error):
    parsed = parse_completion(ANALYSIS + message, "gpt-oss", "gpt-oss")
    assert parsed.tool_calls == [] and parsed.text == message
    assert len(parsed.errors) == 1 and error in parsed.errors[0]
    assert parsed.reasoning == "Need to read the file, then run the tests."


def test_a_cut_off_analysis_is_reasoning_and_text_outside_messages_is_answer():
    cut = parse_completion("<|channel|>analysis<|message|>Thinking about the", "gpt-oss", "gpt-oss")
    assert (cut.reasoning, cut.text) == ("Thinking about the", "")
    plain = parse_completion("no harmony markers at all", "gpt-oss", "gpt-oss")
    assert (plain.reasoning, plain.text) == ("", "no harmony markers at all")


def test_a_channel_harmony_does_not_define_is_kept_verbatim():
    odd = "<|start|>assistant<|channel|>scratch<|message|>odd<|end|>"
    assert parse_completion(ANALYSIS + odd, "gpt-oss", "gpt-oss").text == odd


def test_the_tool_call_parser_alone_finds_calls_in_raw_harmony():
    parsed = parse_completion(ANALYSIS + tool_message("Read", "{}"), "gpt-oss", "none")
    assert [c.name for c in parsed.tool_calls] == ["Read"] and parsed.text == ANALYSIS and parsed.reasoning == ""
