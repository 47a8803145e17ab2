"""The adapter's metrics on a real SDK runtime whose metric buffer the test reads (no endpoint needed)."""

from __future__ import annotations

import anthropic
import pytest
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig

from durable_rollouts.contracts.session import SamplingParams, SessionConfig
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.host_metrics import HostMetrics

pytestmark = pytest.mark.asyncio(loop_scope="session")


def updates_by_name(buffer: MetricBuffer) -> dict[str, list]:
    found: dict[str, list] = {}
    for update in buffer.retrieve_updates():
        found.setdefault(update.metric.name, []).append(update)
    return found


async def test_answered_turns_and_policy_errors_are_counted_with_bounded_labels(renderer, policy_server):
    buffer = MetricBuffer(1000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    adapter = AdapterServer(renderer, metrics=HostMetrics(runtime.metric_meter))
    await adapter.start()
    try:
        healthy = adapter.registry.open_session(
            SessionConfig(policy_url=policy_server.url, sampling=SamplingParams(max_new_tokens=64))
        )
        policy_server.set_policy(healthy.session_id, "noop")
        client = anthropic.AsyncAnthropic(base_url=adapter.url, auth_token=healthy.secret, api_key=None, max_retries=0)
        reply = await client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "x"}])
        dead = adapter.registry.open_session(SessionConfig(policy_url="http://127.0.0.1:9"))
        client = anthropic.AsyncAnthropic(base_url=adapter.url, auth_token=dead.secret, api_key=None, max_retries=0)
        with pytest.raises(anthropic.InternalServerError):
            await client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "x"}])
    finally:
        await adapter.stop()
    found = updates_by_name(buffer)
    assert [u.value for u in found["rollout_adapter_turns_total"]] == [1]
    assert [u.value for u in found["rollout_adapter_sampled_tokens_total"]] == [reply.usage.output_tokens]
    assert len(found["rollout_adapter_turn_seconds"]) == 1 and found["rollout_adapter_turn_seconds"][0].value >= 0
    [error] = found["rollout_policy_errors_total"]
    assert (error.value, error.attributes["error"], set(error.attributes) - {"service_name"}) == (
        1,
        "PolicyServerError",
        {"error"},
    )


async def test_occupancy_sets_the_three_gauges():
    buffer = MetricBuffer(100)
    HostMetrics(Runtime(telemetry=TelemetryConfig(metrics=buffer)).metric_meter).occupancy(
        sessions=2, slots=8, slots_in_use=3
    )
    assert {name: [u.value for u in updates] for name, updates in updates_by_name(buffer).items()} == {
        "rollout_sessions_in_flight": [2],
        "rollout_agent_slots": [8],
        "rollout_agent_slots_in_use": [3],
    }
