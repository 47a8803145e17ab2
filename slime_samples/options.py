"""What a trainer's settings change in the samples a contract writes.

``max_sample_tokens``: slime cuts every sample to the session's ``rollout_max_context_len`` (0: no cut);
``fork_threshold``: slime's ``TrajectoryManager`` threshold, in reply tokens, under which a drift realigns
and an assistant rewrite merges (the reference example reads ``SLIME_FORK_MERGE_MAX_RESPONSE_TOKENS``;
unset, slime's 1024).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from config.settings import SettingsError
from slime_samples.message_tree import DEFAULT_FORK_THRESHOLD

FORK_THRESHOLD_VAR = "SLIME_FORK_MERGE_MAX_RESPONSE_TOKENS"


@dataclass(frozen=True)
class SampleOptions:
    max_sample_tokens: int = 0
    fork_threshold: int = DEFAULT_FORK_THRESHOLD


def sample_options(args: Any, environ: Mapping[str, str] = os.environ) -> SampleOptions:
    """The options of slime's ``args`` (``rollout_max_context_len``) and ``SLIME_FORK_MERGE_MAX_RESPONSE_TOKENS``."""
    raw = environ.get(FORK_THRESHOLD_VAR, "").strip()
    try:
        threshold = int(raw) if raw else DEFAULT_FORK_THRESHOLD
    except ValueError:
        raise SettingsError(f"{FORK_THRESHOLD_VAR}: expected a whole number of tokens, got {raw!r}") from None
    return SampleOptions(max_sample_tokens=int(getattr(args, "rollout_max_context_len", None) or 0), fork_threshold=threshold)
