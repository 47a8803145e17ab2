"""Recorded histories of real rollouts and drift → repair episodes replay against the current workflow code.

A change to a workflow's command sequence that is not guarded by
``workflow.patched`` breaks in-flight runs on the next deploy; this test
catches it in CI. Each history is replayed against the workflow it records
(``CodingAgentRollout``, ``DriftRepairEpisode``, ``RolloutGroup`` or ``RegradeRollout``, from its started event).
The second test proves it would catch one: a workflow that schedules one extra
activity first (``unpatched_extra_step``) must fail to replay every recorded history. Each set of workflows
replays every history in one replayer pass per module (a pass validates its workflows in the sandbox once), and
each history's test reads its own outcome. The third checks
the recorded result itself, so a history recorded from a broken run (a
"solved" rollout that scored 0, an episode aborted for the wrong reason) is
caught too. Re-record with ``python -m scripts.record_histories`` (all but ``previous_release.json``, a run of the
release before the last deprecated patches, which stays until those patches are removed).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from durable_rollouts.contracts.drift_repair import EpisodeResult
from durable_rollouts.contracts.regrade import RegradeResult
from durable_rollouts.contracts.rollout_group import GroupResult
from durable_rollouts.contracts.rollouts import RolloutResult
from tests.workflows.unpatched_extra_step import UNPATCHED
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
    # three worker kills inside the agent run, each resumed: the first run completes, nothing discarded
    "restarts": {"status": "completed", "reward": 1.0, "attempts": 1, "discarded": []},
    "drift_solved": {
        "status": "completed",
        "success": True,
        "reward": 1.0,
        "breakage_valid": True,
        "repair_policy": "oracle",
    },
    "drift_unsolved": {
        "status": "completed",
        "success": False,
        "reward": 0.0,
        "breakage_valid": True,
        "repair_policy": "noop",
    },
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
    "regrade": {
        "status": "completed",
        "abort_reason": None,
        "original_workflow_id": "rollout-rec-regrade_source-calc-eval-cmd-0-0",
    },
}


def history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def workflow_type(recorded: WorkflowHistory) -> str:
    return recorded.events[0].workflow_execution_started_event_attributes.workflow_type.name


def recorded_result(recorded: WorkflowHistory) -> Any:
    last = recorded.events[-1]
    assert last.HasField("workflow_execution_completed_event_attributes"), (
        f"the run did not complete: {last.event_type}"
    )
    payloads = last.workflow_execution_completed_event_attributes.result.payloads
    return pydantic_data_converter.payload_converter.from_payloads(payloads, [RESULT_TYPES[workflow_type(recorded)]])[0]


async def test_the_recorded_scenarios_are_all_there():
    assert {p.stem for p in HISTORIES} >= set(EXPECTED)
    assert {p.stem: workflow_type(history(p)) for p in HISTORIES if p.stem.startswith("drift_")} == {
        name: "DriftRepairEpisode" for name in EXPECTED if name.startswith("drift_")
    }


async def replay_failures(workflows: list[type]) -> dict[str, Exception]:
    """Every recorded history replayed on ``workflows`` in one pass: the failures by history file name."""

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for path in HISTORIES:
            yield history(path)

    names = {history(path).run_id: path.stem for path in HISTORIES}
    results = await Replayer(workflows=workflows, data_converter=pydantic_data_converter).replay_workflows(
        histories(), raise_on_replay_failure=False
    )
    return {names[run_id]: failure for run_id, failure in results.replay_failures.items()}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def current_code_failures() -> dict[str, Exception]:
    return await replay_failures([CodingAgentRollout, DriftRepairEpisode, RolloutGroup, RegradeRollout])


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def unpatched_change_failures() -> dict[str, Exception]:
    return await replay_failures(UNPATCHED)


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_history_replays_on_current_code(path, current_code_failures):
    assert workflow_type(history(path)) in RESULT_TYPES
    if path.stem in current_code_failures:
        raise current_code_failures[path.stem]


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_an_unpatched_change_to_the_command_sequence_is_caught(path, unpatched_change_failures):
    assert isinstance(unpatched_change_failures.get(path.stem), workflow.NondeterminismError)


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_the_recorded_run_had_its_scenarios_outcome(path):
    assert path.stem in EXPECTED, f"{path.name}: say in EXPECTED what this recorded run must have returned"
    result = recorded_result(history(path))
    assert {field: observed(result, field) for field in EXPECTED[path.stem]} == EXPECTED[path.stem]


def observed(result: Any, field: str) -> Any:
    value = getattr(result, field)
    return [segment.lane for segment in value] if field == "segments" else value
