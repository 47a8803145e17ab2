"""Sessions that capture top-p nuclei and routed experts against the scripted server (``scripted_server`` fixture)."""

from __future__ import annotations

from durable_rollouts.contracts.replay import ReplayCapture, RoutedExpertsShape
from durable_rollouts.contracts.session import SessionConfig
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.session import PolicySession
from durable_rollouts.policy.sglang_client import SGLangClient
from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.scripted_policy.replay_data import DEFAULT_MOE
from durable_rollouts.slime_samples.options import SampleOptions
from tests.policy.replies import anthropic_reply

CAPTURE = ReplayCapture(
    top_p_token_ids=True, routed_experts=RoutedExpertsShape(layers=DEFAULT_MOE.layers, top_k=DEFAULT_MOE.top_k)
)
SYSTEM = {"role": "system", "content": "You are a coding agent."}
TASK = {"role": "user", "content": "Say something."}


def capturing_session(renderer, server, http, journal=None, **config) -> PolicySession:
    client = SGLangClient(http, vocab_size=renderer.vocab_size)
    settings = SessionConfig(policy_url=server.url, replay=CAPTURE, **config)
    return PolicySession("s1", settings, renderer, client, FairExecutor(2, thread_name_prefix="test-cpu"), journal)


OPTIONS = SampleOptions(replay=CAPTURE)


async def captured_trajectory(renderer, server, http) -> Trajectory:
    """Two main turns and a sub-agent turn, every call capturing both kinds of replay data."""
    policy = capturing_session(renderer, server, http)
    first = await policy.run_turn("main", "main", [SYSTEM, TASK], [], None, anthropic_reply)
    follow = [SYSTEM, TASK, {"role": "assistant", "content": first.parsed.text}, {"role": "user", "content": "Go on."}]
    await policy.run_turn("main", "main", follow, [], None, anthropic_reply)
    await policy.run_turn(
        "agent:1", "subagent", [SYSTEM, {"role": "user", "content": "Look around."}], [], None, anthropic_reply
    )
    return Trajectory(policy.ledger.finish(), policy.ledger.turn_log(), policy.ledger.replay())
