"""Drift -> repair role calls go through the adapter's policy session, so they live through weight updates too."""

from __future__ import annotations

import asyncio

import pytest

from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.drift_repair.roles import AdapterRolePlayer
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.trajectory_packing import unpack_trajectory
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from tests.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_role_call_aborted_by_a_weight_update_is_continued_with_each_tokens_version(renderer):
    server = ScriptedPolicyServer(renderer, default_policy="slow", delay_s=3600.0, weight_version="7")
    url = await server.start()
    adapter = AdapterServer(renderer)
    await adapter.start()
    try:
        player = AdapterRolePlayer(adapter.registry, url, pin_policy_url=True)
        call = asyncio.create_task(player.play("repair", "Fix the script.", PolicySpec(), "episode-1"))
        await until(lambda: any(g.output_ids for g in server.control.live))
        await server.control.pause("abort")
        server.control.set_version("8")
        server.delay_s = 0.0
        server.control.resume()
        turn = await call
    finally:
        await adapter.stop()
        await server.stop()
    first, second = server.records
    assert first.finish_reason["type"] == "abort" and second.input_ids == first.input_ids + first.output_ids
    [segment] = unpack_trajectory(turn.trajectory)
    sampled = [i for i, mask in enumerate(segment.loss_mask) if mask]
    assert [segment.tokens[i] for i in sampled] == first.output_ids + second.output_ids
    assert [segment.token_weight_versions()[i] for i in sampled] == first.output_versions + second.output_versions
    assert turn.segment is not None and turn.segment.weight_version_runs == ["7", "8"]
    assert turn.completion_tokens == len(first.output_ids) + len(second.output_ids) and turn.finish_reason == "stop"
