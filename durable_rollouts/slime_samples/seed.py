"""The seed's sample contract: what slime's ``slime.agent.trajectory.fan_out_sample_segments`` made of a trajectory
(slime from ad3b874 to 243773c, June 2026).

* one sample per token segment, in the ledger's order (main, compaction,
  continuation and sub-agent segments alike); the first is the input sample
  itself, the others shallow copies of it;
* every sample's ``reward`` is the trajectory's reward divided by the number
  of segments, so the trajectory counts once in a sum;
* ``status`` completed, ``rollout_id`` = the input's ``index``; metadata adds
  ``instance_id``, ``is_solved``, ``applied_cleanly``, ``elapsed_sec``,
  ``workflow_id``, ``segment_kind``, ``segment_idx``, ``num_segments`` and
  ``weight_version_spans`` to the input's;
* an aborted rollout is the reference's aborted sample (``sample_fields.write_aborted``).
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.slime_samples.options import SampleOptions
from durable_rollouts.slime_samples.sample_fields import (
    ReplayMissing,
    replay_of_segments,
    status,
    version_spans_metadata,
    write_aborted,
    write_replay_placeholders,
    write_tokens,
    write_top_p,
)

NAME = "seed"


def samples(
    sample: Any, result: RolloutResult, trajectory: Trajectory, tokenizer: Any, options: SampleOptions
) -> list[Any]:
    """Of ``options`` only ``replay`` applies (each segment's own nuclei and routing): the seed cut no sample and
    knew no fork threshold."""
    segments = trajectory.segments
    replay = replay_of_segments(trajectory, options.replay)
    fanned = []
    for index, segment in enumerate(segments):
        target = sample if index == 0 else copy.copy(sample)
        write_tokens(target, segment, tokenizer)
        if options.replay.top_p_token_ids:
            write_top_p(target, [replay[index].nucleus(p) for p in range(segment.prompt_length, len(segment.tokens))])
        if (shape := options.replay.routed_experts) is not None:
            if (rows := replay[index].routed) is None:
                raise ReplayMissing(f"segment {index} holds no routed experts")
            target.rollout_routed_experts = rows.astype(np.int32).reshape(-1, shape.layers, shape.top_k)
        target.reward = result.reward / len(segments)
        target.status = status(target, "COMPLETED")
        target.rollout_id = getattr(target, "index", None)
        target.metadata = {
            **(getattr(target, "metadata", None) or {}),
            "instance_id": result.instance_id,
            "is_solved": result.solved,
            "applied_cleanly": result.applied_cleanly,
            "elapsed_sec": result.elapsed_s,
            "workflow_id": result.workflow_id,
            "segment_kind": segment.kind,
            "segment_idx": index,
            "num_segments": len(segments),
            "weight_version_spans": version_spans_metadata(segment),
        }
        fanned.append(target)
    return fanned


def aborted(sample: Any, reason: str, options: SampleOptions | None = None) -> Any:
    write_aborted(sample, reason)
    write_replay_placeholders(sample, (options or SampleOptions()).replay)
    return sample
