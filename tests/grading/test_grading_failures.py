"""A grading failure the patch causes is the model's outcome, never an infrastructure refill. On the real engine: the
code under test puts a symlink where the grader reads its log and a directory where it reads ``result.json``
(which made ``evaluate`` raise, so the sample was refilled); the grader reads neither and scores 0. Any failure after
the patch applied scores 0 with its reason, unless the Docker engine itself stopped answering."""

from __future__ import annotations

import pytest

from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.grading import task_tests
from tests.grading.tampering_attacks import SANDBOXES, TARGETS, Target, _appended, diff_after, grade_all

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

_LINK_LOGS = """
import os as _os

for _path in ("/tmp/rollout/grade.out", "/tmp/swepro_eval/stdout.log"):
    if _os.path.exists(_path):
        _os.unlink(_path)
        _os.symlink("/etc/hostname", _path)
_os.makedirs("/tmp/swepro_eval/result.json", exist_ok=True)
"""


def _hostile(target: Target) -> str:
    return diff_after(target.tree, _appended(target, _LINK_LOGS))


@pytest.mark.parametrize("kind", ["eval_cmd", "swepro"])
async def test_a_symlinked_log_and_a_directory_for_result_json_score_0_and_raise_nothing(prefix, tasks, kind):
    target = TARGETS[kind]
    graded = (await grade_all(prefix, tasks[target.instance_id], {"links": _hostile(target)}))["links"]
    assert (graded.result.reward, graded.result.solved, graded.result.grading_error) == (0.0, False, ""), graded.log[
        -3000:
    ]


async def test_a_failure_after_the_patch_applied_scores_0_and_only_a_silent_engine_raises(prefix, tasks, monkeypatch):
    target = TARGETS["eval_cmd"]
    diff = diff_after(target.tree, {}, target.fix)

    async def failing_reset(*args: object) -> list[str]:
        raise SandboxError("could not put the task's tests back: a filter failed")

    monkeypatch.setattr(task_tests, "reset", failing_reset)
    graded = (await grade_all(prefix, tasks[target.instance_id], {"fix": diff}))["fix"]
    result = graded.result
    assert (result.reward, result.solved) == (0.0, False)
    assert result.grading_error == "SandboxError: could not put the task's tests back: a filter failed"
    assert "[grading failed after the patch applied: reward 0]" in result.log_tail

    async def silent() -> bool:
        return False

    monkeypatch.setattr(SANDBOXES, "engine_answers", silent)
    with pytest.raises(SandboxError, match="a filter failed"):
        await grade_all(prefix, tasks[target.instance_id], {"fix": diff})
