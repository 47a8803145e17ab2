"""SWE-bench grading through the real ``swebench`` package: test specs, the log verdict, and clear errors."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from durable_rollouts.grading import swebench
from durable_rollouts.grading.swebench import NotEvaluable
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.task_sources.dataset_rows import read_dataset, task_from_row

DATASET = PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl"
TEST_FILE = "tests/test_slugify.py"
F2P = ["test_drops_punctuation", "test_no_separator_at_either_end", "test_folds_accents_to_ascii"]
P2P = ["test_lowercases_a_single_word", "test_joins_words_with_dashes", "test_custom_separator"]


@pytest.fixture(scope="module")
def task():
    return next(row.task for row in read_dataset(DATASET) if row.task.instance_id == "slugify-swebench")


def log(statuses: dict[str, str], *, markers: bool = True) -> str:
    body = "\n".join(f"{status} {TEST_FILE}::{name}" for name, status in statuses.items())
    if not markers:
        return body + "\n"
    return f"+ git apply -v -\n+ : '>>>>> Start Test Output'\n{body}\n+ : '>>>>> End Test Output'\n"


def test_missing_package_is_not_evaluable_with_the_install_hint(task, monkeypatch):
    def absent(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(swebench.metadata, "version", absent)
    with pytest.raises(NotEvaluable, match=r"durable-rollouts\[swebench\]"):
        swebench.eval_script(task)


def test_a_package_that_does_not_import_is_not_evaluable(task, monkeypatch):
    pytest.importorskip("swebench")
    monkeypatch.setitem(sys.modules, "swebench.harness.grading", None)
    with pytest.raises(NotEvaluable, match=r"is installed but does not import"):
        swebench.eval_script(task)


def test_eval_script_resets_the_test_files_applies_the_test_patch_and_runs_them(task):
    pytest.importorskip("swebench")
    script = swebench.eval_script(task)
    base = task.swebench.base_commit
    assert f"git checkout {base} {TEST_FILE}" in script
    assert task.swebench.test_patch.strip() in script
    assert f"pytest --no-header -rA --tb=no -p no:cacheprovider {TEST_FILE}" in script
    assert (
        script.index(">>>>> Start Test Output")
        < script.index("pytest --no-header")
        < script.index(">>>>> End Test Output")
    )


def test_install_config_is_registered_only_while_it_is_used(task):
    pytest.importorskip("swebench")
    from swebench.harness.constants import MAP_REPO_TO_EXT, MAP_REPO_VERSION_TO_SPECS
    from swebench.harness.log_parsers import MAP_REPO_TO_PARSER

    swebench.verdict(task, log(dict.fromkeys(F2P + P2P, "PASSED")))
    repo = task.swebench.repo
    assert repo not in MAP_REPO_VERSION_TO_SPECS and repo not in MAP_REPO_TO_EXT and repo not in MAP_REPO_TO_PARSER


def test_a_known_repo_uses_the_package_spec_table():
    pytest.importorskip("swebench")
    row = {
        "prompt": "p",
        "metadata": {
            "remote_env_info": {
                "instance_id": "astropy__astropy-12907",
                "image": "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest",
                "repo": "astropy/astropy",
                "version": "4.3",
                "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
                "test_patch": "diff --git a/astropy/modeling/tests/test_separable.py "
                "b/astropy/modeling/tests/test_separable.py\n",
                "FAIL_TO_PASS": '["astropy/modeling/tests/test_separable.py::test_separable[compound_model6-result6]"]',
                "PASS_TO_PASS": "[]",
            }
        },
    }
    script = swebench.eval_script(task_from_row(row))
    assert "pytest -rA astropy/modeling/tests/test_separable.py" in script
    assert "cd /testbed" in script


def test_a_django_row_needs_no_network_to_grade(monkeypatch):
    """The package's image-build scripts fetch django's requirements from GitHub; grading must not."""
    pytest.importorskip("swebench")
    import requests

    def no_network(*args, **kwargs):
        raise AssertionError(f"network request during grading: {args}")

    monkeypatch.setattr(requests, "get", no_network)
    row = {
        "prompt": "p",
        "metadata": {
            "remote_env_info": {
                "instance_id": "django__django-11099",
                "image": "swebench/sweb.eval.x86_64.django_1776_django-11099:latest",
                "repo": "django/django",
                "version": "3.0",
                "base_commit": "d26b2424437dabeeca94d7900b37d2df4410da0c",
                "environment_setup_commit": "419a78300f7cd27611196e1e464d50fd0385ff27",
                "test_patch": "diff --git a/tests/auth_tests/test_validators.py"
                " b/tests/auth_tests/test_validators.py\n",
                "FAIL_TO_PASS": '["test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)"]',
                "PASS_TO_PASS": "[]",
            }
        },
    }
    task = task_from_row(row)
    assert (
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 auth_tests.test_validators"
        in swebench.eval_script(task)
    )
    log = (
        "+ : '>>>>> Start Test Output'\ntest_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests) "
        "... ok\n+ : '>>>>> End Test Output'\n"
    )
    assert swebench.verdict(task, log).solved


def test_all_required_tests_passing_is_resolved(task):
    pytest.importorskip("swebench")
    verdict = swebench.verdict(task, log(dict.fromkeys(F2P + P2P, "PASSED")))
    assert (verdict.solved, verdict.tests_passed, verdict.tests_failed, verdict.note) == (True, 6, 0, "")


def test_a_failing_fail_to_pass_test_is_not_resolved_and_named(task):
    pytest.importorskip("swebench")
    statuses = {**dict.fromkeys(F2P + P2P, "PASSED"), F2P[2]: "FAILED"}
    verdict = swebench.verdict(task, log(statuses))
    assert (verdict.solved, verdict.tests_passed, verdict.tests_failed) == (False, 5, 1)
    assert f"{TEST_FILE}::{F2P[2]}" in verdict.note


def test_a_broken_pass_to_pass_test_is_not_resolved(task):
    pytest.importorskip("swebench")
    statuses = {**dict.fromkeys(F2P + P2P, "PASSED"), P2P[0]: "FAILED"}
    assert not swebench.verdict(task, log(statuses)).solved


def test_a_log_without_test_output_is_not_resolved(task):
    pytest.importorskip("swebench")
    verdict = swebench.verdict(task, "+ git apply -v -\nerror: patch failed: tests/test_slugify.py:11\n")
    assert (verdict.solved, verdict.tests_passed) == (False, 0)
    assert "no test results" in verdict.note


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"install_config": None}, r"remote_env_info.repo/version: .* no test spec for rollouts-examples/slugify 0.1"),
        ({"install_config": {"python": "3.11"}}, r"install_config.test_cmd: missing"),
        (
            {"install_config": {"test_cmd": "pytest -rA", "log_parser": "nosuch"}},
            r"install_config.log_parser: .*parse_log_nosuch",
        ),
    ],
)
def test_rows_the_package_cannot_spec_are_not_evaluable(task, changes, message):
    pytest.importorskip("swebench")
    broken = task.model_copy(update={"swebench": task.swebench.model_copy(update=changes)})
    with pytest.raises(NotEvaluable, match=message):
        swebench.eval_script(broken)
