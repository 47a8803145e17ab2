"""The attack corpus against every grader kind on the real engine: each attack first earns 1.0 where
``WORKS_ON`` says with the protection off (nothing reset, no guard), then 0 with it on, reset or flagged
tampered; an honest fix plus a new test still earns 1.0 everywhere."""

from __future__ import annotations

import pytest

from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.tasks import TaskSpec
from tests.grading.tampering_attacks import (
    ATTACKS,
    DEFUSED,
    RACY,
    TARGETS,
    WORKS_ON,
    Target,
    diff_after,
    grade_all,
    unprotected,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

NEW_TEST = {"tests/test_added_by_the_fix.py": "def test_added():\n    assert True\n"}


def _task(target: Target, tasks: dict[str, TaskSpec], harbor_tasks: dict[str, TaskSpec]) -> TaskSpec:
    task = harbor_tasks[target.instance_id] if target.kind == "harbor" else tasks[target.instance_id]
    return task.model_copy(update={"eval_cmd": target.eval_cmd}) if target.eval_cmd else task


def _line(name: str, result: EvalResult) -> str:
    return f"{name}: reward {result.reward}, reset {result.reset_paths}, tampered {result.tampered}"


@pytest.mark.parametrize("target_name", sorted(TARGETS))
async def test_every_attack_earns_1_unprotected_where_it_works_and_0_protected(
    prefix, tasks, harbor_tasks, monkeypatch, target_name
):
    target = TARGETS[target_name]
    task = _task(target, tasks, harbor_tasks)
    diffs = {name: diff_after(target.tree, attack(target)) for name, attack in ATTACKS.items()}
    working = {name: diff for name, diff in diffs.items() if target_name in WORKS_ON[name]}
    with monkeypatch.context() as patched:
        unprotected(patched)
        control = await grade_all(prefix, task, working)
    not_working = [
        _line(name, graded.result)
        for name, graded in control.items()
        if graded.result.reward != 1.0 and name not in RACY
    ]
    assert not_working == [], (
        f"attacks WORKS_ON lists for {target_name} that did not earn 1.0 unprotected: {not_working}"
    )

    protected = await grade_all(prefix, task, diffs)
    rewarded = [
        _line(name, graded.result)
        for name, graded in protected.items()
        if graded.result.reward != 0.0 or graded.result.solved
    ]
    assert rewarded == [], f"attacks rewarded on {target_name} with the protection on"
    for name in working:
        result, log = protected[name].result, protected[name].log
        if name in DEFUSED and not result.tampered:
            assert "[tamper check:" in log, "the guard ran and the run failed on its own"
            continue
        assert result.reset_paths or result.tampered, (
            f"{name} on {target_name} scored 0 but was neither reset nor flagged: {log[-3000:]}"
        )
        if result.tampered:
            assert "[tampered: reward 0]" in log and "[tampered: reward 0]" in result.log_tail
            assert all(f"[tampered] {line}" in log for line in result.tampered)


@pytest.mark.parametrize("target_name", sorted(TARGETS))
async def test_an_honest_fix_with_a_new_test_earns_1_and_is_not_flagged(prefix, tasks, harbor_tasks, target_name):
    target = TARGETS[target_name]
    diff = diff_after(target.tree, {} if target.kind == "harbor" else NEW_TEST, target.fix)
    graded = (await grade_all(prefix, _task(target, tasks, harbor_tasks), {"honest": diff}))["honest"]
    result = graded.result
    assert (result.reward, result.solved, result.tampered) == (1.0, True, []), graded.log[-3000:]
    assert result.reset_paths == ([] if target.kind == "harbor" else list(NEW_TEST)), (
        "the fix's new test is removed, the task's tests decide"
    )
    assert result.pytest_sessions >= 1, "the guard's reporter ran in the row's pytest session"
    assert "canaries as expected]" in graded.log
