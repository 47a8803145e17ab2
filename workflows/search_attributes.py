"""Search attributes the rollout workflows publish, so operators can filter in the UI and CLI.

Register them once per namespace (the worker does it at start-up through the
operator service; on a managed cluster: ``temporal operator search-attribute
create --name RolloutStage --type Keyword`` and so on for each entry below).
Upserting an unregistered attribute would fail workflow tasks in a loop.
"""

from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from durable_rollouts.contracts import telemetry_names as names

INSTANCE = SearchAttributeKey.for_keyword(names.INSTANCE_ATTRIBUTE)
STAGE = SearchAttributeKey.for_keyword(names.STAGE_ATTRIBUTE)
ATTEMPT = SearchAttributeKey.for_int(names.ATTEMPT_ATTRIBUTE)
HOST = SearchAttributeKey.for_keyword(names.HOST_ATTRIBUTE)
TURNS = SearchAttributeKey.for_int(names.TURNS_ATTRIBUTE)
REWARD = SearchAttributeKey.for_float(names.REWARD_ATTRIBUTE)
SOLVED = SearchAttributeKey.for_bool(names.SOLVED_ATTRIBUTE)
ABORT_REASON = SearchAttributeKey.for_keyword(names.ABORT_REASON_ATTRIBUTE)
POLICY = SearchAttributeKey.for_keyword(names.POLICY_ATTRIBUTE)
# "<oldest>..<newest>" weight version of the agent's sampled tokens so far (set once a turn reports one).
WEIGHT_VERSIONS = SearchAttributeKey.for_keyword(names.WEIGHT_VERSIONS_ATTRIBUTE)

# A RolloutGroup's status (running, then GroupResult.status) and its valid samples so far.
GROUP_STATUS = SearchAttributeKey.for_keyword(names.GROUP_STATUS_ATTRIBUTE)
GROUP_VALID = SearchAttributeKey.for_int(names.GROUP_VALID_ATTRIBUTE)

ALL: list[SearchAttributeKey[Any]] = [
    INSTANCE,
    STAGE,
    ATTEMPT,
    HOST,
    TURNS,
    REWARD,
    SOLVED,
    ABORT_REASON,
    POLICY,
    WEIGHT_VERSIONS,
    GROUP_STATUS,
    GROUP_VALID,
]
