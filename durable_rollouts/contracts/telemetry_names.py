"""The names operators see, shared by the code that records them (the workflows) and the code that reads or
serves them (the worker's activities): Prometheus metric names and search attribute names. Plain strings, so
every layer may import them; the workflows build their typed search attribute keys from these."""

# Metrics the rollout and group workflows record (``workflows.rollout_metrics``).
FINISHED = "rollout_finished_total"
STAGE_DURATION = "rollout_stage_duration_seconds"
TURNS = "rollout_turns_total"
SAMPLED_TOKENS = "rollout_sampled_tokens_total"
GRADED = "rollout_graded_total"
GROUPS_FINISHED = "rollout_groups_finished_total"
GROUP_SAMPLES = "rollout_group_samples_total"
GROUP_REFILLS = "rollout_group_refills_total"
DISCARDED_RUNS = "rollout_discarded_runs_total"
DISCARDED_TURNS = "rollout_discarded_turns_total"
DISCARDED_TOKENS = "rollout_discarded_sampled_tokens_total"

# Search attributes (``workflows.search_attributes``), registered once per namespace.
INSTANCE_ATTRIBUTE = "RolloutInstance"
STAGE_ATTRIBUTE = "RolloutStage"
ATTEMPT_ATTRIBUTE = "RolloutAttempt"
HOST_ATTRIBUTE = "RolloutHost"
TURNS_ATTRIBUTE = "RolloutTurns"
REWARD_ATTRIBUTE = "RolloutReward"
SOLVED_ATTRIBUTE = "RolloutSolved"
ABORT_REASON_ATTRIBUTE = "RolloutAbortReason"
POLICY_ATTRIBUTE = "RolloutPolicy"
WEIGHT_VERSIONS_ATTRIBUTE = "RolloutWeightVersions"
GROUP_STATUS_ATTRIBUTE = "RolloutGroupStatus"
GROUP_VALID_ATTRIBUTE = "RolloutGroupValid"
