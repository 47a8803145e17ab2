"""DeepSeek-V3.1: a tool-calls section of ``NAME<｜tool▁sep｜>{json}`` calls (fullwidth-bar markers); DeepSeek-R1's
always-on reasoning and V3.1's template-opened one."""

from durable_rollouts.policy.anthropic_reply import reply_stop
from durable_rollouts.policy.parsers import parse_completion

BEGIN, END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"


def call(name: str, arguments: str) -> str:
    return f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{arguments}<｜tool▁call▁end｜>"


def test_the_markers_are_the_models_unicode_tokens():
    assert [hex(ord(c)) for c in BEGIN if ord(c) > 127] == ["0xff5c", "0x2581", "0x2581", "0xff5c"]


def test_thinking_mode_reasoning_text_and_two_calls():
    text = (
        "The template opened the thought.</think>Let me check."
        + BEGIN
        + call("Read", '{"file_path": "/repo/a.py"}')
        + call("Bash", '{"command": "grep -n \\"def \\" a.py\\nwc -l a.py", "options": {"cwd": "/repo", "env": []}}')
        + END
    )
    parsed = parse_completion(text, "deepseekv31", "deepseek-v3")
    assert parsed.reasoning == "The template opened the thought." and parsed.text == "Let me check."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("Read", {"file_path": "/repo/a.py"}),
        ("Bash", {"command": 'grep -n "def " a.py\nwc -l a.py', "options": {"cwd": "/repo", "env": []}}),
    ]
    assert parsed.errors == [] and reply_stop(parsed, "stop", None)[0] == "tool_use"


def test_arguments_serialised_twice_by_the_template_are_read():
    (parsed,) = parse_completion(BEGIN + call("Bash", '"{\\"command\\": \\"ls\\"}"') + END, "deepseekv31").tool_calls
    assert parsed.arguments == {"command": "ls"}


def test_ill_formed_calls_are_flagged_and_kept():
    no_separator = "<｜tool▁call▁begin｜>Bash {}<｜tool▁call▁end｜>"
    bad_json = call("Bash", "{'command': 'ls'}")
    parsed = parse_completion(BEGIN + no_separator + call("Read", "{}") + bad_json + END, "deepseekv31")
    assert [c.name for c in parsed.tool_calls] == ["Read"]
    assert parsed.text == no_separator + bad_json
    assert [e.split(":")[0] for e in parsed.errors] == ["tool call 0", "tool call 2"]


def test_deepseek_r1_reasons_until_the_closing_tag_and_all_through_without_one():
    assert (
        parse_completion("thinking, no tag opened</think>answer", "auto", "deepseek-r1").reasoning
        == "thinking, no tag opened"
    )
    cut = parse_completion("<think>still going", "auto", "deepseek-r1")
    assert (cut.reasoning, cut.text) == ("still going", "")
    untagged = parse_completion("just text, but R1 always reasons", "auto", "deepseek-r1")
    assert (untagged.reasoning, untagged.text) == ("just text, but R1 always reasons", "")


def test_deepseek_v3_without_thinking_is_all_answer():
    parsed = parse_completion("The answer." + BEGIN + call("Read", "{}") + END, "deepseekv31", "deepseek-v3")
    assert (parsed.reasoning, parsed.text, [c.name for c in parsed.tool_calls]) == ("", "The answer.", ["Read"])
