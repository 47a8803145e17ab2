"""Dataset rows: the reference's two shapes, fallbacks, and bad rows reported by field and line."""

import base64
import json
import os

import pytest

from durable_rollouts.task_sources.dataset_rows import DatasetRow, RowError, read_dataset, task_from_row

FLAT = {
    "prompt": "fix it",
    "label": "calc-1",
    "metadata": {
        "instance_id": "calc-1",
        "image": "img",
        "workdir": "/w",
        "eval_cmd": "pytest -q",
        "pre_commands": "git status\\ngit log",
    },
}
REMOTE = {
    "prompt": [{"role": "user", "content": "the statement"}],
    "metadata": {
        "remote_env_info": {
            "instance_id": "r-1",
            "image_url": "img2",
            "workdir": "/r",
            "f2p_script": "import sys\nprint('it''s \"quoted\" $HOME')\nsys.exit(0)\n",
        }
    },
}


def test_flat_row():
    task = task_from_row(FLAT)
    assert (task.instance_id, task.image, task.workdir, task.grader) == ("calc-1", "img", "/w", "eval_cmd")
    assert task.problem_statement == "fix it"
    assert task.pre_commands == ["git status\ngit log"]


def test_remote_env_info_row_turns_f2p_script_into_a_verbatim_eval_cmd():
    task = task_from_row(REMOTE)
    assert (task.instance_id, task.image, task.workdir) == ("r-1", "img2", "/r")
    assert task.problem_statement == "the statement"
    encoded = task.eval_cmd.split()[1]
    assert base64.b64decode(encoded).decode() == REMOTE["metadata"]["remote_env_info"]["f2p_script"]


def test_swepro_row_and_json_encoded_test_lists():
    row = {
        "prompt": "p",
        "metadata": {
            "image": "i",
            "workdir": "/w",
            "swepro": {"run_script": "run", "parser_script": "parse", "fail_to_pass": '["a"]', "pass_to_pass": ["b"]},
        },
    }
    task = task_from_row(row)
    assert task.grader == "swepro" and task.swepro.fail_to_pass == ["a"] and task.swepro.pass_to_pass == ["b"]


SWEBENCH = {
    "prompt": "the issue",
    "metadata": {
        "remote_env_info": {
            "instance_id": "astropy__astropy-12907",
            "image": "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest",
            "repo": "astropy/astropy",
            "version": 4.3,
            "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
            "patch": "gold",
            "test_patch": "diff --git a/astropy/modeling/tests/test_separable.py "
            "b/astropy/modeling/tests/test_separable.py\n",
            "FAIL_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]',
            "PASS_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_coord_matrix"]',
        }
    },
}


def test_swebench_row_defaults_to_testbed_and_keeps_the_gold_patch_for_the_oracle():
    task = task_from_row(SWEBENCH)
    assert (task.grader, task.workdir, task.instance_id) == ("swebench", "/testbed", "astropy__astropy-12907")
    assert task.image.startswith("swebench/sweb.eval") and task.reference_patch == "gold"
    spec = task.swebench
    assert (spec.repo, spec.version, spec.base_commit[:7]) == ("astropy/astropy", "4.3", "d16bfe0")
    assert spec.fail_to_pass == ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]
    assert spec.pass_to_pass == ["astropy/modeling/tests/test_separable.py::test_coord_matrix"]


def _swebench_with(**changes):
    remote = {**SWEBENCH["metadata"]["remote_env_info"], **changes}
    return {**SWEBENCH, "metadata": {"remote_env_info": {k: v for k, v in remote.items() if v is not None}}}


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"FAIL_TO_PASS": "not json"}, "metadata.remote_env_info.FAIL_TO_PASS"),
        ({"FAIL_TO_PASS": "[]"}, "metadata.remote_env_info.FAIL_TO_PASS"),
        ({"PASS_TO_PASS": "{"}, "metadata.remote_env_info.PASS_TO_PASS"),
        ({"base_commit": None}, "metadata.remote_env_info.base_commit"),
        ({"repo": None}, "metadata.remote_env_info.repo"),
        ({"test_patch": None}, "metadata.remote_env_info.test_patch"),
        ({"version": None}, "metadata.remote_env_info.version"),
        ({"install_config": "pytest"}, "metadata.remote_env_info.install_config"),
        ({"image": None}, "metadata.image"),
    ],
)
def test_bad_swebench_rows_name_the_row_field(changes, field):
    with pytest.raises(RowError) as raised:
        task_from_row(_swebench_with(**changes))
    assert raised.value.field == field


@pytest.mark.parametrize(
    "row, field",
    [
        ({"prompt": "p", "metadata": {"image": "i", "eval_cmd": "x"}}, "metadata.workdir"),
        ({"prompt": "p", "metadata": {"workdir": "/w", "eval_cmd": "x"}}, "metadata.image"),
        ({"prompt": "p", "metadata": {"image": "i", "workdir": "/w"}}, "metadata"),
        (
            {"prompt": "p", "metadata": {"image": "i", "workdir": "/w", "eval_cmd": "x", "pre_commands": 5}},
            "metadata.pre_commands",
        ),
        (
            {"prompt": "p", "metadata": {"image": "i", "workdir": "/w", "swepro": {"run_script": 3}}},
            "metadata.swepro.run_script",
        ),
        ({"metadata": {"image": "i", "workdir": "/w", "eval_cmd": "x"}}, "metadata.problem_statement"),
        ([1, 2], "row"),
    ],
)
def test_bad_rows_name_the_field(row, field):
    with pytest.raises(RowError) as raised:
        task_from_row(row)
    assert raised.value.field == field


def test_a_bad_line_does_not_stop_the_others(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(
        "\n".join([json.dumps(FLAT), "{broken", json.dumps({"metadata": {}}), "", json.dumps(REMOTE)]) + "\n"
    )
    items = list(read_dataset(path))
    assert [type(i) for i in items] == [DatasetRow, RowError, RowError, DatasetRow]
    assert items[1].line == 2 and "invalid JSON" in str(items[1])
    assert str(items[2]).startswith("line 3: metadata.image")
    assert items[3].line == 5


def test_the_example_dataset_is_what_make_dataset_writes():
    from examples.tasks import make_dataset

    for file, rows in (
        ("dataset.jsonl", make_dataset.rows()),
        ("reinstall_dataset.jsonl", make_dataset.reinstall_rows()),
    ):
        expected = [json.dumps(row) for row in rows]
        assert (make_dataset.TASKS / file).read_text().splitlines() == expected, (
            f"{file}: run examples/tasks/make_dataset.py"
        )


def _swepro_row(**swepro) -> dict:
    return {
        "prompt": "p",
        "metadata": {
            "instance_id": "pro-1",
            "image": "i",
            "workdir": "/w",
            "swepro": {"parser_script": "parse", **swepro},
        },
    }


@pytest.fixture
def dataset_root(tmp_path, monkeypatch):
    """A dataset root holding a run script, next to a secret outside it (and a symlink in the root pointing at it)."""
    monkeypatch.delenv("ROLLOUT_DATASET_ROOT", raising=False)
    root = tmp_path / "data"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "run.sh").write_text('#!/bin/bash\npytest "$@"\n')
    (tmp_path / "secret.txt").write_text("SECRET-MARKER-7f3a\n")
    (root / "scripts" / "escape.sh").symlink_to(tmp_path / "secret.txt")
    (root / "scripts" / "passwd.sh").symlink_to("/etc/passwd")
    (root / "scripts" / "big.sh").write_bytes(b"#" * ((1 << 20) + 1))
    (root / "scripts" / "binary.sh").write_bytes(b"\xff\xfe\x00")
    os.mkfifo(root / "scripts" / "fifo.sh")
    return root


def test_script_paths_inside_the_dataset_root_are_inlined(dataset_root):
    relative = task_from_row(_swepro_row(run_script_path="scripts/run.sh"), root=dataset_root)
    absolute = task_from_row(_swepro_row(run_script_path=str(dataset_root / "scripts" / "run.sh")), root=dataset_root)
    for task in (relative, absolute):
        assert task.grader == "swepro" and task.swepro.run_script == '#!/bin/bash\npytest "$@"\n'
        assert task.swepro.run_script_path is None


def _hostile_lines() -> list[str]:
    lines = ["SECRET-MARKER-7f3a"]
    for path in ("/etc/shadow", "/etc/passwd"):
        try:
            lines += [line for line in open(path).read().splitlines() if line.strip()]
        except OSError:
            pass
    return lines


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/shadow", "outside the dataset root"),
        ("../../etc/passwd", "'..' is not allowed"),
        ("scripts/../../secret.txt", "'..' is not allowed"),
        ("scripts/escape.sh", "through a symlink"),
        ("scripts/passwd.sh", "through a symlink"),
        ("scripts/missing.sh", "cannot be opened"),
        ("scripts", "not a regular file"),
        ("scripts/fifo.sh", "not a regular file"),
        ("scripts/big.sh", "larger than 1048576 bytes"),
        ("scripts/binary.sh", "not UTF-8 text"),
    ],
)
@pytest.mark.parametrize("field", ["run_script_path", "parser_script_path"])
def test_script_paths_that_leave_the_dataset_root_are_refused_by_field_and_line(dataset_root, path, why, field):
    row = _swepro_row(run_script="run", **{field: path})
    row["metadata"]["swepro"].pop(field.removesuffix("_path"), None)
    good = _swepro_row(run_script_path="scripts/run.sh")
    dataset = dataset_root / "rows.jsonl"
    dataset.write_text(json.dumps(good) + "\n" + json.dumps(row) + "\n" + json.dumps(good) + "\n")
    items = list(read_dataset(dataset, root=dataset_root))
    assert [type(item) for item in items] == [DatasetRow, RowError, DatasetRow], "one bad row never stops the others"
    error = items[1]
    assert (error.line, error.field) == (2, f"metadata.swepro.{field}") and why in error.reason, error
    shown = repr(items) + str(error)
    assert not any(line in shown for line in _hostile_lines()), "nothing of a host file may appear"


def test_only_a_root_the_operator_sets_lets_rows_name_script_paths(dataset_root, monkeypatch):
    """No implicit root, not even the dataset's own folder: a dataset saved in a home directory
    must not be able to inline the files beside it."""
    dataset = dataset_root / "rows.jsonl"
    dataset.write_text(json.dumps(_swepro_row(run_script_path="scripts/run.sh")) + "\n")
    (refused,) = read_dataset(dataset)
    assert (
        isinstance(refused, RowError)
        and "needs a dataset root" in refused.reason
        and "ROLLOUT_DATASET_ROOT" in refused.reason
    )
    (by_argument,) = read_dataset(dataset, root=dataset_root)
    monkeypatch.setenv("ROLLOUT_DATASET_ROOT", str(dataset_root))
    (by_env,) = read_dataset(dataset)
    assert by_argument.task.swepro.run_script == by_env.task.swepro.run_script == '#!/bin/bash\npytest "$@"\n'


def test_a_script_path_without_a_dataset_root_and_inline_plus_path_are_refused(dataset_root):
    with pytest.raises(RowError, match="needs a dataset root") as caught:
        task_from_row(_swepro_row(run_script_path="scripts/run.sh"), line=4)
    assert (caught.value.field, caught.value.line) == ("metadata.swepro.run_script_path", 4)
    with pytest.raises(RowError, match="not both") as caught:
        task_from_row(_swepro_row(run_script="inline", run_script_path="scripts/run.sh"), root=dataset_root)
    assert caught.value.field == "metadata.swepro.run_script_path"


def test_test_files_come_from_metadata_or_remote_env_info():
    flat = json.loads(json.dumps(FLAT))
    flat["metadata"]["test_files"] = ["checks/**", "**/check_*.py"]
    assert task_from_row(flat).test_files == ["checks/**", "**/check_*.py"]
    remote = json.loads(json.dumps(REMOTE))
    remote["metadata"]["remote_env_info"]["test_files"] = ["spec/**"]
    assert task_from_row(remote).test_files == ["spec/**"]
    assert task_from_row(FLAT).test_files is None, "left out: the grader's default test paths"


@pytest.mark.parametrize(
    ("where", "value", "why"),
    [
        ("metadata", [], "non-empty list"),
        ("metadata", "tests/**", "non-empty list"),
        ("metadata", [3], "non-empty list"),
        ("metadata", ["/abs/**"], "relative to the workdir"),
        ("remote_env_info", ["../up/**"], "'..' is not allowed"),
    ],
)
def test_bad_test_files_name_the_field(where, value, why):
    row = json.loads(json.dumps(REMOTE))
    source = row["metadata"] if where == "metadata" else row["metadata"]["remote_env_info"]
    source["test_files"] = value
    with pytest.raises(RowError) as caught:
        task_from_row(row, line=9)
    field = "metadata.test_files" if where == "metadata" else "metadata.remote_env_info.test_files"
    assert (caught.value.field, caught.value.line) == (field, 9) and why in caught.value.reason


def test_swepro_selected_test_files_stay_in_the_workdir():
    with pytest.raises(RowError) as caught:
        task_from_row(_swepro_row(run_script="run", selected_test_files=["/etc/passwd"]), line=2)
    assert caught.value.field.startswith("metadata.swepro.selected_test_files") and "relative" in caught.value.reason
