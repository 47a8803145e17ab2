"""What a trainer's settings change in the samples a contract writes.

``max_sample_tokens``: slime cuts every sample to the session's ``rollout_max_context_len`` (0: no cut);
``fork_threshold``: slime's ``TrajectoryManager`` threshold, in reply tokens, under which a drift realigns
and an assistant rewrite merges (the reference example reads ``SLIME_FORK_MERGE_MAX_RESPONSE_TOKENS``;
unset, slime's 1024); ``replay``: what the trainer replays (``durable_rollouts.contracts.replay``), from slime's
``--rollout-top-p`` (below 1: top-p nuclei) and ``--use-rollout-routing-replay`` (routed experts, shaped by
``--num-layers`` and ``--moe-router-topk``), so every sample, an aborted one included, carries the fields
slime checks then.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from durable_rollouts.config.settings import SettingsError
from durable_rollouts.contracts.replay import ReplayCapture, RoutedExpertsShape
from durable_rollouts.slime_samples.message_tree import DEFAULT_FORK_THRESHOLD

FORK_THRESHOLD_VAR = "SLIME_FORK_MERGE_MAX_RESPONSE_TOKENS"


@dataclass(frozen=True)
class SampleOptions:
    max_sample_tokens: int = 0
    fork_threshold: int = DEFAULT_FORK_THRESHOLD
    replay: ReplayCapture = ReplayCapture()


def sample_options(args: Any, environ: Mapping[str, str] = os.environ) -> SampleOptions:
    """The options of slime's ``args`` (``rollout_max_context_len``) and ``SLIME_FORK_MERGE_MAX_RESPONSE_TOKENS``."""
    raw = environ.get(FORK_THRESHOLD_VAR, "").strip()
    try:
        threshold = int(raw) if raw else DEFAULT_FORK_THRESHOLD
    except ValueError:
        raise SettingsError(f"{FORK_THRESHOLD_VAR}: expected a whole number of tokens, got {raw!r}") from None
    return SampleOptions(
        max_sample_tokens=int(getattr(args, "rollout_max_context_len", None) or 0),
        fork_threshold=threshold,
        replay=replay_of(args),
    )


def replay_of(args: Any) -> ReplayCapture:
    """What slime's ``args`` replay; ``SettingsError`` names a routing-replay flag it needs and lacks."""
    top_p = float(getattr(args, "rollout_top_p", None) or 1.0) < 1.0
    if not getattr(args, "use_rollout_routing_replay", False):
        return ReplayCapture(top_p_token_ids=top_p)
    layers, top_k = getattr(args, "num_layers", None), getattr(args, "moe_router_topk", None)
    if not layers or not top_k:
        raise SettingsError(
            "--use-rollout-routing-replay needs --num-layers and --moe-router-topk (the routed experts' shape)"
        )
    return ReplayCapture(top_p_token_ids=top_p, routed_experts=RoutedExpertsShape(layers=int(layers), top_k=int(top_k)))
