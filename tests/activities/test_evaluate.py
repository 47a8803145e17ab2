"""The ``evaluate`` activity keeps each grading's whole log in the trajectory store and names it in the result."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import ActivityEnvironment

from activities.evaluate import GradingActivities, grading_log_key
from contracts.rollout import EvalRequest
from docker_sandbox.limits import SandboxSettings
from docker_sandbox.sandboxes import DockerSandboxes
from policy.trajectory_store import TrajectoryStore

SANDBOXES = DockerSandboxes(SandboxSettings(lifetime_s=600))
# An eval script whose output is far past the result's 4 KiB tail.
LOUD = "echo FIRST-LINE-MARKER\nseq 1 20000\npython3 -m pytest -q -p no:cacheprovider tests/test_evaluator.py\n"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def prefix(task_images, reap_prefix):
    value = f"pytest-evaluate-face-{uuid.uuid4().hex[:8]}"
    yield value
    assert await reap_prefix(value) == [], "evaluate must destroy its grading container"


def environment(workflow_id: str, attempt: int) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=workflow_id, workflow_run_id=uuid.uuid4().hex, activity_id="7", attempt=attempt)
    return env


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_whole_grading_log_is_stored_once_per_attempt(prefix, tasks, tmp_path):
    task = tasks["calc-eval-cmd"].model_copy(update={"eval_cmd": LOUD})
    store = TrajectoryStore(tmp_path)
    faces = GradingActivities(SANDBOXES, store)
    request = EvalRequest(task=task, diff=task.reference_patch, workflow_id=f"{prefix}-loud", timeout_s=120)
    first = await environment(request.workflow_id, 1).run(faces.evaluate, request)
    retry = await environment(request.workflow_id, 2).run(faces.evaluate, request)
    assert first.solved and retry.solved
    assert first.log_path != retry.log_path, "a retry keeps its own log"
    for result in (first, retry):
        log = Path(result.log_path).read_text()
        assert Path(result.log_path).parent == tmp_path
        assert result.log_bytes == len(log.encode()) > 100_000
        assert "FIRST-LINE-MARKER" in log and "FIRST-LINE-MARKER" not in result.log_tail, "the log holds what the tail lacks"
        assert "[apply]\n$ git apply --3way" in log and "8 passed" in log and "8 passed" in result.log_tail
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(Path(r.log_path).name for r in (first, retry))


def test_the_key_names_workflow_run_activity_and_attempt():
    info = dataclasses.replace(
        ActivityEnvironment().info, workflow_id="rollout-r1-calc-s0", workflow_run_id="0123456789abcdef", activity_id="4", attempt=3
    )
    assert grading_log_key(info) == "rollout-r1-calc-s0.01234567.4.3"


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_store_that_cannot_take_the_log_costs_the_log_not_the_grade(prefix, tasks, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the store's folder should be")
    task = tasks["calc-eval-cmd"]
    faces = GradingActivities(SANDBOXES, TrajectoryStore(blocker))
    request = EvalRequest(task=task, diff=task.reference_patch, workflow_id=f"{prefix}-no-store", timeout_s=120)
    result = await environment(request.workflow_id, 1).run(faces.evaluate, request)
    assert result.solved and result.reward == 1.0
    assert (result.log_path, result.log_bytes) == ("", 0) and "8 passed" in result.log_tail
