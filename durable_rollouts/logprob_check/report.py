"""What the log-prob check says: how far the rollout's log-probs are from the trainer's, and where they part first."""

from __future__ import annotations

from pydantic import BaseModel

DEFAULT_THRESHOLD = 1e-3


class Offender(BaseModel):
    """A trained token whose |Δ| passed the threshold: where it is, what it is, and both log-probs."""

    sample: str
    position: int  # in the sample's tokens
    token_id: int
    text: str
    version: str | None
    rollout_log_prob: float
    trainer_log_prob: float

    @property
    def delta(self) -> float:
        return abs(self.rollout_log_prob - self.trainer_log_prob)


class VersionStats(BaseModel):
    version: str | None
    checkpoint: str
    tokens: int
    max_abs_delta: float


class LogprobReport(BaseModel):
    """``tokens``: trained tokens checked; ``over``: those with |Δ| > ``threshold``; ``first_offender``: the first of
    them in sample order, then position."""

    threshold: float = DEFAULT_THRESHOLD
    samples: int = 0
    tokens: int = 0
    max_abs_delta: float = 0.0
    mean_abs_delta: float = 0.0
    over: int = 0
    first_offender: Offender | None = None
    by_version: list[VersionStats] = []

    @property
    def passed(self) -> bool:
        return self.tokens > 0 and self.over == 0

    def lines(self) -> list[str]:
        head = (
            f"log-prob check: {self.tokens} trained tokens in {self.samples} samples; max |Δ| "
            f"{self.max_abs_delta:.3g}, "
            f"mean |Δ| {self.mean_abs_delta:.3g}; {self.over} over {self.threshold:g}: "
            f"{'PASS' if self.passed else 'FAIL'}"
        )
        out = [head]
        out += [
            f"  version {v.version!s}: {v.tokens} tokens against {v.checkpoint}, max |Δ| {v.max_abs_delta:.3g}"
            for v in self.by_version
        ]
        if (first := self.first_offender) is not None:
            out.append(
                f"  first offender: sample {first.sample}, position {first.position}, token {first.token_id} "
                f"{first.text!r}, "
                f"version {first.version}: rollout {first.rollout_log_prob:.6f} vs trainer "
                f"{first.trainer_log_prob:.6f} (|Δ| {first.delta:.3g})"
            )
        if self.tokens == 0:
            out.append("  no trained token to check")
        return out
