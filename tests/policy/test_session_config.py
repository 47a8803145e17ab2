"""The session a policy spec asks for: its parsers are the spec's when it names them, else the worker's; an
unknown name is refused before a session opens, naming the spec's field."""

import pytest

from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.policy.parsers import UnknownParser, reasoning_parser_names, tool_call_parser_names
from durable_rollouts.policy.session_config import ParserDefaults, session_config_for

WORKER = ParserDefaults(tool_parser="glm45", reasoning_parser="glm45")


def test_without_a_spec_or_a_worker_choice_the_parsers_are_the_defaults():
    config = session_config_for(PolicySpec(), "http://policy", False, "wf#1")
    assert (config.tool_parser, config.reasoning_parser) == ("auto", "qwen3")


def test_the_worker_default_fills_in_and_the_spec_wins():
    assert session_config_for(PolicySpec(), "http://policy", False, "wf#1", parsers=WORKER).tool_parser == "glm45"
    config = session_config_for(PolicySpec(tool_parser="kimi_k2"), "http://policy", False, "wf#1", parsers=WORKER)
    assert (config.tool_parser, config.reasoning_parser) == ("kimi_k2", "glm45")


@pytest.mark.parametrize(
    "spec, field, kind, names",
    [
        (PolicySpec(tool_parser="qwen3-coder"), "policy.tool_parser", "tool-call", tool_call_parser_names),
        (PolicySpec(reasoning_parser="r1"), "policy.reasoning_parser", "reasoning", reasoning_parser_names),
    ],
)
def test_an_unknown_name_in_the_spec_names_the_field_and_the_supported_ones(spec, field, kind, names):
    with pytest.raises(UnknownParser) as raised:
        session_config_for(spec, "http://policy", False, "wf#1", parsers=WORKER)
    name = spec.tool_parser or spec.reasoning_parser
    assert str(raised.value) == f"{field}: unknown {kind} parser {name!r}; supported: {', '.join(names())}"


def test_the_worker_defaults_hold_only_known_names():
    with pytest.raises(UnknownParser, match="unknown reasoning parser 'think'"):
        ParserDefaults(reasoning_parser="think")


def test_the_engine_is_the_workers_when_pinned_else_the_specs_else_the_workers():
    assert session_config_for(PolicySpec(), "http://policy", False, "wf#1").engine == "sglang"
    assert session_config_for(PolicySpec(engine="vllm"), "http://policy", False, "wf#1").engine == "vllm"
    assert session_config_for(PolicySpec(), "http://policy", False, "wf#1", worker_engine="vllm").engine == "vllm"
    assert (
        session_config_for(PolicySpec(engine="vllm"), "http://policy", True, "wf#1", worker_engine="sglang").engine
        == "sglang"
    )
