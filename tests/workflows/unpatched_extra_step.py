"""Each workflow with one extra activity scheduled first and no ``workflow.patched`` guard: a change that must fail
to replay every history its real twin recorded (``test_replay``).

A module of its own, importing only the workflows and (passed through) their contracts: the replayer's sandbox
imports a workflow's module afresh for every run it replays.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.drift_repair_episode import DriftRepairEpisode
from workflows.regrade_rollout import RegradeRollout
from workflows.rollout_group import RolloutGroup

with workflow.unsafe.imports_passed_through():
    from durable_rollouts.contracts.drift_repair import EpisodeInput, EpisodeResult
    from durable_rollouts.contracts.regrade import RegradeInput, RegradeResult
    from durable_rollouts.contracts.rollout_group import GroupInput, GroupResult
    from durable_rollouts.contracts.rollouts import RolloutInput, RolloutResult

EXTRA_STEP_TIMEOUT = timedelta(seconds=10)


@workflow.defn(name="CodingAgentRollout")
class RolloutWithAnUnpatchedExtraStep(CodingAgentRollout):
    @workflow.run
    async def run(self, rollout: RolloutInput) -> RolloutResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=EXTRA_STEP_TIMEOUT)
        return await super().run(rollout)


@workflow.defn(name="DriftRepairEpisode")
class EpisodeWithAnUnpatchedExtraStep(DriftRepairEpisode):
    @workflow.run
    async def run(self, episode: EpisodeInput) -> EpisodeResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=EXTRA_STEP_TIMEOUT)
        return await super().run(episode)


@workflow.defn(name="RolloutGroup")
class GroupWithAnUnpatchedExtraStep(RolloutGroup):
    @workflow.run
    async def run(self, group: GroupInput) -> GroupResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=EXTRA_STEP_TIMEOUT)
        return await super().run(group)


@workflow.defn(name="RegradeRollout")
class RegradeWithAnUnpatchedExtraStep(RegradeRollout):
    @workflow.run
    async def run(self, regrade: RegradeInput) -> RegradeResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=EXTRA_STEP_TIMEOUT)
        return await super().run(regrade)


UNPATCHED = [
    RolloutWithAnUnpatchedExtraStep,
    EpisodeWithAnUnpatchedExtraStep,
    GroupWithAnUnpatchedExtraStep,
    RegradeWithAnUnpatchedExtraStep,
]
