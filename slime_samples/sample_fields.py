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

from contracts.rollout import TokenSegment


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
    return [{"version": s.version, "start": s.start - shift, "end": s.end - shift} for s in segment.weight_version_spans]


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
