"""Today's slime sample contract (its main branch since June 2026: ``TrajectoryManager.get_trajectory``).

* one sample per training sequence of ``trajectory_chains.linearise``: a
  compaction call is appended to the conversation it summarises, every other
  segment (main, post-compaction continuation, sub-agent) is a sample of its
  own, and a drift fork is one more;
* every sample is a fresh ``Sample`` of the input's class copying only its
  ``index``, ``group_index``, ``rollout_id`` (the input's, else its
  ``index``: slime averages the loss within one ``rollout_id``), ``prompt``
  and ``label``; its metadata is a new dict starting from the input's;
* every sample carries the trajectory's full ``reward`` (slime's reducer
  averages within the rollout, so splitting it would count the rollout
  ``1/k`` times), ``status`` completed;
* metadata adds ``instance_id``, ``workflow_id``, ``grading_solved``,
  ``applied_cleanly``, ``elapsed_sec``, ``agent_exit_code``,
  ``finish_reason`` (the sequence's last turn's), ``truncated`` (that turn
  hit its token limit), ``use_tool`` / ``ill_formed`` (some turn called a
  tool / had an ill-formed tool call), ``segment_kinds``, ``sample_idx``,
  ``num_samples``, ``weight_version_spans`` and the drift keys
  (``tito_dropped_*``, ``tito_drift_fork*``) where they apply;
* an aborted rollout is the reference's aborted sample with
  ``remove_sample=True``, so slime leaves it out of the loss.
"""

from __future__ import annotations

from typing import Any

from contracts.rollout import RolloutResult, TokenSegment
from slime_samples.sample_fields import status, version_spans_metadata, write_aborted, write_tokens
from slime_samples.trajectory_chains import DRIFT_FORK_MIN_LOSS_TOKENS, linearise

NAME = "current"
COPIED_FIELDS = ("index", "group_index", "rollout_id", "prompt", "label")


def samples(
    sample: Any, result: RolloutResult, segments: list[TokenSegment], tokenizer: Any, fork_min_loss_tokens: int = DRIFT_FORK_MIN_LOSS_TOKENS
) -> list[Any]:
    chains = linearise(segments, fork_min_loss_tokens)
    out = []
    for index, chain in enumerate(chains):
        sequence = chain.segment()
        target = fresh_sample(sample)
        write_tokens(target, sequence, tokenizer)
        target.reward = result.reward
        target.status = status(target, "COMPLETED")
        target.metadata = {
            **(getattr(sample, "metadata", None) or {}),
            "instance_id": result.instance_id,
            "workflow_id": result.workflow_id,
            "grading_solved": result.solved,
            "applied_cleanly": result.applied_cleanly,
            "elapsed_sec": result.elapsed_s,
            "agent_exit_code": result.agent.exit_code if result.agent is not None else None,
            "finish_reason": sequence.finish_reason,
            "truncated": sequence.finish_reason == "length",
            "use_tool": sequence.tool_call_turns > 0,
            "ill_formed": sequence.ill_formed_turns > 0,
            "segment_kinds": list(chain.kinds),
            "sample_idx": index,
            "num_samples": len(chains),
            "weight_version_spans": version_spans_metadata(sequence),
            **chain.notes,
        }
        out.append(target)
    return out


def fresh_sample(sample: Any) -> Any:
    """A new sample of ``sample``'s class with only ``COPIED_FIELDS`` taken over (``rollout_id`` falls back to
    ``index``)."""
    target = type(sample)()
    for name in COPIED_FIELDS:
        setattr(target, name, getattr(sample, name, None))
    if target.rollout_id is None:
        target.rollout_id = target.index
    return target


def aborted(sample: Any, reason: str) -> Any:
    write_aborted(sample, reason)
    sample.remove_sample = True
    return sample
