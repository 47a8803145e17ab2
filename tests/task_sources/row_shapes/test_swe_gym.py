"""SWE-Gym rows: SWE-Gym's image naming and its harness fork's test command, handed to the swebench grader."""

import pytest

from durable_rollouts.task_sources.dataset_rows import RowError, task_from_row

ROW = {
    "instance_id": "Project-MONAI__MONAI-3715",
    "repo": "Project-MONAI/MONAI",
    "version": "0.8",
    "base_commit": "9e5b2f8",
    "patch": "gold",
    "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n",
    "FAIL_TO_PASS": ["tests/test_x.py::test_a"],
    "PASS_TO_PASS": [],
    "problem_statement": "the issue",
    "hints_text": "",
    "created_at": "2022-01-26T12:00:00Z",
}


def test_the_image_follows_swe_gyms_naming():
    assert task_from_row(ROW).image == "xingyaoww/sweb.eval.x86_64.project-monai_s_monai-3715"


@pytest.mark.parametrize(
    ("repo", "config"),
    [
        ("Project-MONAI/MONAI", {"test_cmd": "pytest -rA", "log_parser": "pytest"}),
        ("dask/dask", {"test_cmd": "pytest -n0 -rA --color=no", "log_parser": "pytest"}),
        (
            "conan-io/conan",
            {
                "test_cmd": "pytest -n0 -rA",
                "log_parser": "pytest",
                "eval_commands": ["export PYTHONPATH=${PYTHONPATH:-}:$(pwd)"],
            },
        ),
        ("someone/elsewhere", {"test_cmd": "pytest -rA", "log_parser": "pytest"}),
    ],
)
def test_the_test_command_is_the_forks_for_the_repo(repo, config):
    spec = task_from_row({**ROW, "repo": repo}).swebench
    assert spec.install_config == config and spec.version == "0.8" and spec.environment_setup_commit is None


def test_a_numeric_version_becomes_a_string():
    assert task_from_row({**ROW, "version": 0.8}).swebench.version == "0.8"


def test_mypy_rows_are_refused_naming_the_repo():
    with pytest.raises(RowError) as caught:
        task_from_row({**ROW, "repo": "python/mypy", "instance_id": "python__mypy-1"})
    assert caught.value.field == "repo" and "pytest -k" in caught.value.reason


def test_a_flat_swe_bench_row_keeps_the_package_spec_and_swe_benchs_image():
    row = {**ROW, "instance_id": "astropy__astropy-12907", "repo": "astropy/astropy", "version": "4.3"}
    task = task_from_row(row)
    assert task.image == "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907" and task.swebench.install_config is None
