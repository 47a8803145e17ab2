"""Which policy server an adapter session talks to, and the session a policy spec asks for.

The session's parsers are the spec's ``tool_parser`` / ``reasoning_parser`` when it names them, else the
worker's ``ParserDefaults`` (``ROLLOUT_TOOL_CALL_PARSER`` / ``ROLLOUT_REASONING_PARSER``); a name the spec
gives that ``durable_rollouts.policy.parsers`` does not know is an ``UnknownParser`` naming the field, so no session
opens with a parser it cannot run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from durable_rollouts.contracts.session import PolicyEngine, PolicySpec, SessionConfig
from durable_rollouts.policy.parsers import (
    DEFAULT_REASONING_PARSER,
    DEFAULT_TOOL_CALL_PARSER,
    known_parser_name,
    reasoning_parser_named,
    tool_call_parser_named,
)


class NoPolicyServer(Exception):
    """Neither the worker nor the rollout names a policy server."""


@dataclass(frozen=True)
class ParserDefaults:
    """The worker's parsers for a rollout whose ``PolicySpec`` names none; both names are known ones."""

    tool_parser: str = DEFAULT_TOOL_CALL_PARSER
    reasoning_parser: str = DEFAULT_REASONING_PARSER

    def __post_init__(self) -> None:
        tool_call_parser_named(self.tool_parser)
        reasoning_parser_named(self.reasoning_parser)


DEFAULT_PARSERS = ParserDefaults()


def session_config_for(
    policy: PolicySpec,
    worker_url: str | None,
    pinned: bool,
    label: str,
    max_turns: int | None = None,
    parsers: ParserDefaults = DEFAULT_PARSERS,
    worker_engine: PolicyEngine = "sglang",
) -> SessionConfig:
    """The adapter session for a policy spec: the worker's policy URL if pinned, else the spec's, else the worker's;
    the worker's engine if pinned, else the spec's, else the worker's."""
    policy_url = worker_url if pinned else policy.policy_url or worker_url
    if not policy_url:
        raise NoPolicyServer("no policy server: the worker has none and the rollout names none")
    return SessionConfig(
        policy_url=policy_url,
        engine=worker_engine if pinned else policy.engine or worker_engine,
        sampling=policy.sampling,
        context_budget=policy.context_budget,
        max_turns=max_turns or policy.max_turns,
        tool_parser=_named(policy.tool_parser, "policy.tool_parser", tool_call_parser_named, parsers.tool_parser),
        reasoning_parser=_named(
            policy.reasoning_parser, "policy.reasoning_parser", reasoning_parser_named, parsers.reasoning_parser
        ),
        label=label,
        staleness=policy.staleness,
        continue_after_abort=policy.continue_after_abort,
        abort_resume_budget_s=policy.abort_resume_budget_s,
        replay=policy.replay,
    )


def _named(name: str | None, field: str, lookup: Callable[[str], object], default: str) -> str:
    """The spec's parser name, checked, or the worker's default when the spec names none."""
    return default if name is None else known_parser_name(lookup, name, field)
