"""The SWE-rebench, SWE-Gym and SWE-smith example rows graded for real: a fresh sandbox from each image, the
gold patch solves, no patch and a wrong one do not; a SWE-smith sandbox shows the bug as the repo's state."""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import subprocess

import docker
import pytest

from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import graders
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.task_sources.dataset_rows import read_dataset

pytestmark = pytest.mark.integration
ON_THE_SESSION_LOOP = pytest.mark.asyncio(loop_scope="session")

TASKS = PROJECT_ROOT / "examples" / "tasks"
ROWS = TASKS / "swe_rows.jsonl"
SANDBOXES = DockerSandboxes(SandboxSettings(lifetime_s=600))
SWEBENCH5_PYTHON = PROJECT_ROOT / ".cache" / "swebench5" / "bin" / "python"


def edit(task_dir: str, path: str, old: str, new: str, *, before: tuple[str, str] | None = None) -> str:
    """A patch replacing ``old`` by ``new`` in the example repo's ``path`` (first rewritten by ``before``, as the
    sandbox has it)."""
    text = (TASKS / task_dir / "repo" / path).read_text()
    if before is not None:
        text = text.replace(*before)
    assert old in text, (path, old)
    lines = difflib.unified_diff(
        text.splitlines(True), text.replace(old, new).splitlines(True), f"a/{path}", f"b/{path}"
    )
    return f"diff --git a/{path} b/{path}\n" + "".join(lines)


SMITH_BUG = ("start <= merged[-1][1]", "start < merged[-1][1]")
# instance id prefix -> (grader, tests passed with the gold patch, a patch that applies but does not solve the task)
EXAMPLES = {
    "rollouts-examples__wordfreq": (
        "swebench",
        5,
        edit(
            "wordfreq-swerebench",
            "wordfreq/__init__.py",
            'return re.findall(r"[A-Za-z\']+", text)',
            'return [w.lower() for w in re.findall(r"[A-Za-z\']+", text)]',
        ),
    ),
    "rollouts-examples__roman": (
        "swebench",
        11,
        edit("roman-swegym", "roman/__init__.py", '(5, "V"), (1, "I"))', '(5, "V"), (4, "IV"), (1, "I"))'),
    ),
    "rollouts-examples__intervals": (
        "eval_cmd",
        5,
        edit(
            "intervals-swesmith",
            "intervals/__init__.py",
            "        if start > end:\n            raise",
            "        if False:\n            raise",
            before=SMITH_BUG,
        ),
    ),
}


@pytest.fixture(scope="module")
def swe_tasks() -> dict[str, TaskSpec]:
    """The example rows' tasks by instance id prefix (a SWE-smith id holds the baseline commit)."""
    return {
        next(key for key in EXAMPLES if row.task.instance_id.startswith(key)): row.task for row in read_dataset(ROWS)
    }


def request(prefix: str, task: TaskSpec, diff: str, name: str) -> EvalRequest:
    return EvalRequest(task=task, diff=diff, workflow_id=f"{prefix}-{name}-{task.instance_id[:24]}", timeout_s=180)


def test_the_examples_are_the_three_shapes(swe_tasks):
    assert sorted(swe_tasks) == sorted(EXAMPLES)


@ON_THE_SESSION_LOOP
@pytest.mark.parametrize("example", sorted(EXAMPLES))
async def test_the_gold_patch_solves_and_no_patch_or_a_wrong_one_does_not(prefix, swe_tasks, example):
    task = swe_tasks[example]
    grader, gold_passed, wrong = EXAMPLES[example]
    solved, empty, partial = [
        graded.result
        for graded in await asyncio.gather(
            *(
                graders.evaluate(SANDBOXES, request(prefix, task, diff, name))
                for name, diff in (("gold", task.reference_patch), ("empty", ""), ("wrong", wrong))
            )
        )
    ]
    assert (solved.reward, solved.solved, solved.grader, solved.tests_passed, solved.tests_failed) == (
        1.0,
        True,
        grader,
        gold_passed,
        0,
    ), solved.log_tail
    assert (empty.reward, empty.solved, empty.apply_method) == (0.0, False, "empty"), empty.log_tail
    assert (partial.reward, partial.solved, partial.applied_cleanly) == (0.0, False, True), partial.log_tail
    assert partial.tests_failed > 0 and empty.tests_failed > 0


@ON_THE_SESSION_LOOP
async def test_a_swe_smith_sandbox_holds_the_bug_as_the_repos_only_history(prefix, swe_tasks):
    task = swe_tasks["rollouts-examples__intervals"]
    handle = await SANDBOXES.boot(SandboxRequest(task=task, workflow_id=f"{prefix}-agent", attempt=0, purpose="agent"))
    try:
        probe = (
            "git status --porcelain; echo ---; git log --all --oneline | wc -l; git fsck --lost-found 2>&1; echo "
            "---; cat intervals/__init__.py"
        )
        result = await SANDBOXES.exec(handle, probe, timeout_s=60)
        diff = await SANDBOXES.capture_diff(handle)
    finally:
        await SANDBOXES.destroy(handle)
    status, history, source = result.output.split("---\n")
    assert status.split() == ["??", "PROBLEM_STATEMENT.md"] and history.split() == ["1"], result.output
    assert SMITH_BUG[1] in source and SMITH_BUG[0] not in source
    assert "intervals/__init__.py" not in diff.diff, "the bug is the baseline, not part of the agent's diff"


def test_the_swe_gym_rows_derived_image_name_is_tagged_by_the_build(task_images, swe_tasks):
    task = swe_tasks["rollouts-examples__roman"]
    assert task.image == (TASKS / "roman-swegym" / "tags").read_text().strip()
    assert (
        docker.from_env().images.get(task.image).id
        == docker.from_env().images.get("rollout-task-roman-swegym:latest").id
    )


# Runs in the swebench 5 venv: the SWE-rebench and SWE-Gym rows carry no 5.x eval script, so that worker refuses them.
REFUSAL_UNDER_SWEBENCH5 = """
import json
from durable_rollouts.grading import swebench
from durable_rollouts.task_sources.dataset_rows import read_dataset

refusals = {}
for row in read_dataset("examples/tasks/swe_rows.jsonl"):
    if row.task.swebench is not None:
        try:
            swebench.eval_script(row.task)
            refusals[row.task.instance_id] = ""
        except swebench.NotEvaluable as error:
            refusals[row.task.instance_id] = str(error)
print(json.dumps(refusals))
"""


def test_under_swebench5_the_swebench_graded_shapes_are_not_evaluable_with_a_reason():
    if not SWEBENCH5_PYTHON.exists():
        pytest.skip("run `make setup` to create the swebench 5 venv")
    run = subprocess.run(
        [str(SWEBENCH5_PYTHON), "-c", REFUSAL_UNDER_SWEBENCH5],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    refusals = json.loads(run.stdout.strip().splitlines()[-1])
    assert sorted(refusals) == ["rollouts-examples__roman-7", "rollouts-examples__wordfreq-12"]
    assert all("rows in the older shape need swebench<5" in reason for reason in refusals.values()), refusals
