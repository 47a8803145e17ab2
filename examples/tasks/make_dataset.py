"""Write ``dataset.jsonl``: one slime-shaped row per example task (the demo runs them all), and
``reinstall_dataset.jsonl``: the row whose grading reinstalls its package (``tempconv-reinstall``), kept
apart so the demo stays as quick as it was (the offline-grading tests and bench read it), and
``swe_rows.jsonl``: one row in each other project's flat shape (SWE-rebench, SWE-Gym, SWE-smith), as
the Hugging Face datasets publish them (``tests/grading/test_swe_rows.py`` grades them).

Run ``python examples/tasks/make_dataset.py`` after editing a task; the rows
embed each task's problem statement, reference patch and grader files, so the
JSONL is self-contained. Two rows use the flat ``metadata`` shape
(``eval_cmd`` / ``swepro``), the f2p row the ``metadata.remote_env_info``
shape, as in the reference datasets, and the SWE-bench row the shape of a
SWE-bench Verified instance (plus the ``install_config`` that tells the
``swebench`` package how to test a repo it does not know).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

TASKS = Path(__file__).resolve().parent
WORKDIR = "/workspace/repo"


def image(name: str) -> str:
    return f"rollout-task-{name}:latest"


def text(name: str, file: str) -> str:
    return (TASKS / name / file).read_text()


def baseline_commit(name: str) -> str:
    """The sha ``scripts/build_task_images.sh`` gives the image's baseline commit: same tree, author, dates, message."""
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    }
    with tempfile.TemporaryDirectory() as tree:
        shutil.copytree(
            TASKS / name / "repo",
            tree,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".benchmarks"),
        )
        for command in (
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=rollout", "-c", "user.email=rollout@localhost", "commit", "-q", "-m", "baseline"],
        ):
            subprocess.run(["git", *command], cwd=tree, env=env, check=True, capture_output=True)
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=tree, env=env, check=True, capture_output=True, text=True
        ).stdout.strip()


def calc_row() -> dict:
    name = "calc-eval-cmd"
    statement = text(name, "problem_statement.md")
    return {
        "prompt": statement,
        "label": name,
        "metadata": {
            "instance_id": name,
            "image": image(name),
            "workdir": WORKDIR,
            "problem_statement": statement,
            "eval_cmd": "python3 -m pytest -q -p no:cacheprovider tests/test_evaluator.py",
            "pre_commands": ['python3 -c "import calc; print(calc.__version__)"'],
            "reference_patch": text(name, "reference.patch"),
        },
    }


def textutil_row() -> dict:
    name = "textutil-f2p"
    return {
        "prompt": text(name, "problem_statement.md"),
        "label": name,
        "metadata": {
            "remote_env_info": {
                "instance_id": name,
                "image_url": image(name),
                "workdir": WORKDIR,
                "f2p_script": text(name, "f2p_test.py"),
                "pre_commands": ["python3 -m compileall -q textutil"],
            },
            "reference_patch": text(name, "reference.patch"),
        },
    }


def inventory_row() -> dict:
    name = "inventory-swepro"
    statement = text(name, "problem_statement.md")
    test_file = "tests/test_store.py"
    return {
        "prompt": statement,
        "label": name,
        "metadata": {
            "instance_id": name,
            "image": image(name),
            "workdir": WORKDIR,
            "problem_statement": statement,
            "swepro": {
                "run_script": text(name, "run_script.sh"),
                "parser_script": text(name, "parser.py"),
                "before_repo_set_cmd": "git reset --hard -q HEAD\ngit clean -fdq",
                "selected_test_files": [test_file],
                "fail_to_pass": [
                    f"{test_file}::test_remove_more_than_stock_raises",
                    f"{test_file}::test_remove_unknown_sku_raises",
                ],
                "pass_to_pass": [
                    f"{test_file}::test_add_accumulates",
                    f"{test_file}::test_total_value",
                    f"{test_file}::test_remove_within_stock",
                    f"{test_file}::test_rejects_non_positive_quantities[0]",
                    f"{test_file}::test_rejects_non_positive_quantities[-1]",
                ],
            },
            "pre_commands": [],
            "reference_patch": text(name, "reference.patch"),
        },
    }


def slugify_row() -> dict:
    name = "slugify-swebench"
    test_file = "tests/test_slugify.py"
    return {
        "prompt": text(name, "problem_statement.md"),
        "label": name,
        "metadata": {
            "remote_env_info": {
                "instance_id": name,
                "image": image(name),
                "repo": "rollouts-examples/slugify",
                "version": "0.1",
                "base_commit": baseline_commit(name),
                "patch": text(name, "reference.patch"),
                "test_patch": text(name, "test.patch"),
                "FAIL_TO_PASS": json.dumps(
                    [
                        f"{test_file}::{test}"
                        for test in (
                            "test_drops_punctuation",
                            "test_no_separator_at_either_end",
                            "test_folds_accents_to_ascii",
                        )
                    ]
                ),
                "PASS_TO_PASS": json.dumps(
                    [
                        f"{test_file}::{test}"
                        for test in (
                            "test_lowercases_a_single_word",
                            "test_joins_words_with_dashes",
                            "test_custom_separator",
                        )
                    ]
                ),
                "install_config": {"python": "3.11", "test_cmd": "pytest --no-header -rA --tb=no -p no:cacheprovider"},
            },
        },
    }


def tempconv_row() -> dict:
    """As a SWE-bench eval script does, the grader reinstalls the package (editable, isolated build: pip fetches
    setuptools and wheel, here from the image's /opt/wheels) and then runs the tests, whatever the reinstall did."""
    name = "tempconv-reinstall"
    statement = text(name, "problem_statement.md")
    return {
        "prompt": statement,
        "label": name,
        "metadata": {
            "instance_id": name,
            "image": image(name),
            "workdir": WORKDIR,
            "problem_statement": statement,
            "eval_cmd": "/opt/venv/bin/python -m pip install -e .\n"
            "/opt/venv/bin/python -m pytest -q -p no:cacheprovider tests/test_convert.py",
            "reference_patch": text(name, "reference.patch"),
        },
    }


def swe_rebench_row() -> dict:
    name = "wordfreq-swerebench"
    test_file = "tests/test_wordfreq.py"
    return {
        "instance_id": "rollouts-examples__wordfreq-12",
        "repo": "rollouts-examples/wordfreq",
        "base_commit": baseline_commit(name),
        "patch": text(name, "reference.patch"),
        "test_patch": text(name, "test.patch"),
        "problem_statement": text(name, "problem_statement.md"),
        "hints_text": "",
        "created_at": "2026-01-01T00:00:00Z",
        "version": "0.3",
        "FAIL_TO_PASS": [
            f"{test_file}::{t}" for t in ("test_counts_words_whatever_their_case", "test_breaks_ties_alphabetically")
        ],
        "PASS_TO_PASS": [
            f"{test_file}::{t}"
            for t in ("test_splits_on_punctuation_and_spaces", "test_counts_repeated_words", "test_limits_to_n")
        ],
        "environment_setup_commit": baseline_commit(name),
        "install_config": {
            "python": "3.11",
            "install": None,
            "pre_install": None,
            "packages": None,
            "pip_packages": None,
            "reqs_path": None,
            "test_cmd": "pytest --no-header -rA --tb=no -p no:cacheprovider",
            "log_parser": "parse_log_pytest",
        },
        "meta": {"has_test_patch": True, "is_lite": False},
        "license_name": "MIT",
        "docker_image": image(name),
    }


def swe_gym_row() -> dict:
    """No image field: the image is found by SWE-Gym's naming rule, under which the build tags it (``tags``)."""
    name = "roman-swegym"
    test_file = "tests/test_roman.py"
    cases = ("4-IV", "9-IX", "40-XL", "90-XC", "400-CD", "1994-MCMXCIV")
    return {
        "instance_id": "rollouts-examples__roman-7",
        "repo": "rollouts-examples/roman",
        "base_commit": baseline_commit(name),
        "patch": text(name, "reference.patch"),
        "test_patch": text(name, "test.patch"),
        "problem_statement": text(name, "problem_statement.md"),
        "hints_text": "",
        "created_at": "2026-01-01T00:00:00Z",
        "version": "0.1",
        "FAIL_TO_PASS": [f"{test_file}::test_uses_subtractive_pairs[{case}]" for case in cases],
        "PASS_TO_PASS": [f"{test_file}::test_adds_numerals"]
        + [f"{test_file}::test_rejects_numbers_without_a_numeral[{n}]" for n in ("0", "-1", "4000", "2.5")],
    }


def swe_smith_row() -> dict:
    """The image holds the clean tree; ``patch`` is the bug (its reverse is the fix)."""
    name = "intervals-swesmith"
    test_file = "tests/test_intervals.py"
    mirror = f"rollouts-examples__intervals.{baseline_commit(name)[:8]}"
    return {
        "instance_id": f"{mirror}.func_pm_op_change__q1w2e3r4",
        "repo": f"swesmith/{mirror}",
        "patch": text(name, "bug.patch"),
        "FAIL_TO_PASS": [f"{test_file}::test_joins_intervals_that_touch"],
        "PASS_TO_PASS": [
            f"{test_file}::{t}"
            for t in (
                "test_nothing_to_merge",
                "test_keeps_disjoint_intervals_sorted",
                "test_joins_overlapping_intervals",
                "test_rejects_reversed_intervals",
            )
        ],
        "created_at": "2026-01-01T00:00:00Z",
        "image_name": image(name),
        "problem_statement": text(name, "problem_statement.md"),
    }


def rows() -> list[dict]:
    return [calc_row(), textutil_row(), inventory_row(), slugify_row()]


def reinstall_rows() -> list[dict]:
    return [tempconv_row()]


def swe_rows() -> list[dict]:
    return [swe_rebench_row(), swe_gym_row(), swe_smith_row()]


def main() -> None:
    for file, written in (
        ("dataset.jsonl", rows()),
        ("reinstall_dataset.jsonl", reinstall_rows()),
        ("swe_rows.jsonl", swe_rows()),
    ):
        with open(TASKS / file, "w") as out:
            for row in written:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
