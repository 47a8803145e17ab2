"""Flat SWE-bench rows (``SWE-bench/SWE-bench``, ``_Verified``, ``_Lite``) of the package's own repos.

They share SWE-Gym's columns; what tells them apart is the repo, one of the
twelve SWE-bench was built from. The ``swebench`` package's spec table
grades them; the image is the row's ``image``, else SWE-bench's naming,
``swebench/sweb.eval.x86_64.<instance id, __ as _1776_>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable_rollouts.task_sources.row_shapes.fields import optional_text, text, version
from durable_rollouts.task_sources.row_shapes.swebench_family import INSTANCE_FIELDS, eval_image, swebench_task

NAME = "SWE-bench"
NEEDS = (*INSTANCE_FIELDS, "version")
NAMESPACE = "swebench"
REPOS = frozenset(
    {
        "astropy/astropy",
        "django/django",
        "matplotlib/matplotlib",
        "mwaskom/seaborn",
        "pallets/flask",
        "psf/requests",
        "pydata/xarray",
        "pylint-dev/pylint",
        "pytest-dev/pytest",
        "scikit-learn/scikit-learn",
        "sphinx-doc/sphinx",
        "sympy/sympy",
    }
)


def claims(fields: Mapping[str, Any]) -> bool:
    return "test_patch" in fields and fields.get("repo") in REPOS


def task(fields: Mapping[str, Any]) -> dict[str, Any]:
    image = optional_text(fields, "image") or eval_image(NAMESPACE, text(fields, "instance_id"), "_1776_")
    return swebench_task(fields, image=image, version=version(fields))
