"""The ``evaluate`` activity returns each grading's whole log in its result, beside the 4 KiB tail."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
import pytest_asyncio
from temporalio.testing import ActivityEnvironment

from activities.evaluate import GradingActivities
from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading.grading_log import FULL_LOG_BYTES

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
    env.info = dataclasses.replace(
        env.info, workflow_id=workflow_id, workflow_run_id=uuid.uuid4().hex, activity_id="7", attempt=attempt
    )
    return env


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_whole_grading_log_travels_in_each_attempts_result(prefix, tasks):
    task = tasks["calc-eval-cmd"].model_copy(update={"eval_cmd": LOUD})
    faces = GradingActivities(SANDBOXES)
    request = EvalRequest(task=task, diff=task.reference_patch, workflow_id=f"{prefix}-loud", timeout_s=120)
    first = await environment(request.workflow_id, 1).run(faces.evaluate, request)
    retry = await environment(request.workflow_id, 2).run(faces.evaluate, request)
    assert first.solved and retry.solved
    for result in (first, retry):
        assert result.log_bytes == len(result.log.encode()) > 100_000
        assert result.log_bytes <= FULL_LOG_BYTES
        assert "FIRST-LINE-MARKER" in result.log and "FIRST-LINE-MARKER" not in result.log_tail, (
            "the log holds what the tail lacks"
        )
        assert (
            "[apply]\n$ git apply --3way" in result.log and "8 passed" in result.log and "8 passed" in result.log_tail
        )
        assert result.log_path == "", "only a results file names a log file"
