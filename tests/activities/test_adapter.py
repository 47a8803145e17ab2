"""The adapter sessions' activities: a merge judges the staleness bound against the policy server's version
at merge time, once per session (a retry reports the stored verdict), and a server that cannot say leaves the
sample as sampled."""

import dataclasses

import pytest
from temporalio.testing import ActivityEnvironment

from activities.adapter import AdapterActivities
from durable_rollouts.contracts.agent_runs import MergeRequest
from durable_rollouts.contracts.session import SessionConfig, StalenessBound
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer

pytestmark = pytest.mark.asyncio(loop_scope="session")


def as_workflow(workflow_id: str) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(ActivityEnvironment.default_info(), workflow_id=workflow_id)
    return env


@pytest.mark.parametrize("policy", ["mask", "drop"])
async def test_merge_judges_staleness_against_the_servers_version_now(renderer, policy):
    """Real adapter, scripted SGLang server: turns sampled at version 1 and 4, the server at 5 when the rollout merges;
    with a bound of 2, the first turn is stale. ``mask`` stores it as context, ``drop`` stores it as sampled and says to
    drop."""
    server = ScriptedPolicyServer(renderer, default_policy="noop", weight_version="1")
    server_url = await server.start()
    adapter = AdapterServer(renderer)
    await adapter.start()
    try:
        bound = StalenessBound(max_staleness=2, policy=policy)
        ticket = adapter.registry.open_session(SessionConfig(policy_url=server_url, staleness=bound), durable=False)
        session = adapter.registry.get(ticket.session_id)
        messages = [{"role": "user", "content": "hello"}]
        await session.run_turn(
            "main",
            "main",
            messages,
            [],
            None,
            lambda parsed, reason: (None, {"role": "assistant", "content": parsed.text}),
        )
        server.control.set_version("4")
        messages += [
            {"role": "assistant", "content": server.renderer.decode(server.records[0].output_ids[:-1])},
            {"role": "user", "content": "again"},
        ]
        await session.run_turn(
            "main",
            "main",
            messages,
            [],
            None,
            lambda parsed, reason: (None, {"role": "assistant", "content": parsed.text}),
        )
        server.control.set_version("5")
        sessions = AdapterActivities(adapter)
        merge = MergeRequest(session_id=ticket.session_id, workflow_id="wf-stale")
        merged = await as_workflow("wf-stale").run(sessions.merge_segments, merge)
        server.control.set_version("1")
        retried = await as_workflow("wf-stale").run(sessions.merge_segments, merge)
        assert retried == merged, "a retried merge reports and stores the verdict of the first"
    finally:
        await adapter.stop()
        await server.stop()
    report = merged.staleness
    assert report is not None and (
        report.current_version,
        report.oldest_version,
        report.staleness,
        report.stale_turns,
    ) == ("5", "1", 4, 1)
    assert report.dropped == (policy == "drop")
    [stored] = unpack_trajectory(merged.trajectory)
    first, second = server.records
    sampled = [t for t, m in zip(stored.tokens, stored.loss_mask, strict=True) if m]
    if policy == "mask":
        assert sampled == second.output_ids and report.masked_tokens == len(first.output_ids)
        assert {v for v, m in zip(stored.token_weight_versions(), stored.loss_mask, strict=True) if m} == {"4"}
    else:
        assert sampled == first.output_ids + second.output_ids and report.masked_tokens == 0


async def test_a_policy_server_that_cannot_tell_its_version_leaves_the_sample_as_sampled(renderer):
    """The staleness bound is set but /get_model_info cannot be read at merge time (the server is gone): the
    rollout keeps its segments as sampled and the report says nothing was judged, and why."""
    server = ScriptedPolicyServer(renderer, default_policy="noop", weight_version="1")
    server_url = await server.start()
    adapter = AdapterServer(renderer)
    await adapter.start()
    try:
        config = SessionConfig(policy_url=server_url, staleness=StalenessBound(max_staleness=0, policy="drop"))
        ticket = adapter.registry.open_session(config, durable=False)
        session = adapter.registry.get(ticket.session_id)
        await session.run_turn(
            "main",
            "main",
            [{"role": "user", "content": "hi"}],
            [],
            None,
            lambda parsed, reason: (None, {"role": "assistant", "content": parsed.text}),
        )
        await server.stop()
        sessions = AdapterActivities(adapter)
        merged = await as_workflow("wf-unknown").run(
            sessions.merge_segments, MergeRequest(session_id=ticket.session_id, workflow_id="wf-unknown")
        )
    finally:
        await adapter.stop()
    report = merged.staleness
    assert (
        report is not None and report.current_version is None and not report.dropped and "get_model_info" in report.note
    )
    [stored] = unpack_trajectory(merged.trajectory)
    assert report.unjudged_tokens == sum(stored.loss_mask) == len(server.records[0].output_ids)
