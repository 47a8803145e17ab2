"""Record real CodingAgentRollout, DriftRepairEpisode, RolloutGroup and RegradeRollout histories into tests/histories/
for the replay test (``tests/workflows/test_replay.py``).

Runs the real pipeline (an ephemeral Temporal dev server, worker processes, Docker sandboxes, Claude Code, the
scripted policy) through one scenario per history: the rollouts ``solved``, ``unsolved``, ``guard``, ``lost_host``
and ``restarts``, the drift episodes ``drift_solved``, ``drift_unsolved``, ``drift_aborted`` and
``drift_self_play``, the groups ``group_completed``, ``group_refilled`` and ``group_cut``, and ``regrade``. What each
scenario runs and must return: docs/operations.md, "Replay safety".

Each history is saved as ``tests/histories/<scenario>.json``; a drift episode, group or re-grade whose result is not
its scenario's expected outcome is not saved (the run fails). Re-record after an intentional, patched change to a
workflow (all scenarios, the ones named, or ``drift`` for every drift scenario):

    .venv/bin/python -m scripts.record_histories [scenario ... | drift | rollout | group | regrade]
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import uuid
from pathlib import Path

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.drift_repair import EpisodeInput, EpisodeResult
from durable_rollouts.contracts.regrade import RegradeInput, RegradeResult
from durable_rollouts.contracts.rollout_group import GroupInput, GroupResult
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.contracts.workflow_ids import regrade_workflow_id, rollout_workflow_id
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.paths import (
    EXAMPLE_DATASET,
    PROJECT_ROOT,
)
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.drift_episodes import start_episode
from durable_rollouts.trainer_client.local_services import free_port, worker_process
from durable_rollouts.trainer_client.rollout_groups import start_group
from durable_rollouts.trainer_client.rollout_queries import running_agent_attempt
from durable_rollouts.trainer_client.rollout_runs import rollout_input, start_rollout
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.regrade_rollout import RegradeRollout
from workflows.rollout_group import RolloutGroup

HISTORIES = PROJECT_ROOT / "tests" / "histories"
TEMPORAL_CLI = Path(sys.prefix) / "bin" / "temporal"
BUDGETS = RolloutBudgets(agent_budget_s=120, eval_timeout_s=120, guard_s=600)


class Recorder:
    def __init__(self, env: WorkflowEnvironment, policy: ScriptedPolicyServer, results: Path):
        self.env, self.policy, self.results = env, policy, results
        self.queue = f"record-{uuid.uuid4().hex[:6]}"
        self.task = next(r for r in read_dataset(EXAMPLE_DATASET) if isinstance(r, DatasetRow)).task

    def worker_env(self) -> dict[str, str]:
        return {
            "ROLLOUT_POLICY_URL": self.policy.url,
            "ROLLOUT_TASK_QUEUE": self.queue,
            "ROLLOUT_RESULTS_DIR": str(self.results),
            # Every payload stays in history, so a recorded history replays on its own.
            "ROLLOUT_PAYLOAD_DIR": str(self.results / "payloads"),
            "ROLLOUT_PAYLOAD_THRESHOLD_BYTES": "50M",
        }

    def worker(self, host_id: str, adapter_port: int = 0):
        address = self.env.client.service_client.config.target_host
        return worker_process(
            address, ["--host-id", host_id, "--adapter-port", str(adapter_port)], env=self.worker_env()
        )

    async def start(self, scenario: str, budgets: RolloutBudgets = BUDGETS):
        rollout = rollout_input(self.task, 0, 0, PolicySpec(policy_tag=f"scripted-{scenario}"), budgets)
        return await start_rollout(self.env.client, rollout, f"rec-{scenario}", self.queue)

    async def save(self, scenario: str, handle) -> RolloutResult:
        result = await handle.result()
        history = await handle.fetch_history()
        HISTORIES.mkdir(parents=True, exist_ok=True)
        (HISTORIES / f"{scenario}.json").write_text(history.to_json())
        print(
            f"{scenario:10} {result.status:9} reward {result.reward} attempts {result.attempts} reason "
            f"{result.abort_reason}",
            flush=True,
        )
        return result

    async def save_episode(self, scenario: str, episode: EpisodeInput, expected: dict[str, object]) -> EpisodeResult:
        """Run one drift episode and save its history, only if the result has the ``expected`` field values."""
        handle = await start_episode(self.env.client, episode, f"rec-{scenario}", self.queue)
        result = await handle.result()
        got = {field: getattr(result, field) for field in expected}
        print(
            f"{scenario:16} {result.status:9} reward {result.reward} success {result.success} "
            f"valid {result.breakage_valid} segments {len(result.segments)} reason {result.abort_reason}",
            flush=True,
        )
        if got != expected:
            raise SystemExit(f"{scenario}: expected {expected}, got {got} ({handle.id}); history not saved")
        history = await handle.fetch_history()
        HISTORIES.mkdir(parents=True, exist_ok=True)
        (HISTORIES / f"{scenario}.json").write_text(history.to_json())
        return result


ONE_WORKER_SCENARIOS = (
    ("solved", "oracle", BUDGETS),
    ("unsolved", "noop", BUDGETS),
    ("guard", "slow", RolloutBudgets(agent_budget_s=120, eval_timeout_s=120, guard_s=15)),
)
DRIFT_TASK = "gcd_lcm"
DRIFT_SCENARIOS = (
    # (scenario, scripted policy, episode, the result's expected fields)
    (
        "drift_solved",
        "oracle",
        EpisodeInput(task_id=DRIFT_TASK, seed=5, drift_policy="baseline", repair_policy="oracle"),
        {"status": "completed", "success": True, "reward": 1.0, "breakage_valid": True},
    ),
    (
        "drift_unsolved",
        "oracle",
        EpisodeInput(task_id=DRIFT_TASK, seed=5, drift_policy="baseline", repair_policy="noop"),
        {"status": "completed", "success": False, "reward": 0.0, "breakage_valid": True},
    ),
    (
        "drift_aborted",
        "oracle",
        EpisodeInput(task_id="no_such_task", seed=5, drift_policy="baseline", repair_policy="oracle"),
        {"status": "aborted", "abort_reason": "unknown_task", "reward": 0.0},
    ),
    (
        "drift_self_play",
        "self_play",
        EpisodeInput(task_id=DRIFT_TASK, seed=5, drift_policy="model", repair_policy="model"),
        {"status": "completed", "success": True, "reward": 1.0, "breakage_valid": True},
    ),
)
ROLLOUT_SCENARIOS = [name for name, _, _ in ONE_WORKER_SCENARIOS] + ["lost_host", "restarts"]
GROUP_SCENARIOS = ["group_completed", "group_refilled", "group_cut"]
REGRADE_SCENARIOS = ["regrade"]
SCENARIOS = ROLLOUT_SCENARIOS + [name for name, _, _, _ in DRIFT_SCENARIOS] + GROUP_SCENARIOS + REGRADE_SCENARIOS
GROUPS = {
    "rollout": ROLLOUT_SCENARIOS,
    "drift": [name for name, _, _, _ in DRIFT_SCENARIOS],
    "group": GROUP_SCENARIOS,
    "regrade": REGRADE_SCENARIOS,
}


async def record_on_one_worker(recorder: Recorder, wanted: list[str]) -> None:
    async with recorder.worker("rec-a"):
        for scenario, policy, budgets in ONE_WORKER_SCENARIOS:
            if scenario not in wanted:
                continue
            recorder.policy.set_policy(None, policy)
            await recorder.save(scenario, await recorder.start(scenario, budgets))
        for scenario, policy, episode, expected in DRIFT_SCENARIOS:
            if scenario not in wanted:
                continue
            recorder.policy.set_policy(None, policy)
            await recorder.save_episode(scenario, episode, expected)


async def record_groups(recorder: Recorder, wanted: list[str]) -> None:
    """The group scenarios on one worker; a run whose result is not the scenario's is not saved."""
    async with recorder.worker("rec-group"):
        for scenario in GROUP_SCENARIOS:
            if scenario not in wanted:
                continue
            recorder.policy.set_policy(None, "oracle" if scenario == "group_completed" else "slow")
            recorder.policy.delay_s = 3.0
            run_id = f"rec-{scenario}"
            rollouts = [
                rollout_input(recorder.task, i, 0, PolicySpec(policy_tag=f"scripted-{scenario}"), BUDGETS)
                for i in range(2)
            ]
            handle = await start_group(
                recorder.env.client, GroupInput(run_id=run_id, group_index=0, rollouts=rollouts), recorder.queue
            )
            first_child = recorder.env.client.get_workflow_handle(
                rollout_workflow_id(run_id, recorder.task.instance_id, 0, 0)
            )
            if scenario != "group_completed":
                await _until_agent_runs(first_child)
            if scenario == "group_refilled":
                await first_child.terminate("recording: an infrastructure failure")
            elif scenario == "group_cut":
                await handle.signal(RolloutGroup.cut, "straggler_cut")
            result: GroupResult = await handle.result()
            print(
                f"{scenario:16} {result.status:12} valid {result.valid_mask} rewards {result.rewards} refilled "
                f"{result.refilled}",
                flush=True,
            )
            expected = {
                "group_completed": ("completed", 0),
                "group_refilled": ("completed", 1),
                "group_cut": ("cut", 0),
            }[scenario]
            if (result.status, result.refilled) != expected:
                raise SystemExit(
                    f"{scenario}: expected status and refills {expected}, got {(result.status, result.refilled)}; "
                    f"history not saved"
                )
            (HISTORIES / f"{scenario}.json").write_text((await handle.fetch_history()).to_json())
    await DockerSandboxes().reap(lambda c: c.labels.get("io.rollouts.workflow_id", "").startswith("rollout-rec-group_"))


async def record_regrade(recorder: Recorder) -> None:
    """An oracle rollout (not saved), then its kept patch re-graded; saved only if the re-grade scored 1.0."""
    recorder.policy.set_policy(None, "oracle")
    async with recorder.worker("rec-regrade"):
        rollout: RolloutResult = await (await recorder.start("regrade_source")).result()
        if rollout.reward != 1.0 or rollout.diff is None or rollout.diff.kept_patch is None:
            raise SystemExit(
                f"regrade: the source rollout scored {rollout.reward} with diff {rollout.diff}; history not saved"
            )
        regrade = RegradeInput(
            original_workflow_id=rollout.workflow_id,
            task=recorder.task,
            patch=rollout.diff.kept_patch,
            eval_timeout_s=BUDGETS.eval_timeout_s,
        )
        handle = await recorder.env.client.start_workflow(
            RegradeRollout.run, regrade, id=regrade_workflow_id("rec", rollout.workflow_id), task_queue=recorder.queue
        )
        result: RegradeResult = await handle.result()
    print(
        f"regrade          {result.status:9} reward {result.evaluation and result.evaluation.reward} reason "
        f"{result.abort_reason}",
        flush=True,
    )
    if result.status != "completed" or result.evaluation is None or result.evaluation.reward != 1.0:
        raise SystemExit(f"regrade: expected a completed re-grade with reward 1.0, got {result}; history not saved")
    (HISTORIES / "regrade.json").write_text((await handle.fetch_history()).to_json())


async def _until_agent_runs(child) -> None:
    while True:
        try:
            if (await child.query(CodingAgentRollout.progress)).turns >= 1:
                return
        except Exception:  # not started yet, or no worker has taken the query yet
            pass
        await asyncio.sleep(0.2)


async def record_lost_host(recorder: Recorder) -> None:
    recorder.policy.set_policy(None, "slow")
    recorder.policy.delay_s = 3.0
    async with recorder.worker("rec-doomed") as doomed:
        handle = await recorder.start("lost_host")
        while (await handle.query(CodingAgentRollout.progress)).stage != "agent":
            await asyncio.sleep(0.2)
        os.killpg(doomed.pid, signal.SIGKILL)
    async with recorder.worker("rec-survivor"):
        result = await recorder.save("lost_host", handle)
    orphans = await DockerSandboxes().reap(lambda c: c.labels.get("io.rollouts.workflow_id") == handle.id)
    print(f"lost_host: reaped {len(orphans)} orphan container(s) of the killed worker; attempts {result.attempts}")


async def _until_agent_attempt(recorder: Recorder, workflow_id: str, attempt: int) -> None:
    while (running := await running_agent_attempt(recorder.env.client, workflow_id)) is None or running < attempt:
        await asyncio.sleep(0.3)


async def record_restarts(recorder: Recorder) -> None:
    """A long oracle session (read-only turns first) whose turns outlast a kill and a resume: the agent is mid-run
    at each of the three kills."""
    renderer = recorder.policy.renderer
    policy = ScriptedPolicyServer(
        renderer,
        default_policy="slow",
        oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)),
        delay_s=6,
        oracle_explore_turns=10,
    )
    policy.url = await policy.start()
    restarting, port = Recorder(recorder.env, policy, recorder.results), free_port()
    try:
        handle = None
        for kill in range(3):
            async with restarting.worker("rec-restarts", port) as doomed:
                if handle is None:
                    handle = await restarting.start("restarts")
                    await _until_agent_runs(handle)
                else:
                    await _until_agent_attempt(restarting, handle.id, kill + 1)
                os.killpg(doomed.pid, signal.SIGKILL)
        async with restarting.worker("rec-restarts", port):
            await _until_agent_attempt(restarting, handle.id, 4)
            policy.delay_s = 0.3
            result = await restarting.save("restarts", handle)
    finally:
        await policy.stop()
    if result.attempts != 1 or result.agent is None or result.agent.interruptions != 3:
        raise SystemExit(
            f"restarts: expected the first run resumed after 3 interruptions, got {result.attempts} / {result.agent}"
        )


async def main(named: list[str]) -> None:
    wanted = [scenario for name in named for scenario in GROUPS.get(name, [name])]
    unknown = sorted(set(wanted) - set(SCENARIOS))
    if unknown:
        raise SystemExit(
            f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)} (or {', '.join(GROUPS)})"
        )
    renderer = PromptRenderer.from_folder(ensure_qwen_tokenizer())
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(TEMPORAL_CLI), data_converter=pydantic_data_converter, ui=False
    )
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET)), delay_s=60
    )
    policy.url = await policy.start()
    try:
        with tempfile.TemporaryDirectory(prefix="record-histories-") as results:
            recorder = Recorder(env, policy, Path(results))
            await record_on_one_worker(recorder, wanted)
            if "lost_host" in wanted:
                await record_lost_host(recorder)
            if "restarts" in wanted:
                await record_restarts(recorder)
            await record_groups(recorder, wanted)
            if "regrade" in wanted:
                await record_regrade(recorder)
    finally:
        await policy.stop()
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:] or SCENARIOS))
