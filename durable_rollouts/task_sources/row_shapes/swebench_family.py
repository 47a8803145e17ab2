"""What SWE-bench-family rows (SWE-rebench, SWE-Gym, flat SWE-bench) share: the instance fields the ``swebench``
grader reads, the ``/testbed`` workdir of SWE-bench images, and SWE-bench's instance-image naming."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durable_rollouts.task_sources.row_shapes.fields import optional_text, test_list, text

# Where the repo sits in SWE-bench's images, and in SWE-smith's.
SWEBENCH_WORKDIR = "/testbed"
ARCH = "x86_64"
# The fields every SWE-bench-family shape needs, in the order errors name them.
INSTANCE_FIELDS = ("instance_id", "repo", "base_commit", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS")


def eval_image(namespace: str, instance_id: str, separator: str) -> str:
    """``<namespace>/sweb.eval.x86_64.<instance id>``, lowercased, its ``__`` written as ``separator``."""
    return f"{namespace}/sweb.eval.{ARCH}.{instance_id.lower().replace('__', separator)}"


def swebench_task(
    fields: Mapping[str, Any],
    *,
    image: str,
    version: str,
    install_config: dict[str, Any] | None = None,
    environment_setup_commit: str | None = None,
) -> dict[str, Any]:
    """``TaskSpec`` fields of a row graded by the ``swebench`` package; the gold ``patch`` feeds the scripted oracle."""
    statement = fields.get("problem_statement")
    return {
        "instance_id": text(fields, "instance_id"),
        "image": image,
        "workdir": SWEBENCH_WORKDIR,
        "problem_statement": statement if isinstance(statement, str) and statement else None,
        "swebench": {
            "repo": text(fields, "repo"),
            "version": version,
            "base_commit": text(fields, "base_commit"),
            "test_patch": text(fields, "test_patch"),
            "fail_to_pass": test_list(fields, "FAIL_TO_PASS", required=True),
            "pass_to_pass": test_list(fields, "PASS_TO_PASS", required=False),
            "environment_setup_commit": environment_setup_commit or optional_text(fields, "environment_setup_commit"),
            "install_config": install_config,
        },
        "reference_patch": optional_text(fields, "patch"),
    }
