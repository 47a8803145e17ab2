"""What the log-prob check reads: one ``TrainedSequence`` per sample the trainer trains on.

A sequence holds every token (prompt and response) and, over the response, the loss mask, the rollout log-prob
and the weight version of each token. It is made from a slime sample (an object or its ``to_dict()``: ``tokens``,
``response_length``, ``loss_mask``, ``rollout_log_probs``, ``metadata.weight_version_spans``) or from a trajectory's
``TokenSegment``; a sample whose fields disagree in length is refused with ``SampleError`` naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError, model_validator

from durable_rollouts.contracts.tokens import TokenSegment


class SampleError(ValueError):
    """A sample the check cannot read; the message names the sample and the field."""


class TrainedSequence(BaseModel):
    """``response_start``: where the response begins in ``tokens``; ``loss_mask``, ``rollout_log_probs`` and
    ``versions`` run over the response (``tokens[response_start:]``), one entry per token."""

    name: str
    tokens: list[int]
    response_start: int
    loss_mask: list[int]
    rollout_log_probs: list[float]
    versions: list[str | None]

    @model_validator(mode="after")
    def _aligned(self) -> TrainedSequence:
        response = len(self.tokens) - self.response_start
        for field in ("loss_mask", "rollout_log_probs", "versions"):
            if len(getattr(self, field)) != response:
                raise ValueError(
                    f"{self.name}: {field} has {len(getattr(self, field))} entries for a response of {response} tokens"
                )
        if self.response_start < 1 and any(self.loss_mask):
            raise ValueError(f"{self.name}: a trained first token has no context to be predicted from")
        return self

    def trained(self) -> Iterator[tuple[int, float, str | None]]:
        """``(position in tokens, rollout log-prob, version)`` of every trained token."""
        for offset, (mask, log_prob, version) in enumerate(
            zip(self.loss_mask, self.rollout_log_probs, self.versions, strict=True)
        ):
            if mask:
                yield self.response_start + offset, log_prob, version

    @classmethod
    def from_slime(cls, sample: Any, name: str) -> TrainedSequence:
        """A slime ``Sample`` (or its ``to_dict()``), versions from ``metadata.weight_version_spans``."""
        fields = sample if isinstance(sample, dict) else vars(sample)
        try:
            tokens, length = list(fields["tokens"]), int(fields["response_length"])
            loss_mask, log_probs = list(fields["loss_mask"]), list(fields["rollout_log_probs"])
        except (KeyError, TypeError, ValueError) as error:
            raise SampleError(f"{name}: not a slime sample ({type(error).__name__}: {error})") from None
        versions: list[str | None] = [None] * length
        for span in (fields.get("metadata") or {}).get("weight_version_spans") or []:
            for offset in range(max(span["start"], 0), min(span["end"], length)):
                versions[offset] = span["version"]
        return cls._made(name, tokens, len(tokens) - length, loss_mask, log_probs, versions)

    @classmethod
    def from_segment(cls, segment: TokenSegment, name: str) -> TrainedSequence:
        start = segment.prompt_length
        versions = segment.token_weight_versions()[start:]
        return cls._made(
            name, segment.tokens, start, segment.loss_mask[start:], segment.rollout_log_probs[start:], versions
        )

    @classmethod
    def _made(
        cls,
        name: str,
        tokens: list[int],
        start: int,
        mask: list[int],
        log_probs: list[float],
        versions: list[str | None],
    ) -> TrainedSequence:
        try:
            return cls(
                name=name,
                tokens=tokens,
                response_start=start,
                loss_mask=mask,
                rollout_log_probs=log_probs,
                versions=versions,
            )
        except ValidationError as error:
            first = error.errors()[0]
            cause = first.get("ctx", {}).get("error")  # the validator's own message, which names the sample and field
            raise SampleError(
                str(cause) if cause else f"{name}: {'.'.join(map(str, first['loc']))}: {first['msg']}"
            ) from None
