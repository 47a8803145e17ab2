"""Anthropic Messages -> chat-template messages, checked on real Claude Code captures."""

import pytest

from durable_rollouts.policy.adapter_server import classify_turn
from durable_rollouts.policy.anthropic_translation import RequestError, translate_request
from tests.wire_fixtures import captured


def test_turn_one_folds_the_system_role_message_into_the_first_user_turn():
    _, body = captured("turn1_body.json")
    chat = translate_request(body)
    assert [m["role"] for m in chat.messages] == ["system", "user"]
    assert chat.messages[0]["content"].startswith("You are a Claude agent")
    user = chat.messages[1]["content"]
    assert "gitStatus" in user and "Create out.txt" in user and "Primary working directory: /workspace/repo" in user
    assert {t["function"]["name"] for t in chat.tools} >= {"Bash", "Read", "Edit", "Write"}
    assert chat.tools[0]["function"]["parameters"]["type"] == "object"


def test_tool_use_and_tool_result_round_trip_with_ids():
    _, body = captured("compact_request.json")
    chat = translate_request(body)
    roles = [m["role"] for m in chat.messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    call = chat.messages[2]["tool_calls"][0]
    assert chat.messages[3]["tool_call_id"] == call["id"]
    assert isinstance(call["function"]["arguments"], dict)
    assert "create a detailed summary" in chat.messages[4]["content"]


def test_thinking_text_and_cache_control_are_translated_deterministically():
    body = {
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": ""},
                    {"type": "text", "text": "ok ", "cache_control": {"type": "ephemeral"}},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "a.py"}],
                        "is_error": False,
                    },
                    {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                ],
            },
        ],
    }
    chat = translate_request(body)
    assert chat.messages == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "ok",
            "reasoning_content": "hmm",
            "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "Bash", "arguments": {"command": "ls"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a.py"},
        {"role": "user", "content": "<system-reminder>x</system-reminder>"},
    ]


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}, "tool_use_id"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"description": "no name"}]}, "tools[0].name"),
    ],
)
def test_bad_requests_name_the_field(body, field):
    with pytest.raises(RequestError, match=field.replace("[", r"\[").replace("]", r"\]")):
        translate_request(body)


@pytest.mark.parametrize(
    "capture, expected",
    [
        ("turn1_body.json", ("main", "main")),
        ("compact_request.json", ("main", "compaction")),
        ("post_compact_request.json", ("main", "continuation")),
        ("subagent_request.json", ("agent:a74736570725ddfdc", "subagent")),
    ],
)
def test_segment_kinds_of_real_claude_code_requests(capture, expected):
    headers, body = captured(capture)
    lowered = {k.lower(): v for k, v in headers.items()}
    assert classify_turn(lowered, body, translate_request(body)) == expected
