"""Harbor tasks graded in a fresh sandbox on the real engine: the task's tests/test.sh runs from /tests and its
reward file (reward.txt or reward.json) is the reward."""

from __future__ import annotations

import asyncio
import base64
import uuid

import pytest
import pytest_asyncio

from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.contracts.tasks import HarborTestFile, TaskSpec
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import graders
from durable_rollouts.grading.harbor_verifier import MAX_METRIC_KEY, MAX_METRICS, bounded_metrics, read_reward

SANDBOXES = DockerSandboxes(SandboxSettings(lifetime_s=600))
TXT = "rollouts/temperature-reward-txt"
JSON = "rollouts/median-reward-json"
WRONG_FIX = """\
diff --git a/convert.py b/convert.py
--- a/convert.py
+++ b/convert.py
@@ -9 +9 @@ def celsius_to_fahrenheit(celsius: float) -> float:
-    return fahrenheit - 32 * 5 / 9
+    return (fahrenheit - 32) * 5 / 8
"""


@pytest.mark.parametrize(
    ("json_text", "txt_text", "expected"),
    [
        (None, "1\n", (1.0, {"reward": 1.0}, "")),
        (None, "0.25", (0.25, {"reward": 0.25}, "")),
        ('{"reward": 0.5, "passed": 3, "ok": true, "name": "x"}', "1", (0.5, {"reward": 0.5, "passed": 3.0}, "")),
        ('{"passed": 3}', "0.75", (0.75, {"passed": 3.0, "reward": 0.75}, "")),
        (
            '{"passed": 3}',
            None,
            (
                0.0,
                {"passed": 3.0},
                "/logs/verifier/reward.json has no numeric 'reward' (and there is no /logs/verifier/reward.txt)",
            ),
        ),
        ("[1]", "1", (0.0, {}, "/logs/verifier/reward.json is not a JSON object")),
        (
            "{oops",
            "1",
            (
                0.0,
                {},
                "/logs/verifier/reward.json is not valid JSON (Expecting property name enclosed in double quotes: line "
                "1 column 2 (char 1))",
            ),
        ),
        (None, "", (0.0, {}, "/logs/verifier/reward.txt is empty")),
        (None, "passed!", (0.0, {}, "/logs/verifier/reward.txt is not a number: 'passed!'")),
        (None, "nan", (0.0, {}, "/logs/verifier/reward.txt is not a finite number: 'nan'")),
        (
            None,
            None,
            (
                0.0,
                {},
                "no reward file: the verifier wrote neither /logs/verifier/reward.txt nor /logs/verifier/reward.json",
            ),
        ),
    ],
)
def test_the_reward_is_read_as_harbor_reads_it(json_text, txt_text, expected):
    """reward.json first (its numeric values are the metrics, ``reward`` the reward), then reward.txt."""
    assert read_reward(json_text, txt_text) == expected


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def prefix(reap_prefix):
    value = f"pytest-harbor-{uuid.uuid4().hex[:8]}"
    yield value
    assert await reap_prefix(value) == [], "evaluate must destroy its grading container"


def request(prefix: str, task: TaskSpec, diff: str, timeout_s: int = 120) -> EvalRequest:
    return EvalRequest(task=task, diff=diff, workflow_id=f"{prefix}-{uuid.uuid4().hex[:6]}", timeout_s=timeout_s)


def with_test_sh(task: TaskSpec, script: str) -> TaskSpec:
    tests = [HarborTestFile(path="test.sh", data_b64=base64.b64encode(script.encode()).decode(), mode=0o755)]
    return task.model_copy(update={"harbor": task.harbor.model_copy(update={"tests": tests})})


def test_a_result_carries_reward_and_a_bounded_set_of_metrics():
    metrics = {f"metric_{n}": float(n) for n in range(100)} | {"k" * (MAX_METRIC_KEY + 1): 1.0, "reward": 0.5}
    kept, dropped = bounded_metrics(metrics)
    assert kept["reward"] == 0.5 and len(kept) == MAX_METRICS and dropped == len(metrics) - MAX_METRICS
    assert all(len(key) <= MAX_METRIC_KEY for key in kept) and all(metrics[key] == value for key, value in kept.items())
    assert bounded_metrics({"reward": 1.0, "passed": 3.0}) == ({"reward": 1.0, "passed": 3.0}, 0)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_reward_txt_reference_solves_and_empty_or_wrong_patches_score_0(prefix, harbor_tasks):
    task = harbor_tasks[TXT]
    solved, empty, wrong = [
        graded.result
        for graded in await asyncio.gather(
            *(graders.evaluate(SANDBOXES, request(prefix, task, d)) for d in (task.reference_patch, "", WRONG_FIX))
        )
    ]
    assert (solved.grader, solved.reward, solved.solved, solved.applied_cleanly, solved.rewards) == (
        "harbor",
        1.0,
        True,
        True,
        {"reward": 1.0},
    ), solved.log_tail
    assert solved.apply_method == "git apply --3way", "the non-git workdir became a repository at boot"
    assert "2 passed" in solved.log_tail and "[harbor reward 1; test.sh exit 0]" in solved.log_tail
    assert (empty.reward, empty.solved, empty.apply_method, empty.rewards) == (0.0, False, "empty", {"reward": 0.0})
    assert (wrong.reward, wrong.solved, wrong.applied_cleanly) == (0.0, False, True), wrong.log_tail
    assert "failed" in wrong.log_tail


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_reward_json_reference_solves_and_carries_the_metrics(prefix, harbor_tasks):
    task = harbor_tasks[JSON]
    solved, empty = await asyncio.gather(
        *(graders.evaluate(SANDBOXES, request(prefix, task, d)) for d in (task.reference_patch, ""))
    )
    assert (solved.result.reward, solved.result.solved) == (1.0, True), solved.result.log_tail
    assert solved.result.rewards == {"reward": 1.0, "checks_passed": 4.0, "checks_total": 4.0}
    assert "even: ok" in solved.log and "[grader harbor: bash /tests/test.sh]" in solved.log
    assert (empty.result.reward, empty.result.solved, empty.result.rewards) == (
        0.0,
        False,
        {"reward": 0.0, "checks_passed": 2.0, "checks_total": 4.0},
    )
    assert "even: FAILED" in empty.result.log_tail


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_fractional_a_missing_and_a_timed_out_reward(prefix, harbor_tasks):
    """A fractional reward is kept (and is not solved); no reward file is reward 0 naming the files; a verifier
    past its timeout is killed. test.sh runs as root in the workdir with [verifier] env, tests in /tests."""
    base = harbor_tasks[JSON]
    fractional = with_test_sh(
        base,
        'test "$PWD $STATS_TOLERANCE $(id -u)" = "/app 1e-9 0" && ls /tests >&2 && echo 0.5 '
        ">/logs/verifier/reward.txt\n",
    )
    missing = with_test_sh(base, "echo no reward here\n")
    hanging = with_test_sh(base, "echo verifying\nsleep 60\n")
    half, none, slow = [
        graded.result
        for graded in await asyncio.gather(
            graders.evaluate(SANDBOXES, request(prefix, fractional, "")),
            graders.evaluate(SANDBOXES, request(prefix, missing, "")),
            graders.evaluate(SANDBOXES, request(prefix, hanging, "", timeout_s=3)),
        )
    ]
    assert (half.reward, half.solved, half.rewards) == (0.5, False, {"reward": 0.5}), half.log_tail
    assert "test.sh" in half.log_tail
    assert (none.reward, none.solved) == (0.0, False)
    assert (
        "no reward file: the verifier wrote neither /logs/verifier/reward.txt nor /logs/verifier/reward.json"
        in none.log_tail
    )
    assert (slow.reward, slow.solved) == (0.0, False)
    assert "verifying" in slow.log_tail and "timed out after 3 s" in slow.log_tail
