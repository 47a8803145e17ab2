"""SWE-rebench rows: the instance fields, the install_config cleaned as SWE-rebench's harness cleans it, the image."""

from durable_rollouts.task_sources.dataset_rows import task_from_row

ROW = {
    "instance_id": "qBraid__pyqasm-120",
    "repo": "qBraid/pyqasm",
    "version": "0.1",
    "base_commit": "0ffe1",
    "environment_setup_commit": "deadbeef",
    "patch": "gold",
    "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n",
    "FAIL_TO_PASS": '["tests/test_x.py::test_a"]',
    "PASS_TO_PASS": ["tests/test_x.py::test_b"],
    "problem_statement": "the issue",
    "install_config": {
        "python": "3.10",
        "install": "pip install -e .",
        "pre_install": None,
        "test_cmd": "pytest -rA",
        "log_parser": "parse_log_pytest",
    },
    "docker_image": "swerebench/sweb.eval.x86_64.qbraid_1776_pyqasm-120",
    "meta": {"is_lite": False},
}


def test_fields_are_mapped_and_json_lists_decoded():
    task = task_from_row(ROW)
    spec = task.swebench
    assert (task.instance_id, task.image, task.workdir, task.reference_patch) == (
        ROW["instance_id"],
        ROW["docker_image"],
        "/testbed",
        "gold",
    )
    assert (spec.repo, spec.version, spec.base_commit, spec.fail_to_pass, spec.pass_to_pass) == (
        "qBraid/pyqasm",
        "0.1",
        "0ffe1",
        ["tests/test_x.py::test_a"],
        ["tests/test_x.py::test_b"],
    )


def test_the_install_config_is_cleaned_and_the_environment_is_the_base_commit():
    spec = task_from_row(ROW).swebench
    assert spec.install_config == {
        "python": "3.10",
        "install": "LANG=C.UTF-8 LC_ALL=C.UTF-8 pip install -e .",
        "test_cmd": "LANG=C.UTF-8 LC_ALL=C.UTF-8 pytest -rA",
        "log_parser": "parse_log_pytest",
    }
    assert spec.environment_setup_commit == "0ffe1"


def test_a_json_encoded_install_config_and_a_row_without_image_or_version():
    import json

    row = {k: v for k, v in ROW.items() if k not in ("docker_image", "version")}
    task = task_from_row({**row, "install_config": json.dumps(ROW["install_config"])})
    assert task.image == "swerebench/sweb.eval.x86_64.qbraid_1776_pyqasm-120"
    assert task.swebench.version == "0" and task.swebench.install_config["python"] == "3.10"
