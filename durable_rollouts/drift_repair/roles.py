"""Role calls of the drift → repair episode through the adapter's token-capturing policy client.

A role call is one turn of its own adapter session: ``open_session`` on the
worker's ``SessionRegistry`` (the same machinery Claude Code's turns go
through), ``PolicySession.run_turn`` with lane = the role and segment kind
``role``, then ``finish_session``. So each role yields exactly one
``TokenSegment`` whose ``loss_mask == 1`` tokens are the ids the policy
server sampled, with their log-probs. The segment travels packed
(``PackedTrajectory``) in the role's turn, with its summary.

The session is finished whatever happens, so a failed call never leaks it,
and it is not spooled: a retried role call simply opens a new one, so a
restarted worker has nothing of it to take back.
The policy server is the worker's when it pins one, else the episode's
``policy_url``; with neither the call fails as ``NoPolicyServer``. The
parsers are the episode's spec's, else the worker's ``ParserDefaults``.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from durable_rollouts.contracts.drift_repair import Role, RoleTurn
from durable_rollouts.contracts.session import PolicyEngine, PolicySpec
from durable_rollouts.contracts.tokens import SegmentSummary
from durable_rollouts.drift_repair.prompts import role_messages
from durable_rollouts.policy.session import assistant_reply
from durable_rollouts.policy.session_config import DEFAULT_PARSERS, ParserDefaults, session_config_for
from durable_rollouts.policy.session_registry import SessionRegistry
from durable_rollouts.policy.trajectory_packing import pack_trajectory


class RolePlayer(Protocol):
    async def play(self, role: Role, user_prompt: str, policy: PolicySpec, workflow_id: str) -> RoleTurn: ...


class AdapterRolePlayer:
    """Plays a role with the policy behind this worker's adapter (see the module docstring)."""

    def __init__(
        self,
        registry: SessionRegistry,
        policy_url: str | None,
        pin_policy_url: bool,
        parsers: ParserDefaults = DEFAULT_PARSERS,
        policy_engine: PolicyEngine = "sglang",
    ):
        self.registry = registry
        self.policy_url = policy_url
        self.pin_policy_url = pin_policy_url
        self.parsers = parsers
        self.policy_engine = policy_engine

    async def play(self, role: Role, user_prompt: str, policy: PolicySpec, workflow_id: str) -> RoleTurn:
        registry = self.registry
        label = f"{workflow_id}:{role}"
        config = session_config_for(
            policy, self.policy_url, self.pin_policy_url, label, 1, self.parsers, self.policy_engine
        )
        ticket = registry.open_session(config, durable=False)
        session = registry.get(ticket.session_id)
        assert session is not None, "the session was just opened"
        messages = role_messages(role, user_prompt)
        try:
            outcome = await session.run_turn(role, "role", messages, [], None, assistant_reply)
        finally:
            result = await registry.finish_session(ticket.session_id)
        segment = result.segments[0] if result.segments else None
        trajectory = await asyncio.to_thread(pack_trajectory, [segment]) if segment else None
        return RoleTurn(
            role=role,
            session_id=ticket.session_id,
            system_prompt=messages[0]["content"],
            user_prompt=user_prompt,
            completion=outcome.parsed.text,
            reasoning=outcome.parsed.reasoning,
            finish_reason=outcome.finish_reason,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.output_tokens,
            trajectory=trajectory,
            segment=SegmentSummary.of(segment) if segment else None,
        )
