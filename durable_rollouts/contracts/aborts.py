"""Why a rollout ended without a sample: the closed set of abort reasons and the two open forms.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

import re
from enum import StrEnum


class AbortReason(StrEnum):
    """The fixed reasons a workflow ends ``aborted`` with (both workflows; docs/groups.md's table classifies them).

    ``abort_reason`` also carries open-ended forms, which ``is_documented_abort_reason``
    recognises: ``exception:<Type>`` (an activity failure no table classifies;
    ``exception:Timeout:<KIND>`` for a timeout) and ``invalid_row:<field>`` (a
    starter ``failed`` line). Two more are open by design and not checked: the
    reason an operator gives to ``abort`` (``starter.py cancel --reason``;
    ``cancelled`` when none) and the starter's own ``failed`` reasons
    (``durable_rollouts.trainer_client.workflow_runs``).
    """

    WALL_CLOCK_TIMEOUT = "wall_clock_timeout"
    CANCELLED = "cancelled"
    # rollouts
    MISSING_IMAGE_OR_WORKDIR = "missing_image_or_workdir"
    # the task image is in no registry this host can reach by its name (or absent with pulls off)
    IMAGE_NOT_FOUND = "image_not_found"
    REGISTRY_AUTH_FAILED = "registry_auth_failed"
    REGISTRY_UNAVAILABLE = "registry_unavailable"
    SANDBOX_BOOT_FAILED = "sandbox_boot_failed"
    NOT_EVALUABLE = "not_evaluable"
    NO_GRADER = "no_grader"
    NO_HEALTHY_HOST = "no_healthy_host"
    ADAPTER_SESSION_EMPTY = "adapter_session_empty"
    ADAPTER_SESSION_LOST = "adapter_session_lost"
    # drift -> repair episodes
    UNKNOWN_DRIFT_REWARD = "unknown_drift_reward"
    UNKNOWN_TASK = "unknown_task"
    NO_DRIFT = "no_drift"
    NO_POLICY_SERVER = "no_policy_server"
    POLICY_ERROR = "policy_error"
    SANDBOX_FAILED = "sandbox_failed"
    # rollouts, with a staleness bound whose policy is ``drop``
    STALE_POLICY = "stale_policy"
    # a group's sample stopped because its batch was full without it (``durable_rollouts.contracts.rollout_group``)
    STRAGGLER_CUT = "straggler_cut"


EXCEPTION_PREFIX = "exception:"


INVALID_ROW_PREFIX = "invalid_row:"


_OPEN_FORM = re.compile(rf"^({EXCEPTION_PREFIX}|{INVALID_ROW_PREFIX})[A-Za-z_][\w.:]*$")


def exception_reason(type_name: str) -> str:
    """The reason of an unclassified activity failure: ``exception:<Type>``."""
    return f"{EXCEPTION_PREFIX}{type_name}"


def is_documented_abort_reason(reason: str) -> bool:
    """A fixed ``AbortReason`` or one of the prefixed forms with a name after the prefix."""
    return reason in AbortReason.__members__.values() or bool(_OPEN_FORM.match(reason))
