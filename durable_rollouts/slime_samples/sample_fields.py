"""Writing a token sequence into a slime ``Sample``: the fields both sample contracts fill the same way.

Invariants of a written sample (slime's training contract): ``tokens`` is the
whole sequence, ``response_length = len(tokens) - prompt_length``, and
``loss_mask`` / ``rollout_log_probs`` cover exactly the response;
``weight_versions`` has one entry per generate call that sampled tokens of the
sequence and reported a version (the version of that call's last token, which
is what slime appends from each reply's ``meta_info.weight_version``);
``metadata.weight_version_spans`` gives the exact version of every sampled
token as ``{"version", "start", "end"}`` over the response, aligned with
``loss_mask``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from durable_rollouts.contracts.replay import ReplayCapture
from durable_rollouts.contracts.tokens import TokenSegment


def write_tokens(sample: Any, segment: TokenSegment, tokenizer: Any) -> None:
    """Fill ``sample``'s token fields from ``segment`` (its ``prompt_length`` is where the response starts)."""
    response = segment.tokens[segment.prompt_length :]
    sample.tokens = list(segment.tokens)
    sample.response_length = len(response)
    sample.loss_mask = list(segment.loss_mask[segment.prompt_length :])
    sample.rollout_log_probs = list(segment.rollout_log_probs[segment.prompt_length :])
    sample.response = tokenizer.decode(response, skip_special_tokens=False) if tokenizer is not None else ""
    sample.weight_versions = call_weight_versions(segment)


def version_spans_metadata(segment: TokenSegment) -> list[dict[str, Any]]:
    """``segment``'s weight version spans over its response (``metadata.weight_version_spans``)."""
    shift = segment.prompt_length
    return [
        {"version": s.version, "start": s.start - shift, "end": s.end - shift} for s in segment.weight_version_spans
    ]


def call_weight_versions(segment: TokenSegment) -> list[str]:
    """slime's ``Sample.weight_versions``: per generate call of the segment (each a run of sampled tokens), the
    version of its last token when it has one."""
    versions = segment.token_weight_versions()
    return [version for _, end in segment.sampled_runs() if (version := versions[end - 1]) is not None]


def write_untrained(sample: Any) -> Any:
    """The reference example's sample with nothing to train, in place: tokens ``[0, 0]``, one masked response
    token, no versions."""
    sample.tokens = [0, 0]
    sample.response = ""
    sample.response_length = 1
    sample.loss_mask = [0]
    sample.rollout_log_probs = [0.0]
    sample.weight_versions = []
    return sample


def write_aborted(sample: Any, reason: str) -> Any:
    """The reference's aborted shape, in place: ``write_untrained``, reward 0, status aborted,
    ``metadata.abort_reason``."""
    write_untrained(sample)
    sample.reward = 0.0
    sample.status = status(sample, "ABORTED")
    sample.metadata = {**(getattr(sample, "metadata", None) or {}), "abort_reason": reason}
    return sample


def status(sample: Any, name: str) -> Any:
    """``Sample.Status.<name>`` for a slime sample, the lower-case name for a plain one."""
    status_enum = getattr(type(sample), "Status", None)
    return getattr(status_enum, name) if status_enum is not None else name.lower()


class ReplayMissing(ValueError):
    """The trainer replays data the rollout did not capture (a worker or server that did not provide it)."""


def replay_of_segments(trajectory: Any, capture: ReplayCapture) -> list[Any]:
    """``trajectory.replay`` when ``capture`` asks for anything (``ReplayMissing`` when it holds none)."""
    if capture.any and not trajectory.replay:
        raise ReplayMissing(
            "the rollout carries no replay data (top-p nuclei / routed experts) though the trainer replays it"
        )
    return trajectory.replay


def write_top_p(sample: Any, nuclei: list[np.ndarray]) -> None:
    """``rollout_top_p_token_ids`` / ``_offsets`` from one nucleus per response position (empty for context)."""
    lengths = np.array([len(n) for n in nuclei], dtype=np.int64)
    sample.rollout_top_p_token_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    sample.rollout_top_p_token_ids = np.concatenate(nuclei).astype(np.int32) if nuclei else np.empty(0, dtype=np.int32)


def write_replay_placeholders(sample: Any, replay: ReplayCapture) -> None:
    """Replay fields for a sample with nothing to train, in the shapes slime checks on every sample: empty nuclei
    for each response position; one routing row per position but the last, each layer routed to experts
    ``0..top_k-1`` (distinct, as a router picks them, and not all zero, which slime refuses)."""
    if replay.top_p_token_ids:
        write_top_p(sample, [np.empty(0, dtype=np.int32)] * max(sample.response_length, 0))
    if replay.routed_experts is not None:
        shape = replay.routed_experts
        row = np.tile(np.arange(shape.top_k, dtype=np.int32), shape.layers).reshape(shape.layers, shape.top_k)
        sample.rollout_routed_experts = np.broadcast_to(
            row, (max(len(sample.tokens) - 1, 0), shape.layers, shape.top_k)
        ).copy()
