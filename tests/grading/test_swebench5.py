"""The swebench >= 5 path, run for real: ``make setup`` keeps swebench 5 in its own venv (``.cache/swebench5``),
since one environment holds one swebench; the grader runs there against real Docker on a row in the
5.x dataset shape (``eval_script``, ``log_parser``, ``eval_type``)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

from durable_rollouts.grading import swebench
from durable_rollouts.paths import PROJECT_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

PROJECT = PROJECT_ROOT
SWEBENCH5_PYTHON = PROJECT / ".cache" / "swebench5" / "bin" / "python"

# Runs in the swebench 5 venv: grade the reference patch and an empty diff, then try the row without its 5.x columns.
GRADE_UNDER_SWEBENCH5 = """
import asyncio, json, sys
from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import graders, swebench
from durable_rollouts.task_sources.dataset_rows import read_dataset

columns = json.loads(sys.stdin.read())
prefix = sys.argv[1]
task = next(r.task for r in read_dataset("examples/tasks/dataset.jsonl") if r.task.instance_id == "slugify-swebench")
modern = task.model_copy(update={"swebench": task.swebench.model_copy(update={**columns, "install_config": None})})

async def grade(diff, name):
    graded = await graders.evaluate(DockerSandboxes(), EvalRequest(task=modern, diff=diff, workflow_id=f"{prefix}-{name}", timeout_s=120))
    return graded.result.model_dump()

async def main():
    solved, unsolved = await asyncio.gather(grade(task.reference_patch, "solved"), grade("", "unsolved"))
    try:
        swebench.eval_script(task)
        refusal = ""
    except swebench.NotEvaluable as error:
        refusal = str(error)
    print(json.dumps({"version": swebench.package_version(), "solved": solved, "unsolved": unsolved, "refusal": refusal}))

asyncio.run(main())
"""  # noqa: E501


async def test_a_swebench5_row_grades_one_with_the_fix_and_zero_without(task_images, tasks, reap_prefix):
    if not SWEBENCH5_PYTHON.exists():
        pytest.skip("run `make setup` to create the swebench 5 venv")
    pytest.importorskip("swebench")
    task = tasks["slugify-swebench"]
    columns = {
        "eval_script": swebench.eval_script(task),
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
    }
    prefix = f"pytest-swebench5-{uuid.uuid4().hex[:8]}"
    run = subprocess.run(
        [str(SWEBENCH5_PYTHON), "-c", GRADE_UNDER_SWEBENCH5, prefix],
        input=json.dumps(columns),
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    outcome = json.loads(run.stdout.strip().splitlines()[-1])
    assert outcome["version"].startswith("5.")
    solved, unsolved = outcome["solved"], outcome["unsolved"]
    assert (solved["reward"], solved["grader"], solved["tests_passed"], solved["tests_failed"]) == (
        1.0,
        "swebench",
        6,
        0,
    ), solved["log_tail"]
    assert (unsolved["reward"], unsolved["tests_passed"], unsolved["tests_failed"]) == (0.0, 3, 3), unsolved["log_tail"]
    assert "SWEBENCH_TEST_EXIT_CODE" in solved["log_tail"] or ">>>>> Test Exit Code" in solved["log_tail"]
    assert "no remote_env_info.eval_script or remote_env_info.log_parser" in outcome["refusal"]
    assert await reap_prefix(prefix) == []
