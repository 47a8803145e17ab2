"""SWE-Gym rows (``SWE-Gym/SWE-Gym``): SWE-bench instances of the repos SWE-Gym adds, without an image field.

The image follows SWE-Gym's published naming,
``xingyaoww/sweb.eval.x86_64.<instance id, __ as _s_>``. The rows carry no
test spec and the ``swebench`` package knows none of SWE-Gym's repos, so the
test command is the one SWE-Gym's harness fork uses for the repo
(``TEST_COMMANDS``; ``pytest -rA`` for a repo it does not list), given to the
``swebench`` grader as the row's ``install_config`` with the pytest log
parser; nothing is reinstalled at grading (the image is installed already).
A row's own ``install_config`` is read by the SWE-rebench shape instead, a
row of one of SWE-bench's own repos by the SWE-bench shape.
``python/mypy`` rows are refused: the fork selects mypy's data-driven cases
with ``pytest -k <case names>``, which this reader does not build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable_rollouts.task_sources.row_shapes import swe_bench
from durable_rollouts.task_sources.row_shapes.fields import ShapeProblem, text, version
from durable_rollouts.task_sources.row_shapes.swebench_family import INSTANCE_FIELDS, eval_image, swebench_task

NAME = "SWE-Gym"
NEEDS = (*INSTANCE_FIELDS, "version")
NAMESPACE = "xingyaoww"
DEFAULT_TEST_COMMAND = "pytest -rA"
# repo -> the test command of SWE-Gym's harness fork (the same for every version of the repo).
TEST_COMMANDS = {
    "getmoto/moto": "pytest -n0 -rA",
    "conan-io/conan": "pytest -n0 -rA",
    "dask/dask": "pytest -n0 -rA --color=no",
    "Project-MONAI/MONAI": "pytest -rA",
    "iterative/dvc": "pytest -rA",
    "bokeh/bokeh": "pytest -rA -n0",
    "modin-project/modin": "pytest -n0 -rA",
    "pydantic/pydantic": "pytest -rA --tb=short -vv -o console_output_style=classic --no-header",
    "pandas-dev/pandas": "pytest -rA --tb=long",
    "facebookresearch/hydra": "pytest -rA --tb=long",
}
# repo -> commands the fork runs before the tests.
EVAL_COMMANDS = {"conan-io/conan": ["export PYTHONPATH=${PYTHONPATH:-}:$(pwd)"]}
UNSUPPORTED = {
    "python/mypy": "mypy's data-driven cases are selected with `pytest -k <case names>`, which this reader does not "
    "build"
}


def claims(fields: Mapping[str, Any]) -> bool:
    return "test_patch" in fields and fields.get("repo") not in swe_bench.REPOS


def install_config(repo: str) -> dict[str, Any]:
    config: dict[str, Any] = {"test_cmd": TEST_COMMANDS.get(repo, DEFAULT_TEST_COMMAND), "log_parser": "pytest"}
    if repo in EVAL_COMMANDS:
        config["eval_commands"] = EVAL_COMMANDS[repo]
    return config


def task(fields: Mapping[str, Any]) -> dict[str, Any]:
    repo = text(fields, "repo")
    if repo in UNSUPPORTED:
        raise ShapeProblem("repo", f"{repo} rows are not supported: {UNSUPPORTED[repo]}")
    return swebench_task(
        fields,
        image=eval_image(NAMESPACE, text(fields, "instance_id"), "_s_"),
        version=version(fields),
        install_config=install_config(repo),
    )
