"""Recorded histories of real rollouts replay against the current workflow code.

A change to the workflow's command sequence that is not guarded by
``workflow.patched`` breaks in-flight rollouts on the next deploy; this test
catches it in CI. The second test proves it would: a workflow that schedules
one extra activity first must fail to replay every recorded history.
Re-record with ``scripts/record_histories.py``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from activities.contracts import RolloutInput, RolloutResult
from workflows.coding_agent_rollout import CodingAgentRollout

pytestmark = pytest.mark.asyncio(loop_scope="session")
HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


@workflow.defn(name="CodingAgentRollout")
class RolloutWithAnUnpatchedExtraStep(CodingAgentRollout):
    @workflow.run
    async def run(self, rollout: RolloutInput) -> RolloutResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=timedelta(seconds=10))
        return await super().run(rollout)


def history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


async def test_the_recorded_scenarios_are_all_there():
    assert {p.stem for p in HISTORIES} >= {"solved", "capture_diff", "unsolved", "guard", "lost_host"}


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays_on_current_code(path):
    replayer = Replayer(workflows=[CodingAgentRollout], data_converter=pydantic_data_converter)
    await replayer.replay_workflow(history(path))


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_an_unpatched_change_to_the_command_sequence_is_caught(path):
    replayer = Replayer(workflows=[RolloutWithAnUnpatchedExtraStep], data_converter=pydantic_data_converter)
    with pytest.raises(workflow.NondeterminismError):
        await replayer.replay_workflow(history(path))
