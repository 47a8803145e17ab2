"""Recorded histories of real rollouts and drift → repair episodes replay against the current workflow code.

A change to a workflow's command sequence that is not guarded by
``workflow.patched`` breaks in-flight runs on the next deploy; this test
catches it in CI. Each history is replayed against the workflow it records
(``CodingAgentRollout``, ``DriftRepairEpisode``, ``RolloutGroup`` or ``RegradeRollout``, from its started event).
The second test proves it would catch one: a workflow that schedules one extra
activity first must fail to replay every recorded history. The third checks
the recorded result itself, so a history recorded from a broken run (a
"solved" rollout that scored 0, an episode aborted for the wrong reason) is
caught too. Re-record with ``python -m scripts.record_histories`` (all but ``previous_release.json``, a run of the
release before the last deprecated patches, which stays until those patches are removed).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from durable_rollouts.contracts.drift_repair import EpisodeInput, EpisodeResult
from durable_rollouts.contracts.regrade import RegradeInput, RegradeResult
from durable_rollouts.contracts.rollout import RolloutInput, RolloutResult
from durable_rollouts.contracts.rollout_group import GroupInput, GroupResult
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.drift_repair_episode import DriftRepairEpisode
from workflows.regrade_rollout import RegradeRollout
from workflows.rollout_group import RolloutGroup

pytestmark = pytest.mark.asyncio(loop_scope="session")
HISTORIES = sorted((Path(__file__).parent.parent / "histories").glob("*.json"))
RESULT_TYPES: dict[str, type] = {
    "CodingAgentRollout": RolloutResult,
    "DriftRepairEpisode": EpisodeResult,
    "RolloutGroup": GroupResult,
    "RegradeRollout": RegradeResult,
}

# What each recorded run must have returned: field values of its result (``segments``: the segments' lanes).
EXPECTED: dict[str, dict[str, Any]] = {
    "solved": {"status": "completed", "reward": 1.0, "attempts": 1},
    # Recorded by the release before the deprecated patches (133f8ec), which scripts/record_histories.py cannot
    # make again: runs that release started must replay on this code.
    "previous_release": {"status": "completed", "reward": 1.0, "attempts": 1},
    "unsolved": {"status": "completed", "reward": 0.0, "attempts": 1},
    "guard": {"status": "aborted", "abort_reason": "wall_clock_timeout", "reward": 0.0},
    "lost_host": {"status": "completed", "reward": 1.0, "attempts": 2},
    "drift_solved": {"status": "completed", "success": True, "reward": 1.0, "breakage_valid": True, "repair_policy": "oracle"},
    "drift_unsolved": {"status": "completed", "success": False, "reward": 0.0, "breakage_valid": True, "repair_policy": "noop"},
    "drift_aborted": {"status": "aborted", "abort_reason": "unknown_task", "success": False, "reward": 0.0},
    "drift_self_play": {
        "status": "completed",
        "success": True,
        "reward": 1.0,
        "drift_policy": "model",
        "repair_policy": "model",
        "segments": ["drift", "repair"],
    },
    "group_completed": {"status": "completed", "valid_mask": [True, True], "rewards": [1.0, 1.0], "refilled": 0},
    "group_refilled": {"status": "completed", "valid_mask": [True, True], "rewards": [1.0, 1.0], "refilled": 1},
    "group_cut": {"status": "cut", "valid_mask": [False, False], "refilled": 0},
    "regrade": {"status": "completed", "abort_reason": None, "original_workflow_id": "rollout-rec-regrade_source-calc-eval-cmd-0-0"},
}


@workflow.defn(name="CodingAgentRollout")
class RolloutWithAnUnpatchedExtraStep(CodingAgentRollout):
    @workflow.run
    async def run(self, rollout: RolloutInput) -> RolloutResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=timedelta(seconds=10))
        return await super().run(rollout)


@workflow.defn(name="DriftRepairEpisode")
class EpisodeWithAnUnpatchedExtraStep(DriftRepairEpisode):
    @workflow.run
    async def run(self, episode: EpisodeInput) -> EpisodeResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=timedelta(seconds=10))
        return await super().run(episode)


@workflow.defn(name="RolloutGroup")
class GroupWithAnUnpatchedExtraStep(RolloutGroup):
    @workflow.run
    async def run(self, group: GroupInput) -> GroupResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=timedelta(seconds=10))
        return await super().run(group)


@workflow.defn(name="RegradeRollout")
class RegradeWithAnUnpatchedExtraStep(RegradeRollout):
    @workflow.run
    async def run(self, regrade: RegradeInput) -> RegradeResult:
        await workflow.execute_activity("pick_host", result_type=str, start_to_close_timeout=timedelta(seconds=10))
        return await super().run(regrade)


def history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def workflow_type(recorded: WorkflowHistory) -> str:
    return recorded.events[0].workflow_execution_started_event_attributes.workflow_type.name


def recorded_result(recorded: WorkflowHistory) -> Any:
    last = recorded.events[-1]
    assert last.HasField("workflow_execution_completed_event_attributes"), f"the run did not complete: {last.event_type}"
    payloads = last.workflow_execution_completed_event_attributes.result.payloads
    return pydantic_data_converter.payload_converter.from_payloads(payloads, [RESULT_TYPES[workflow_type(recorded)]])[0]


async def test_the_recorded_scenarios_are_all_there():
    assert {p.stem for p in HISTORIES} >= set(EXPECTED)
    assert {p.stem: workflow_type(history(p)) for p in HISTORIES if p.stem.startswith("drift_")} == {
        name: "DriftRepairEpisode" for name in EXPECTED if name.startswith("drift_")
    }


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays_on_current_code(path):
    replayer = Replayer(workflows=[CodingAgentRollout, DriftRepairEpisode, RolloutGroup, RegradeRollout], data_converter=pydantic_data_converter)
    recorded = history(path)
    assert workflow_type(recorded) in RESULT_TYPES
    await replayer.replay_workflow(recorded)


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_an_unpatched_change_to_the_command_sequence_is_caught(path):
    replayer = Replayer(
        workflows=[RolloutWithAnUnpatchedExtraStep, EpisodeWithAnUnpatchedExtraStep, GroupWithAnUnpatchedExtraStep, RegradeWithAnUnpatchedExtraStep],
        data_converter=pydantic_data_converter,
    )
    with pytest.raises(workflow.NondeterminismError):
        await replayer.replay_workflow(history(path))


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_the_recorded_run_had_its_scenarios_outcome(path):
    assert path.stem in EXPECTED, f"{path.name}: say in EXPECTED what this recorded run must have returned"
    result = recorded_result(history(path))
    assert {field: observed(result, field) for field in EXPECTED[path.stem]} == EXPECTED[path.stem]


def observed(result: Any, field: str) -> Any:
    value = getattr(result, field)
    return [segment.lane for segment in value] if field == "segments" else value
