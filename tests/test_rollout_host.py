"""Agent-slot admission: pick_host reserves a slot per workflow, so boots in flight count too."""

import dataclasses

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.adapter import AdapterServer
from activities.rollout_host import RolloutHost
from activities.trajectory_store import TrajectoryStore


def host(renderer, tmp_path, slots: int) -> RolloutHost:
    return RolloutHost(
        adapter=AdapterServer(renderer),
        host_queue="rl-rollouts-host-test",
        adapter_public_url="http://127.0.0.1:1",
        default_policy_url="http://127.0.0.1:2",
        store=TrajectoryStore(tmp_path),
        agent_slots=slots,
    )


def as_workflow(workflow_id: str) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(ActivityEnvironment.default_info(), workflow_id=workflow_id)
    return env


async def test_slots_are_reserved_at_pick_time(renderer, tmp_path):
    rollout_host = host(renderer, tmp_path, slots=2)
    assert await as_workflow("wf-a").run(rollout_host.pick_host) == "rl-rollouts-host-test"
    assert await as_workflow("wf-b").run(rollout_host.pick_host) == "rl-rollouts-host-test"
    assert await as_workflow("wf-a").run(rollout_host.pick_host) == "rl-rollouts-host-test", "a retry keeps its slot"
    with pytest.raises(ApplicationError) as refused:
        await as_workflow("wf-c").run(rollout_host.pick_host)
    assert refused.value.type == "HostFull"
