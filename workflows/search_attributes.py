"""Search attributes the rollout workflows publish, so operators can filter in the UI and CLI.

Register them once per namespace (the worker does it at start-up through the
operator service; on a managed cluster: ``temporal operator search-attribute
create --name RolloutStage --type Keyword`` and so on for each entry below).
Upserting an unregistered attribute would fail workflow tasks in a loop.
"""

from temporalio.common import SearchAttributeKey

INSTANCE = SearchAttributeKey.for_keyword("RolloutInstance")
STAGE = SearchAttributeKey.for_keyword("RolloutStage")
ATTEMPT = SearchAttributeKey.for_int("RolloutAttempt")
HOST = SearchAttributeKey.for_keyword("RolloutHost")
TURNS = SearchAttributeKey.for_int("RolloutTurns")
REWARD = SearchAttributeKey.for_float("RolloutReward")
SOLVED = SearchAttributeKey.for_bool("RolloutSolved")
ABORT_REASON = SearchAttributeKey.for_keyword("RolloutAbortReason")
POLICY = SearchAttributeKey.for_keyword("RolloutPolicy")
# "<oldest>..<newest>" weight version of the agent's sampled tokens so far (set once a turn reports one).
WEIGHT_VERSIONS = SearchAttributeKey.for_keyword("RolloutWeightVersions")

# A RolloutGroup's status (running, then GroupResult.status) and its valid samples so far.
GROUP_STATUS = SearchAttributeKey.for_keyword("RolloutGroupStatus")
GROUP_VALID = SearchAttributeKey.for_int("RolloutGroupValid")

ALL = [INSTANCE, STAGE, ATTEMPT, HOST, TURNS, REWARD, SOLVED, ABORT_REASON, POLICY, WEIGHT_VERSIONS, GROUP_STATUS, GROUP_VALID]
