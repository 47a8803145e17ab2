"""DriftRepairEpisode on Temporal's time-skipping server: the real activities, scripts run by the local
runner (no Docker), and a fake role player standing in for the policy.

Each scoring rule the README documents is exercised end to end: malformed
drift JSON falls back to the baseline, a diff that does not apply scores 0,
a repair that hangs is killed and scores 0, a repair that prints to stderr but
exits 0 with the right output scores 0.8 and succeeds, and the guard aborts.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from temporalio.worker import Worker

from activities.drift_repair import DriftEpisodeActivities
from durable_rollouts.contracts.drift_repair import EpisodeInput, Role, RoleTurn
from durable_rollouts.contracts.session import PolicySpec
from durable_rollouts.contracts.tokens import SegmentSummary, TokenSegment
from durable_rollouts.drift_repair.baselines import baseline_drift
from durable_rollouts.drift_repair.corpus import load_corpus
from durable_rollouts.drift_repair.prompts import prompt_script
from durable_rollouts.drift_repair.script_runner import LocalScriptRunner
from durable_rollouts.drift_repair.unified_diff import make_diff
from durable_rollouts.policy.trajectory_packing import pack_trajectory, unpack_trajectory
from tests.workflows.fake_rollout_activities import QUICK_HEARTBEATS
from workflows.drift_repair_episode import DriftRepairEpisode

pytestmark = pytest.mark.asyncio(loop_scope="session")
QUEUE = "drift-test"
TASK = load_corpus()["gcd_lcm"]
Answer = Callable[[Role, str], str]


class FakeRoles:
    """Answers each role with ``answer(role, user_prompt)``; packs a small real segment per call."""

    def __init__(self, answer: Answer, hang: bool = False):
        self.answer, self.hang = answer, hang
        self.calls: list[str] = []

    async def play(self, role: Role, user_prompt: str, policy: PolicySpec, workflow_id: str) -> RoleTurn:
        self.calls.append(role)
        if self.hang:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.calls.append(f"{role} cancelled")
                raise
        segment = TokenSegment(
            kind="role",
            lane=role,
            tokens=[1, 2, 3, 4],
            loss_mask=[0, 0, 1, 1],
            rollout_log_probs=[0.0, 0.0, -0.5, -0.25],
            prompt_length=2,
            turns=1,
            finish_reason="stop",
        )
        return RoleTurn(
            role=role,
            session_id=f"fake-{role}",
            system_prompt="",
            user_prompt=user_prompt,
            completion=self.answer(role, user_prompt),
            trajectory=pack_trajectory([segment]),
            segment=SegmentSummary.of(segment),
        )


def repair_to(edit: Callable[[str], str]) -> Answer:
    """A repair answer: the diff from the broken script in the prompt to ``edit(original)``."""

    def answer(role: Role, prompt: str) -> str:
        return f"Fixed:\n```diff\n{make_diff(prompt_script(prompt), edit(TASK.script))}```"

    return answer


async def run_episode(env, answer: Answer | None = None, hang: bool = False, **overrides):
    roles = FakeRoles(answer or (lambda role, prompt: ""), hang)
    activities = DriftEpisodeActivities(roles, LocalScriptRunner())
    worker = Worker(
        env.client,
        task_queue=QUEUE,
        **QUICK_HEARTBEATS,
        workflows=[DriftRepairEpisode],
        activities=[
            activities.sample_drift_task,
            activities.propose_drift,
            activities.run_breakage,
            activities.propose_repair,
            activities.grade_repair,
            activities.collect_role_segments,
        ],
    )
    episode = EpisodeInput(**{"task_id": TASK.task_id, "seed": 5, "run_timeout_s": 2.0, **overrides})
    async with worker:
        result = await env.client.execute_workflow(
            DriftRepairEpisode.run, episode, id=f"episode-{uuid.uuid4().hex[:8]}", task_queue=QUEUE
        )
    return result, roles


async def test_baseline_drift_and_oracle_repair_succeed(env):
    result, roles = await run_episode(env)
    assert (result.status, result.success, result.reward, result.applied_cleanly) == ("completed", True, 1.0, True)
    assert result.spec == baseline_drift(TASK.script, 5, TASK.category) and result.spec_source == "baseline"
    assert result.breakage_valid and "Traceback" in result.error_trace
    assert result.held_out.executed_cleanly and result.held_out.correct == len(TASK.held_out)
    assert (result.role_rewards.drift, result.role_rewards.repair) == (0.0, 1.0)
    assert result.segments == [] and result.trajectory is None and roles.calls == []


async def test_noop_repair_fails_and_the_drift_role_earns_its_reward(env):
    result, _ = await run_episode(env, repair_policy="noop")
    assert result.status == "completed" and not result.success and result.reward == 0.0
    assert result.diff == "" and result.applied_cleanly and not result.breakdown.ran
    assert result.role_rewards.drift == 1.0


async def test_noop_drift_is_an_invalid_breakage_worth_nothing(env):
    result, _ = await run_episode(env, drift_policy="noop", repair_policy="noop")
    assert result.spec is None and not result.breakage_valid and result.error_trace == ""
    assert result.success and result.role_rewards.drift == 0.0


async def test_malformed_drift_json_falls_back_to_the_baseline_and_both_segments_are_kept(env):
    def answer(role: Role, prompt: str) -> str:
        return (
            '```json\n{"primitive_type": "RenameApiCall", "params": {"old": \n```'
            if role == "drift"
            else repair_to(lambda s: s)(role, prompt)
        )

    result, roles = await run_episode(env, answer, drift_policy="model", repair_policy="model")
    assert result.status == "completed" and result.spec_source == "fallback" and "no JSON object" in result.spec_error
    assert result.spec == baseline_drift(TASK.script, 5, TASK.category)
    assert result.breakage_valid and result.success and result.role_rewards.drift == 0.0
    assert roles.calls == ["drift", "repair"]
    assert [s.lane for s in result.segments] == ["drift", "repair"]
    merged = unpack_trajectory(result.trajectory)
    assert [s.lane for s in merged] == ["drift", "repair"]
    assert merged == [
        *unpack_trajectory(result.drift_role.trajectory),
        *unpack_trajectory(result.repair_role.trajectory),
    ], "the roles' own segments"
    assert result.drift_role.completion.startswith("```json") and "Task: gcd_lcm" in result.drift_role.user_prompt


async def test_a_model_spec_that_matches_nothing_also_falls_back(env):
    def answer(role: Role, prompt: str) -> str:
        return '{"primitive_type": "RenameApiCall", "params": {"old": "not_called_here", "new": "x"}}'

    result, _ = await run_episode(env, answer, drift_policy="model")
    assert result.spec_source == "fallback" and "matches nothing" in result.spec_error


async def test_a_valid_model_spec_is_applied_as_given(env):
    def answer(role: Role, prompt: str) -> str:
        return (
            'Sure: {"primitive_type": "RenameApiCall", "params": {"old": "gcd", "new": "greatest_common_divisor", '
            '"owner": "math"}}'
        )

    result, _ = await run_episode(env, answer, drift_policy="model", repair_policy="noop")
    assert result.spec_source == "model" and result.spec.params["new"] == "greatest_common_divisor"
    assert result.info["changed_sites"] == 2 and "greatest_common_divisor" in result.error_trace
    assert result.role_rewards.drift == 1.0 and len(result.segments) == 1


async def test_a_diff_that_does_not_apply_scores_zero(env):
    def answer(role: Role, prompt: str) -> str:
        return "```diff\n--- a/script.py\n+++ b/script.py\n@@ -1,1 +1,1 @@\n-import numpy\n+import numpy as np\n```"

    result, _ = await run_episode(env, answer, repair_policy="model")
    assert (
        result.status == "completed" and not result.applied_cleanly and "does not match" in result.info["apply_error"]
    )
    assert (result.reward, result.success, result.breakdown.ran) == (0.0, False, False)
    assert result.held_out.cases == len(TASK.held_out) and not result.held_out.executed_cleanly
    assert result.role_rewards.drift == 1.0


async def test_a_repair_that_hangs_is_killed_and_scores_zero(env):
    answer = repair_to(lambda script: script + "while True:\n    pass\n")
    result, _ = await run_episode(env, answer, repair_policy="model", run_timeout_s=1.0)
    assert result.status == "completed" and result.applied_cleanly
    assert result.breakdown.timed_out and not result.breakdown.ran and result.reward == 0.0
    assert result.held_out.timed_out == len(TASK.held_out) and not result.success


async def test_stderr_with_exit_zero_and_the_right_output_succeeds_without_the_quiet_share(env):
    answer = repair_to(lambda script: script + 'print("warning: gcd_lcm is deprecated", file=sys.stderr)\n')
    result, _ = await run_episode(env, answer, repair_policy="model")
    assert result.breakdown.ran and result.breakdown.output_matches and not result.breakdown.quiet
    assert result.reward == 0.8 and result.success and result.held_out.noisy == len(TASK.held_out)


async def test_the_wall_clock_guard_stops_a_hanging_role_call(env):
    result, roles = await run_episode(env, hang=True, drift_policy="model", guard_s=3)
    assert (result.status, result.abort_reason, result.reward) == ("aborted", "wall_clock_timeout", 0.0)
    assert roles.calls == ["drift", "drift cancelled"] and result.role_rewards.drift == 0.0


async def test_an_unknown_task_or_drift_reward_aborts_with_a_reason(env):
    unknown, _ = await run_episode(env, task_id="no-such-task")
    assert (unknown.status, unknown.abort_reason) == ("aborted", "unknown_task")
    bad_reward, _ = await run_episode(env, drift_reward="most_chaotic")
    assert (bad_reward.status, bad_reward.abort_reason) == ("aborted", "unknown_drift_reward")


async def test_the_adversarial_drift_reward_is_pluggable(env):
    answer = repair_to(lambda script: script + 'print("note", file=sys.stderr)\n')
    result, _ = await run_episode(env, answer, repair_policy="model", drift_reward="adversarial")
    assert result.role_rewards.drift == pytest.approx(0.2) and result.role_rewards.repair == 0.8
