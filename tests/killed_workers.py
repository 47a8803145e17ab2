"""What the tests that kill workers and servers share: the budgets, a worker's environment, waiting for turns, and the
sampled runs of a trajectory (to check every trained turn against the policy server's records)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from workflows.coding_agent_rollout import CodingAgentRollout

BUDGETS = RolloutBudgets(agent_budget_s=240, eval_timeout_s=120, guard_s=600)


def worker_env(policy: ScriptedPolicyServer, queue: str, results: Path) -> dict[str, str]:
    return {
        "ROLLOUT_POLICY_URL": policy.url,
        "ROLLOUT_TASK_QUEUE": queue,
        "ROLLOUT_RESULTS_DIR": str(results),
        "ROLLOUT_REAP_INTERVAL_S": "2",
    }


async def wait_for_turns(handle, turns: int) -> None:
    while (await handle.query(CodingAgentRollout.progress)).turns < turns:
        await asyncio.sleep(0.2)


def sampled_runs(segments) -> list[tuple[tuple[int, ...], tuple[float, ...]]]:
    runs = []
    for segment in segments:
        start = None
        for i, m in enumerate(segment.loss_mask + [0]):
            if m and start is None:
                start = i
            elif not m and start is not None:
                runs.append((tuple(segment.tokens[start:i]), tuple(segment.rollout_log_probs[start:i])))
                start = None
    return runs
