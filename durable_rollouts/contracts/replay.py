"""What a trainer replays besides log-probs, and the per-token data a session keeps for it.

slime asks SGLang for two such things (``shared/SGLANG_NOTES.md``): with ``--rollout-top-p`` below 1 the
top-p nucleus each sampled token was drawn from (``rollout_top_p_token_ids`` / ``_offsets``), and with
``--use-rollout-routing-replay`` the experts every position was routed to, per MoE layer
(``rollout_routed_experts``, ``tokens - 1`` rows of ``layers x top_k``).

Invariants of a ``SegmentReplay`` (one per token segment, aligned with it):

* ``top_p_offsets`` has ``len(tokens) + 1`` entries, starts at 0, never decreases and ends at
  ``len(top_p_ids)``; position ``i``'s nucleus is ``top_p_ids[offsets[i]:offsets[i + 1]]``, empty for every
  position that was not sampled (context);
* ``routed`` has one row per position from 0 on, ``layers * top_k`` expert ids each, as the policy server
  reported them for the call that first processed that position; the segment's last token, never fed
  back, has none, so there are ``len(tokens) - 1`` rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:  # numpy stays out of the workflows' sandbox, which imports these contracts
    import numpy as np


class RoutedExpertsShape(BaseModel):
    """An MoE policy's routing: ``layers`` rows per position (slime's ``--num-layers``, every layer, dense ones
    included, as SGLang reports them) of ``top_k`` experts (``--moe-router-topk``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    layers: int = Field(ge=1)
    top_k: int = Field(ge=1)

    @property
    def width(self) -> int:
        return self.layers * self.top_k


class ReplayCapture(BaseModel):
    """What a session asks the policy server for on every call, for the trainer to replay."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    top_p_token_ids: bool = False
    routed_experts: RoutedExpertsShape | None = None

    @property
    def any(self) -> bool:
        return self.top_p_token_ids or self.routed_experts is not None


class SegmentReplay:
    """One segment's replay data (module docstring); a field is None when the session did not capture it.
    A plain class, not a dataclass: the pydantic results that carry it take it as it is, fields unread."""

    __slots__ = ("top_p_ids", "top_p_offsets", "routed")

    def __init__(
        self,
        top_p_ids: np.ndarray | None = None,
        top_p_offsets: np.ndarray | None = None,
        routed: np.ndarray | None = None,
    ):
        self.top_p_ids, self.top_p_offsets, self.routed = top_p_ids, top_p_offsets, routed

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SegmentReplay):
            return NotImplemented
        return all(
            _same(a, b)
            for a, b in (
                (self.top_p_ids, other.top_p_ids),
                (self.top_p_offsets, other.top_p_offsets),
                (self.routed, other.routed),
            )
        )

    def nucleus(self, position: int) -> np.ndarray:
        """The top-p ids of ``position`` (empty for context)."""
        assert self.top_p_ids is not None and self.top_p_offsets is not None
        return self.top_p_ids[self.top_p_offsets[position] : self.top_p_offsets[position + 1]]


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    import numpy as np

    return (a is None and b is None) or (
        a is not None and b is not None and a.shape == b.shape and bool(np.array_equal(a, b))
    )
