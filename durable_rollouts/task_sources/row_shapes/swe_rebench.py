"""SWE-rebench rows (``nebius/SWE-rebench``): SWE-bench instances that carry their own ``install_config``.

Graded by the ``swebench`` package with the row's ``install_config`` as the
repo's test spec, cleaned as SWE-rebench's harness fork cleans it: keys whose
value is null are dropped, ``test_cmd`` and ``install`` run under
``LANG=C.UTF-8 LC_ALL=C.UTF-8``, and the environment commit is the base
commit. The config's ``log_parser`` names one of the package's Python parsers
(``parse_log_pytest`` or ``pytest``). The image is the row's
``docker_image``, else SWE-rebench's naming:
``swerebench/sweb.eval.x86_64.<instance id, __ as _1776_>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable_rollouts.task_sources.row_shapes.fields import (
    ShapeProblem,
    json_object,
    optional_text,
    present,
    text,
    version,
)
from durable_rollouts.task_sources.row_shapes.swebench_family import INSTANCE_FIELDS, eval_image, swebench_task

NAME = "SWE-rebench"
NEEDS = (*INSTANCE_FIELDS, "install_config")
NAMESPACE = "swerebench"
LOCALE = "LANG=C.UTF-8 LC_ALL=C.UTF-8 "
# A row without a version still needs one: the package files the install_config under repo + version.
UNVERSIONED = "0"


def claims(fields: Mapping[str, Any]) -> bool:
    return "install_config" in fields or "docker_image" in fields


def install_config(fields: Mapping[str, Any]) -> dict[str, Any]:
    config = {key: value for key, value in json_object(fields, "install_config").items() if value is not None}
    if not isinstance(config.get("test_cmd"), str) or not config["test_cmd"].strip():
        raise ShapeProblem("install_config.test_cmd", "missing: the command that runs the repo's tests")
    config["test_cmd"] = LOCALE + config["test_cmd"]
    if isinstance(config.get("install"), str):
        config["install"] = LOCALE + config["install"]
    return config


def task(fields: Mapping[str, Any]) -> dict[str, Any]:
    image = optional_text(fields, "docker_image") or eval_image(NAMESPACE, text(fields, "instance_id"), "_1776_")
    return swebench_task(
        fields,
        image=image,
        version=version(fields) if present(fields, "version") else UNVERSIONED,
        install_config=install_config(fields),
        environment_setup_commit=optional_text(fields, "base_commit"),
    )
