"""A group's samples with what their group's result leaves to the children: a ``GroupResult`` holds each sample's
result without its agent and grading logs (``RolloutResult.without_logs``) and, when the group would be over its
payload budget, without its packed trajectory (``GroupResult.trajectories_in_children``); each child's own
result keeps both. ``with_child_payloads`` reads them back from the children.

A child whose result cannot be read (its payload gone from the store, the server away) leaves that sample as
the group returned it and logs a warning: a sample missing its trajectory then fails its results line as
``trajectory_unreadable``, which a re-run retries."""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client

from durable_rollouts.contracts.rollout_group import GroupResult, GroupSample
from durable_rollouts.contracts.rollouts import RolloutResult

log = logging.getLogger(__name__)


async def with_child_payloads(client: Client, group: GroupResult, logs: bool) -> GroupResult:
    """``group`` with every sample's rollout holding its child's trajectory, and its logs too when ``logs``."""
    if not logs and not group.trajectories_in_children:
        return group
    samples = await asyncio.gather(*(_from_child(client, sample, logs) for sample in group.samples))
    missing = any(s.rollout is not None and s.rollout.trajectory is None and s.rollout.segments for s in samples)
    return group.model_copy(
        update={"samples": list(samples), "trajectories_in_children": group.trajectories_in_children and missing}
    )


async def _from_child(client: Client, sample: GroupSample, logs: bool) -> GroupSample:
    rollout = sample.rollout
    if rollout is None or not rollout.workflow_id:
        return sample
    try:
        child = await client.get_workflow_handle(rollout.workflow_id, result_type=RolloutResult).result()
    except Exception as error:
        log.warning("the result of %s was not read: %s: %s", rollout.workflow_id, type(error).__name__, error)
        return sample
    update: dict = {"trajectory": rollout.trajectory or child.trajectory}
    if logs:
        if rollout.agent and child.agent:
            update["agent"] = rollout.agent.model_copy(update={"log": child.agent.log})
        if rollout.evaluation and child.evaluation:
            update["evaluation"] = rollout.evaluation.model_copy(update={"log": child.evaluation.log})
    return sample.model_copy(update={"rollout": rollout.model_copy(update=update)})
