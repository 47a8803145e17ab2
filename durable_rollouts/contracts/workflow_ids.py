"""Workflow ids, deterministic per run and sample: starting one again attaches to it instead of running it twice.

The one home of every id the trainer side and the group workflow derive, so
a ``RolloutGroup``'s children keep the ids a flat run gives the same samples.
"""

from __future__ import annotations

import hashlib

from durable_rollouts.contracts.drift_repair import EpisodeInput


def rollout_workflow_id(run_id: str, instance_id: str, sample_index: int, group_index: int) -> str:
    return f"rollout-{run_id}-{instance_id}-{sample_index}-{group_index}"


def episode_workflow_id(run_id: str, episode: EpisodeInput) -> str:
    policies = f"{episode.drift_policy}-{episode.repair_policy}"
    return f"episode-{run_id}-{episode.task_id}-{policies}-{episode.sample_index}-{episode.group_index}"


def group_workflow_id(run_id: str, prompt_key: str, group_index: int) -> str:
    """One ``RolloutGroup`` per (run, prompt, group index); ``prompt_key`` is the instance id or drift task id."""
    return f"group-{run_id}-{prompt_key}-{group_index}"


def refill_workflow_id(first_id: str, attempt: int) -> str:
    """The id of a sample's ``attempt``-th run (2, 3, ...) after infrastructure failures; the first keeps
    ``first_id``."""
    return first_id if attempt == 1 else f"{first_id}-refill{attempt - 1}"


def regrade_workflow_id(regrade_id: str, original_id: str) -> str:
    """One re-grade of one rollout per ``regrade_id``: the same id attaches to that re-grade, a new one grades again."""
    return f"regrade-{regrade_id}-{original_id}"


def prefetch_workflow_id(run_id: str, images: list[str]) -> str:
    """One prefetch per (run, set of images): announcing the same images again attaches to it."""
    digest = hashlib.sha256("\n".join(sorted(set(images))).encode()).hexdigest()[:16]
    return f"prefetch-{run_id}-{digest}"
