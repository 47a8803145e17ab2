"""The trainer's side of single rollouts: build a rollout, start or attach to its workflow, wait for its result.

Invariants: a rollout's workflow id is fixed by the run, its instance id, sample index and group index
(``durable_rollouts.contracts.workflow_ids``), so starting it again attaches to it and it runs once; a rollout that
cannot be started or collected comes back as a ``failed`` result naming why, never as an exception; a Temporal outage is
waited out for up to ``server_wait_s`` (``workflow_runs``). Nothing here needs a worker's packages: slime's trainer
process imports it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable

from temporalio.client import Client, WorkflowHandle

from durable_rollouts.config.payload_store import payload_store_from_env
from durable_rollouts.config.settings import SHARED_TASK_QUEUE, RolloutBudgets
from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.workflow_ids import rollout_workflow_id
from durable_rollouts.trainer_client import temporal_connection
from durable_rollouts.trainer_client.payload_storage import check_payload_store, data_converter
from durable_rollouts.trainer_client.temporal_connection import target_from_env
from durable_rollouts.trainer_client.workflow_runs import (
    DEFAULT_SERVER_WAIT_S,
    RunFailure,
    collect,
    run_limited,
    start_or_attach,
)
from workflows.coding_agent_rollout import CodingAgentRollout

RolloutCallback = Callable[[RolloutResult], Awaitable[None] | None]


def workflow_id_for(run_id: str, task: TaskSpec, sample_index: int, group_index: int) -> str:
    """The rollout's id (``durable_rollouts.contracts.workflow_ids``): the same whether it runs flat or as a group's
    child."""
    return rollout_workflow_id(run_id, task.instance_id, sample_index, group_index)


def rollout_input(
    task: TaskSpec, sample_index: int, group_index: int, policy: PolicySpec, budgets: RolloutBudgets
) -> RolloutInput:
    """The rollout of ``task`` under the run's ``budgets`` as the task narrows them (``RolloutBudgets.for_task``)."""
    budgets = budgets.for_task(task)
    return RolloutInput(
        task=task,
        sample_index=sample_index,
        group_index=group_index,
        policy=policy,
        agent_budget_s=budgets.agent_budget_s,
        eval_timeout_s=budgets.eval_timeout_s,
        pull_timeout_s=budgets.pull_timeout_s,
        guard_s=budgets.guard_s,
        resume_window_s=budgets.resume_window_s,
    )


async def connect(address: str | None = None, server_wait_s: float = 0.0) -> Client:
    """A client with the project's data converter, connected as the environment's Temporal settings say
    (``temporal_connection``: a ``temporal.toml`` profile, the ``TEMPORAL_*`` variables), at ``address`` when
    one is given; a server that cannot be reached is retried for ``server_wait_s``. The payload store the
    environment names is checked first. ``SettingsError``, ``PayloadStoreUnusable``, ``ConnectionSettingsError``
    or ``TemporalUnreachable`` names what is wrong."""
    store = payload_store_from_env()
    await check_payload_store(store)
    return await temporal_connection.connect(
        target_from_env(address=address), server_wait_s, data_converter=data_converter(store)
    )


async def start_rollout(
    client: Client, rollout: RolloutInput, run_id: str, task_queue: str = SHARED_TASK_QUEUE
) -> WorkflowHandle:
    """Start the rollout's workflow, or attach to it if that id already ran or is running."""
    workflow_id = workflow_id_for(run_id, rollout.task, rollout.sample_index, rollout.group_index)
    summary = f"{rollout.task.instance_id} sample {rollout.sample_index} group {rollout.group_index}"
    return await start_or_attach(
        client, CodingAgentRollout.run, rollout, workflow_id, task_queue, RolloutResult, summary
    )


async def run_rollouts(
    client: Client,
    rollouts: Iterable[RolloutInput],
    run_id: str,
    concurrency: int = 8,
    task_queue: str = SHARED_TASK_QUEUE,
    on_result: RolloutCallback | None = None,
    *,
    server_wait_s: float = DEFAULT_SERVER_WAIT_S,
) -> list[RolloutResult]:
    """Run every rollout (at most ``concurrency`` in flight); one result per rollout, in input order.

    A rollout that cannot be started or collected comes back ``failed`` with
    the reason in ``abort_reason`` and the message in ``error``; each Temporal
    outage is waited out for up to ``server_wait_s``.
    """

    async def one(rollout: RolloutInput) -> RolloutResult:
        return await collect_rollout(client, rollout, run_id, task_queue, server_wait_s)

    return await run_limited(rollouts, one, concurrency, on_result)


async def collect_rollout(
    client: Client,
    rollout: RolloutInput,
    run_id: str,
    task_queue: str = SHARED_TASK_QUEUE,
    server_wait_s: float = DEFAULT_SERVER_WAIT_S,
) -> RolloutResult:
    """Start (or attach to) one rollout and wait for its result; a start or collection failure is its ``failed``
    result."""
    workflow_id = workflow_id_for(run_id, rollout.task, rollout.sample_index, rollout.group_index)
    outcome = await collect(
        client, workflow_id, lambda: start_rollout(client, rollout, run_id, task_queue), RolloutResult, server_wait_s
    )
    return failed_result(rollout, workflow_id, outcome) if isinstance(outcome, RunFailure) else outcome


def failed_result(rollout: RolloutInput, workflow_id: str, failure: RunFailure) -> RolloutResult:
    return RolloutResult(
        workflow_id=workflow_id,
        instance_id=rollout.task.instance_id,
        sample_index=rollout.sample_index,
        group_index=rollout.group_index,
        status="failed",
        abort_reason=failure.reason,
        error=failure.message,
    )


def task_queue_from_env() -> str:
    return os.environ.get("ROLLOUT_TASK_QUEUE") or SHARED_TASK_QUEUE
