"""A growing segment's replay data (``durable_rollouts.contracts.replay``): top-p nuclei per position, routed-expert
rows per position.

Kept beside a ledger segment and changed with it: ``truncate(keep)`` when a turn keeps the segment's first
``keep`` tokens, ``extend`` with the turn's prompt tail (context: empty nuclei) and its output (the call's
nuclei), and the call's routing rows for the positions past those held. Rows held for a position stay:
they came from the call that first processed it, whose cache a later call of the same prefix reuses.
Buffers are typed arrays (nuclei int32, rows uint16), as the ledger's own.
"""

from __future__ import annotations

import base64
from array import array

import numpy as np

from durable_rollouts.contracts.replay import SegmentReplay


class ReplayMismatch(AssertionError):
    """Replay data that does not line up with the segment's tokens."""


class ReplayStore:
    def __init__(self, top_p: bool, routed_width: int):
        self.top_p_ids: array | None = array("i") if top_p else None
        self.top_p_offsets: array | None = array("i", [0]) if top_p else None
        self.width = routed_width
        self.routed: array | None = array("H") if routed_width else None

    @property
    def routed_rows(self) -> int:
        return len(self.routed) // self.width if self.routed is not None else 0

    def truncate(self, keep: int) -> None:
        """Keep the data of the first ``keep`` positions (rows: of those that have one)."""
        if self.top_p_offsets is not None and self.top_p_ids is not None:
            del self.top_p_ids[self.top_p_offsets[keep] :], self.top_p_offsets[keep + 1 :]
        if self.routed is not None:
            del self.routed[min(self.routed_rows, keep) * self.width :]

    def extend(
        self,
        tail: int,
        top_p_ids: list[int] | None,
        top_p_offsets: list[int] | None,
        routed_start: int,
        routed: str | None,
    ) -> None:
        """``tail`` context positions, then the output's nuclei; then the call's rows from ``routed_start`` on,
        of which those for positions already held are skipped."""
        if self.top_p_offsets is not None and self.top_p_ids is not None:
            if top_p_ids is None or top_p_offsets is None:
                raise ReplayMismatch("a turn of a session capturing top-p nuclei carries none")
            base = self.top_p_offsets[-1]
            self.top_p_offsets.extend([base] * tail)
            self.top_p_ids.extend(top_p_ids)
            self.top_p_offsets.extend(base + offset for offset in top_p_offsets[1:])
        if self.routed is not None:
            if routed is None:
                raise ReplayMismatch("a turn of a session capturing routed experts carries none")
            held = self.routed_rows
            if routed_start > held:
                raise ReplayMismatch(f"routed experts for positions {held}..{routed_start} are missing")
            rows = array("H", base64.b64decode(routed))
            self.routed.extend(rows[(held - routed_start) * self.width :])

    def check(self, tokens: int) -> None:
        if self.top_p_offsets is not None and len(self.top_p_offsets) != tokens + 1:
            raise ReplayMismatch(f"{len(self.top_p_offsets) - 1} top-p spans for {tokens} tokens")
        if self.routed is not None and self.routed_rows != max(tokens - 1, 0):
            raise ReplayMismatch(f"{self.routed_rows} routed-expert rows for {tokens} tokens")

    def contract(self) -> SegmentReplay:
        return SegmentReplay(
            top_p_ids=np.frombuffer(self.top_p_ids, dtype=np.int32).copy() if self.top_p_ids is not None else None,
            top_p_offsets=np.frombuffer(self.top_p_offsets, dtype=np.int32).copy()
            if self.top_p_offsets is not None
            else None,
            routed=np.frombuffer(self.routed, dtype=np.uint16).reshape(-1, self.width).copy()
            if self.routed is not None
            else None,
        )


def routed_payload(rows: np.ndarray, first: int, start: int) -> str:
    """The rows (uint16, for positions from ``start``) for positions from ``first`` on, as a delta carries them."""
    return base64.b64encode(np.ascontiguousarray(rows[max(first - start, 0) :], dtype="<u2").tobytes()).decode("ascii")
