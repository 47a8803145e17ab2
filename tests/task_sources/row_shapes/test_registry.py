"""Which shape reads a row, where its fields may sit, and the errors for rows of no known shape."""

import json

import pytest

from durable_rollouts.task_sources.dataset_rows import DatasetRow, RowError, read_dataset, task_from_row

GYM = {
    "instance_id": "getmoto__moto-5752",
    "repo": "getmoto/moto",
    "version": "4.1",
    "base_commit": "a1b2c3d",
    "patch": "gold",
    "test_patch": "diff --git a/tests/test_ssm.py b/tests/test_ssm.py\n",
    "FAIL_TO_PASS": ["tests/test_ssm.py::test_a"],
    "PASS_TO_PASS": ["tests/test_ssm.py::test_b"],
    "problem_statement": "the issue",
}
SMITH = {
    "instance_id": "pallets__flask.bc098406.func_basic__abc",
    "repo": "swesmith/pallets__flask.bc098406",
    "patch": "diff --git a/src/flask/app.py b/src/flask/app.py\n--- a/src/flask/app.py\n+++ b/src/flask/app.py\n@@ -1 "
    "+1 @@\n-a\n+b\n",
    "FAIL_TO_PASS": ["tests/test_basic.py::test_one"],
    "PASS_TO_PASS": [],
    "image_name": "jyangballin/swesmith.x86_64.pallets_1776_flask.bc098406",
    "problem_statement": "it breaks",
}


@pytest.mark.parametrize(
    ("row", "grader"),
    [
        (GYM, "swebench"),
        ({**GYM, "install_config": {"test_cmd": "pytest -rA"}}, "swebench"),
        (SMITH, "eval_cmd"),
        ({**GYM, "repo": "astropy/astropy", "image": "swebench/sweb.eval.x86_64.astropy"}, "swebench"),
    ],
)
def test_a_flat_row_reads_at_the_top_level_and_under_metadata(row, grader):
    """A flat SWE-bench row's own ``image`` does not make its metadata slime's."""
    flat = task_from_row(row)
    nested = task_from_row({"prompt": "ignored", "metadata": row})
    assert flat == nested and flat.grader == grader and flat.workdir == "/testbed"
    assert flat.image == row.get("image", flat.image)


def test_the_prompt_stands_in_for_a_missing_problem_statement():
    task = task_from_row(
        {"prompt": [{"role": "user", "content": "from the prompt"}], "metadata": {**SMITH, "problem_statement": ""}}
    )
    assert task.problem_statement == "from the prompt"
    with pytest.raises(RowError) as caught:
        task_from_row({**SMITH, "problem_statement": ""})
    assert caught.value.field == "problem_statement" and "no prompt" in caught.value.reason


def test_slime_rows_keep_their_reader():
    assert (
        task_from_row({"prompt": "p", "metadata": {"image": "i", "workdir": "/w", "eval_cmd": "x"}}).grader
        == "eval_cmd"
    )
    with pytest.raises(RowError) as caught:
        task_from_row({"prompt": "p"})
    assert caught.value.field == "metadata.image"


def test_generic_keys_in_slime_metadata_do_not_make_it_a_shape_row():
    """``repo``, ``base_commit``, ``patch`` are common metadata: only keys unique to the dataset shapes decide."""
    plain = task_from_row(
        {
            "prompt": "do",
            "metadata": {"instance_id": "a", "image": "img", "workdir": "/w", "eval_cmd": "true", "repo": "o/r"},
        }
    )
    assert (plain.instance_id, plain.image, plain.workdir, plain.grader) == ("a", "img", "/w", "eval_cmd")
    remote = {
        "instance_id": "astropy__astropy-12907",
        "image": "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest",
        "repo": "astropy/astropy",
        "version": "4.3",
        "base_commit": "d16bfe0",
        "patch": "gold",
        "test_patch": "diff --git a/t.py b/t.py\n",
        "FAIL_TO_PASS": ["t.py::test_a"],
        "PASS_TO_PASS": [],
    }
    beside = {"repo": remote["repo"], "base_commit": remote["base_commit"], "patch": "gold"}
    for metadata in (beside, {**beside, "test_patch": remote["test_patch"], "FAIL_TO_PASS": remote["FAIL_TO_PASS"]}):
        task = task_from_row({"prompt": "the issue", "metadata": {**metadata, "remote_env_info": remote}})
        assert (task.grader, task.instance_id, task.image, task.workdir) == (
            "swebench",
            remote["instance_id"],
            remote["image"],
            "/testbed",
        )
        assert task.problem_statement == "the issue" and task.reference_patch == "gold"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"instance_id": "x", "repo": "a/b", "patch": "p", "FAIL_TO_PASS": ["t.py::a"], "PASS_TO_PASS": []},
            "row: not a known shape: a SWE-smith row needs instance_id, image_name, patch, FAIL_TO_PASS, PASS_TO_PASS: "
            "missing image_name",
        ),
        (
            {k: v for k, v in GYM.items() if k != "test_patch"},
            "row: not a known shape: a SWE-Gym row needs instance_id, repo, base_commit, test_patch, FAIL_TO_PASS, "
            "PASS_TO_PASS,"
            " version: missing test_patch",
        ),
        ({"title": "no shape at all"}, "row: not a known shape: a SWE-smith row needs"),
    ],
)
def test_a_row_of_no_known_shape_names_what_the_closest_shape_lacks(row, message):
    with pytest.raises(RowError) as caught:
        task_from_row(row, line=7)
    assert str(caught.value).startswith(f"line 7: {message}")


@pytest.mark.parametrize(
    ("row", "field", "reason"),
    [
        (
            {k: v for k, v in GYM.items() if k != "base_commit"},
            "base_commit",
            "missing: a SWE-Gym row needs instance_id, repo, base_commit",
        ),
        (
            {k: v for k, v in SMITH.items() if k not in ("patch", "PASS_TO_PASS")},
            "patch",
            "missing (and PASS_TO_PASS): a SWE-smith row needs",
        ),
        ({**GYM, "install_config": {"python": "3.9"}}, "install_config.test_cmd", "missing"),
        ({**GYM, "FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS", "not a JSON list"),
        ({**GYM, "FAIL_TO_PASS": []}, "FAIL_TO_PASS", "is empty"),
        ({**GYM, "PASS_TO_PASS": [1, 2]}, "PASS_TO_PASS", "must be a list of test names"),
    ],
)
def test_a_claimed_row_that_lacks_a_field_names_it(row, field, reason):
    for prefix, wrapped in (("", row), ("metadata.", {"prompt": "p", "metadata": row})):
        with pytest.raises(RowError) as caught:
            task_from_row(wrapped)
        assert caught.value.field == prefix + field and reason in caught.value.reason, caught.value


def test_a_bad_row_among_good_ones_is_reported_by_line_and_the_rest_read(tmp_path):
    path = tmp_path / "rows.jsonl"
    lines = [
        GYM,
        {"instance_id": "x", "patch": "p"},
        SMITH,
        {**GYM, "FAIL_TO_PASS": "[oops"},
        {"prompt": "p", "metadata": GYM},
    ]
    path.write_text("\n".join(json.dumps(row) for row in lines) + "\n")
    items = list(read_dataset(path))
    assert [type(item) for item in items] == [DatasetRow, RowError, DatasetRow, RowError, DatasetRow]
    assert str(items[1]).startswith("line 2: row: not a known shape") and str(items[3]).startswith(
        "line 4: FAIL_TO_PASS"
    )
    assert [item.line for item in items if isinstance(item, DatasetRow)] == [1, 3, 5]


def test_the_example_rows_are_what_make_dataset_writes():
    from examples.tasks import make_dataset

    expected = [json.dumps(row) for row in make_dataset.swe_rows()]
    assert (make_dataset.TASKS / "swe_rows.jsonl").read_text().splitlines() == expected, (
        "run examples/tasks/make_dataset.py"
    )
    tasks = [item.task for item in read_dataset(make_dataset.TASKS / "swe_rows.jsonl")]
    assert [task.grader for task in tasks] == ["swebench", "swebench", "eval_cmd"]
