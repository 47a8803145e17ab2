"""SWE-smith rows: the image, the bug applied at boot, the gold fix, the harness's test command and its verdict."""

import base64
import json

import pytest

from durable_rollouts.task_sources.dataset_rows import RowError, task_from_row
from durable_rollouts.task_sources.row_shapes import swe_smith

BUG = (
    "diff --git a/src/flask/app.py b/src/flask/app.py\n--- a/src/flask/app.py\n+++ b/src/flask/app.py\n@@ -1,2 +1,2 "
    "@@\n ctx\n-good\n+bad\n"
)
ROW = {
    "instance_id": "pallets__flask.bc098406.func_basic__abc",
    "repo": "swesmith/pallets__flask.bc098406",
    "patch": BUG,
    "FAIL_TO_PASS": '["tests/test_basic.py::test_one", "tests/test_json.py::test_two"]',
    "PASS_TO_PASS": ["tests/test_basic.py::test_three"],
    "image_name": "jyangballin/swesmith.x86_64.pallets_1776_flask.bc098406",
    "problem_statement": "it breaks",
    "created_at": "2025-03-01",
}


def test_fields_and_the_gold_fix():
    task = task_from_row(ROW)
    assert (task.image, task.workdir, task.grader, task.swebench) == (ROW["image_name"], "/testbed", "eval_cmd", None)
    assert task.reference_patch == BUG.replace("-good\n+bad", "-bad\n+good")


def test_without_image_name_the_image_follows_the_profile_naming():
    task = task_from_row({k: v for k, v in ROW.items() if k != "image_name"})
    assert task.image == "swebench/swesmith.x86_64.pallets_1776_flask.bc098406"


def test_the_bug_is_applied_and_folded_into_the_history_at_boot():
    (command,) = task_from_row(ROW).pre_commands
    encoded = command.split()[1]
    assert base64.b64decode(encoded).decode() == BUG
    assert "git apply --verbose" in command and "commit -q --amend" in command and "git gc -q --prune=now" in command


def test_the_eval_script_runs_the_profile_command_on_the_fail_to_pass_files():
    script = task_from_row(ROW).eval_cmd
    assert f"{swe_smith.DEFAULT_TEST_COMMAND} tests/test_basic.py tests/test_json.py" in script
    assert (
        script.index(">>>>> Start Test Output")
        < script.index(swe_smith.DEFAULT_TEST_COMMAND)
        < script.index(">>>>> End Test Output")
    )
    required = next(line.split()[1] for line in script.splitlines() if swe_smith.REQUIRED_FILE in line)
    assert json.loads(base64.b64decode(required)) == {
        "FAIL_TO_PASS": ["tests/test_basic.py::test_one", "tests/test_json.py::test_two"],
        "PASS_TO_PASS": ["tests/test_basic.py::test_three"],
        "files": ["tests/test_basic.py", "tests/test_json.py"],
    }


def test_a_profile_with_its_own_test_command():
    row = {**ROW, "instance_id": "paramiko__paramiko.23f92003.x__y", "repo": "swesmith/paramiko__paramiko.23f92003"}
    assert "pytest -rA --color=no --disable-warnings tests/test_basic.py" in task_from_row(row).eval_cmd


def test_tests_that_are_not_pytest_node_ids_are_refused():
    with pytest.raises(RowError) as caught:
        task_from_row({**ROW, "FAIL_TO_PASS": ["TestParseDuration"]})
    assert caught.value.field == "FAIL_TO_PASS" and "pytest node id" in caught.value.reason
