"""GLM-4.5: ``<tool_call>NAME`` with ``<arg_key>``/``<arg_value>`` pairs typed by schema, and ``<think>`` reasoning
that a tool call can end."""

from durable_rollouts.policy.anthropic_reply import reply_stop
from durable_rollouts.policy.parsers import parse_completion

SCHEMAS = {
    "Read": {"type": "object", "properties": {"file_path": {"type": "string"}, "limit": {"type": "integer"}}},
    "MultiEdit": {"type": "object", "properties": {"file_path": {"type": "string"}, "edits": {"type": "array"}}},
}


def test_reasoning_text_and_two_calls_as_the_template_renders_them():
    text = (
        "\n<think>The file first, then the tests.</think>\nReading it.\n"
        "<tool_call>Read\n<arg_key>file_path</arg_key>\n<arg_value>/repo/a.py</arg_value>\n"
        "<arg_key>limit</arg_key>\n<arg_value>20</arg_value>\n</tool_call>\n"
        "<tool_call>Bash\n<arg_key>command</arg_key>\n<arg_value>cd /repo &&\npytest -q</arg_value>\n</tool_call>"
    )
    parsed = parse_completion(text, "glm45", "glm45", SCHEMAS)
    assert parsed.reasoning == "The file first, then the tests."
    assert parsed.text == "Reading it."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("Read", {"file_path": "/repo/a.py", "limit": 20}),
        ("Bash", {"command": "cd /repo &&\npytest -q"}),
    ]
    assert parsed.errors == [] and reply_stop(parsed, "stop", None)[0] == "tool_use"


def test_nested_json_values_and_strings_that_look_like_json():
    text = (
        "<tool_call>MultiEdit\n<arg_key>file_path</arg_key>\n<arg_value>[not, json]</arg_value>\n"
        '<arg_key>edits</arg_key>\n<arg_value>[{"old_string": "x\\ny", "new_string": "{}"}]</arg_value>\n</tool_call>'
    )
    (call,) = parse_completion(text, "glm", schemas=SCHEMAS).tool_calls
    assert call.arguments == {"file_path": "[not, json]", "edits": [{"old_string": "x\ny", "new_string": "{}"}]}


def test_a_call_without_arguments_and_glm47s_name_without_newline():
    calls = parse_completion(
        "<tool_call>Status\n</tool_call><tool_call>Read<arg_key>file_path</arg_key><arg_value>/a</arg_value></tool_call>",
        "glm45",
    ).tool_calls
    assert [(c.name, c.arguments) for c in calls] == [("Status", {}), ("Read", {"file_path": "/a"})]


def test_ill_formed_calls_are_flagged_and_kept_as_text():
    stray = "<tool_call>Bash\nls -la\n</tool_call>"
    cut = "<tool_call>Read\n<arg_key>file_path</arg_key>\n<arg_value>/a"
    parsed = parse_completion(f"{stray}\n{cut}", "glm45")
    assert parsed.tool_calls == []
    assert parsed.errors == [
        "tool call 0: unexpected text in the call of Bash: 'ls -la'",
        "tool call 1: missing </tool_call>",
    ]
    assert parsed.text == f"{stray}\n{cut}"


def test_a_tool_call_ends_a_thought_the_model_did_not_close():
    text = (
        "<think>I should read "
        "it\n<tool_call>Read\n<arg_key>file_path</arg_key>\n<arg_value>/a</arg_value>\n</tool_call>"
    )
    parsed = parse_completion(text, "glm45", "glm45")
    assert parsed.reasoning == "I should read it"
    assert [c.name for c in parsed.tool_calls] == ["Read"]
    # qwen3's rule keeps that call inside the unfinished thought
    assert parse_completion(text, "glm45", "qwen3").tool_calls == []
