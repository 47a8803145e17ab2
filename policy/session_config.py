"""Which policy server an adapter session talks to, and the session a policy spec asks for."""

from __future__ import annotations

from contracts.rollout import PolicySpec, SessionConfig


class NoPolicyServer(Exception):
    """Neither the worker nor the rollout names a policy server."""


def session_config_for(policy: PolicySpec, worker_url: str | None, pinned: bool, label: str, max_turns: int | None = None) -> SessionConfig:
    """The adapter session for a policy spec: the worker's policy URL if pinned, else the spec's, else the worker's."""
    policy_url = worker_url if pinned else policy.policy_url or worker_url
    if not policy_url:
        raise NoPolicyServer("no policy server: the worker has none and the rollout names none")
    return SessionConfig(
        policy_url=policy_url,
        sampling=policy.sampling,
        context_budget=policy.context_budget,
        max_turns=max_turns or policy.max_turns,
        tool_parser=policy.tool_parser,
        label=label,
        staleness=policy.staleness,
        continue_after_abort=policy.continue_after_abort,
        abort_resume_budget_s=policy.abort_resume_budget_s,
    )
