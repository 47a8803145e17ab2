"""The worker's default parsers: ``ROLLOUT_TOOL_CALL_PARSER`` / ``ROLLOUT_REASONING_PARSER`` by SGLang's names, and a
name the project does not know stopping the worker at start-up with one line."""

import sys

import pytest

import worker
from durable_rollouts.config.settings import SettingsError, settings_from_env
from durable_rollouts.policy.parsers import reasoning_parser_names, tool_call_parser_names
from durable_rollouts.policy.session_config import ParserDefaults


def test_the_defaults_are_auto_and_qwen3():
    settings = settings_from_env({})
    assert (settings.tool_call_parser, settings.reasoning_parser) == ("auto", "qwen3")
    assert settings.parser_defaults == ParserDefaults()


def test_sglang_names_are_read():
    settings = settings_from_env({"ROLLOUT_TOOL_CALL_PARSER": "kimi_k2", "ROLLOUT_REASONING_PARSER": " deepseek-r1 "})
    assert settings.parser_defaults == ParserDefaults(tool_parser="kimi_k2", reasoning_parser="deepseek-r1")


@pytest.mark.parametrize(
    "variable, kind, names",
    [
        ("ROLLOUT_TOOL_CALL_PARSER", "tool-call", tool_call_parser_names),
        ("ROLLOUT_REASONING_PARSER", "reasoning", reasoning_parser_names),
    ],
)
def test_an_unknown_name_names_the_variable_and_the_supported_ones(variable, kind, names):
    with pytest.raises(SettingsError) as raised:
        settings_from_env({variable: "llama3"})
    assert str(raised.value) == f"{variable}: unknown {kind} parser 'llama3'; supported: {', '.join(names())}"


def test_the_worker_exits_at_start_up_with_that_one_line(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["worker.py"])
    monkeypatch.setenv("ROLLOUT_TOOL_CALL_PARSER", "qwen3-coder")
    with pytest.raises(SystemExit) as exited:
        worker.main()
    assert (
        exited.value.code == f"worker: ROLLOUT_TOOL_CALL_PARSER: unknown tool-call parser 'qwen3-coder'; supported: "
        f"{', '.join(tool_call_parser_names())}"
    )
