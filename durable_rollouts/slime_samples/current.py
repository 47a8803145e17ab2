"""Today's slime sample contract: what ``TrajectoryManager.get_trajectory`` (``slime/agent/trajectory.py``)
makes of a session, as the reference example (``examples/coding_agent_rl/generate.py``) hands it to slime.

* the samples are ``message_tree.sequences_of`` the trajectory, with slime's ``fork_threshold`` and its cut to
  ``max_sample_tokens``;
* every sample is a fresh ``Sample`` of the input's class copying only ``COPIED_FIELDS``, with the token fields as
  slime's ``to_sample`` writes them, the trajectory's full ``reward`` and status completed;
* metadata: the input's, then what the example adds, slime's flags and the project's own keys;
* with ``options.replay``: ``rollout_top_p_token_ids`` / ``_offsets`` over the response (a trained token's nucleus
  from the segment it was sampled in, empty elsewhere) and ``rollout_routed_experts`` (``tokens - 1`` rows of
  ``layers x top_k``: the routing of the sequence's last call, whose prompt and reply the sequence is);
* an aborted rollout is the example's aborted sample with ``remove_sample=True`` (and replay placeholders).

docs/slime.md, "Sample contracts", sets this contract beside the seed's, field by field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from durable_rollouts.contracts.replay import ReplayCapture, SegmentReplay
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.weight_versions import spans_from_runs
from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.slime_samples.message_tree import TrainingSequence, sequences_of
from durable_rollouts.slime_samples.options import SampleOptions
from durable_rollouts.slime_samples.sample_fields import (
    ReplayMissing,
    replay_of_segments,
    status,
    write_aborted,
    write_replay_placeholders,
    write_top_p,
)

NAME = "current"
COPIED_FIELDS = ("index", "group_index", "rollout_id", "prompt", "label")


def samples(
    sample: Any, result: RolloutResult, trajectory: Trajectory, tokenizer: Any, options: SampleOptions
) -> list[Any]:
    sequences = sequences_of(
        trajectory.segments, trajectory.turn_log, options.fork_threshold, options.max_sample_tokens
    )
    kinds = [segment.kind for segment in trajectory.segments]
    replay = replay_of_segments(trajectory, options.replay)
    out = []
    for index, sequence in enumerate(sequences):
        target = fresh_sample(sample)
        write_sequence(target, sequence, tokenizer)
        write_replay(target, sequence, replay, options.replay)
        target.reward = result.reward
        target.status = status(target, "COMPLETED")
        target.metadata = {
            **(getattr(sample, "metadata", None) or {}),
            "grading_solved": result.solved,
            "instance_id": result.instance_id,
            "agent_exit_code": result.agent.exit_code if result.agent is not None else None,
            "truncated": sequence.truncated,
            "use_tool": sequence.use_tool,
            "ill_formed": sequence.ill_formed,
            "workflow_id": result.workflow_id,
            "applied_cleanly": result.applied_cleanly,
            "elapsed_sec": result.elapsed_s,
            "finish_reason": sequence.last_turn.finish_reason,
            "segment_kinds": [kinds[s] for s in sequence.segments],
            "sample_idx": index,
            "num_samples": len(sequences),
            "weight_version_spans": version_spans(sequence),
        }
        out.append(target)
    return out


def write_sequence(target: Any, sequence: TrainingSequence, tokenizer: Any) -> None:
    """The token fields as slime's ``_SampleBuilder.to_sample`` and ``finish_session`` write them."""
    start = sequence.response_start
    target.tokens = sequence.tokens
    target.response_length = len(sequence.loss_mask) - start
    target.loss_mask = sequence.loss_mask[start:]
    target.rollout_log_probs = sequence.log_probs[start:]
    length = target.response_length
    target.response = (
        tokenizer.decode(sequence.tokens[-length:], skip_special_tokens=False)
        if tokenizer is not None and length > 0
        else ""
    )
    target.weight_versions = call_versions(sequence)


def write_replay(target: Any, sequence: TrainingSequence, replay: list[SegmentReplay], capture: ReplayCapture) -> None:
    """The replay fields ``capture`` asks for (module docstring)."""
    if capture.top_p_token_ids:
        start = sequence.response_start
        empty = np.empty(0, dtype=np.int32)
        nuclei = [empty] * max(len(sequence.loss_mask) - start, 0)
        for origin in sequence.origins:
            for i in range(origin.length):
                position = origin.start + i
                if position >= start and sequence.loss_mask[position]:
                    nuclei[position - start] = replay[origin.segment].nucleus(origin.at + i)
        write_top_p(target, nuclei)
    if capture.routed_experts is not None:
        shape = capture.routed_experts
        rows = replay[sequence.last_turn.segment].routed
        if rows is None or len(rows) < len(sequence.tokens) - 1:
            raise ReplayMissing("the trajectory holds no routed experts for the sequence's last call")
        target.rollout_routed_experts = (
            rows[: len(sequence.tokens) - 1].astype(np.int32).reshape(-1, shape.layers, shape.top_k)
        )


def call_versions(sequence: TrainingSequence) -> list[str]:
    """Per run of trained response tokens (one generate call's), the version of its last token, when known."""
    out = []
    mask, versions = sequence.loss_mask, sequence.versions
    for position in range(sequence.response_start, len(mask)):
        ends_run = mask[position] and (position + 1 == len(mask) or not mask[position + 1])
        if ends_run and (version := versions[position]) is not None:
            out.append(version)
    return out


def version_spans(sequence: TrainingSequence) -> list[dict[str, Any]]:
    """The weight version of every trained token as ``{"version", "start", "end"}`` spans over the response."""
    start = sequence.response_start
    runs = [
        (p - start, p - start + 1, sequence.versions[p])
        for p in range(start, len(sequence.loss_mask))
        if sequence.loss_mask[p]
    ]
    return [span.model_dump() for span in spans_from_runs(runs)]


def fresh_sample(sample: Any) -> Any:
    """A new sample of ``sample``'s class with only ``COPIED_FIELDS`` taken over (``rollout_id`` falls back to
    ``index``)."""
    target = type(sample)()
    for name in COPIED_FIELDS:
        setattr(target, name, getattr(sample, name, None))
    if target.rollout_id is None:
        target.rollout_id = target.index
    return target


def aborted(sample: Any, reason: str, options: SampleOptions | None = None) -> Any:
    write_aborted(sample, reason)
    sample.remove_sample = True
    write_replay_placeholders(sample, (options or SampleOptions()).replay)
    return sample
