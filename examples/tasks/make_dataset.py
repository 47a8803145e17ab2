"""Write ``dataset.jsonl``: one slime-shaped row per example task.

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
        shutil.copytree(TASKS / name / "repo", tree, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".benchmarks"))
        for command in (
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=rollout", "-c", "user.email=rollout@localhost", "commit", "-q", "-m", "baseline"],
        ):
            subprocess.run(["git", *command], cwd=tree, env=env, check=True, capture_output=True)
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree, env=env, check=True, capture_output=True, text=True).stdout.strip()


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
                    [f"{test_file}::{test}" for test in ("test_drops_punctuation", "test_no_separator_at_either_end", "test_folds_accents_to_ascii")]
                ),
                "PASS_TO_PASS": json.dumps(
                    [f"{test_file}::{test}" for test in ("test_lowercases_a_single_word", "test_joins_words_with_dashes", "test_custom_separator")]
                ),
                "install_config": {"python": "3.11", "test_cmd": "pytest --no-header -rA --tb=no -p no:cacheprovider"},
            },
        },
    }


def rows() -> list[dict]:
    return [calc_row(), textutil_row(), inventory_row(), slugify_row()]


def main() -> None:
    with open(TASKS / "dataset.jsonl", "w") as out:
        for row in rows():
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
