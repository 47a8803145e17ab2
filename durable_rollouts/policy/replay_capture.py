"""One ``/generate`` call's replay data, read from its ``meta_info`` and joined across continued generations.

* ``TopPSpans``: the call's output tokens' top-p nuclei, SGLang's ``top_p_token_ids`` / ``top_p_token_offsets``
  (base64 of int32, or lists): offsets one per output token + 1, from 0 to ``len(ids)``.
* ``RoutedRows``: SGLang's ``routed_experts`` (base64 of int32), ``routed_experts_start_len`` (absent: 0):
  rows for the call's positions ``[start, len(input) + len(output) - 1)``, ``width`` expert ids each.

A continued generation (``durable_rollouts.policy.continuation``) joins its pieces: nuclei concatenated; routing rows
kept where the first piece that processed a position reported them, the next piece's taken from where the rows held end,
so a piece that starts later than that is a ``ReplayDataError`` (a gap).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_EXPERT_ID = np.iinfo(np.uint16).max


class ReplayDataError(ValueError):
    """Replay data a reply should carry is missing or does not fit the call's tokens."""


def int32_array(value: Any, field: str) -> np.ndarray:
    """SGLang's int32 array encodings: base64 of the raw bytes, or a list of ints."""
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as error:
            raise ReplayDataError(f"meta_info.{field}: not base64 ({error})") from None
        if len(raw) % 4:
            raise ReplayDataError(f"meta_info.{field}: {len(raw)} bytes is not a whole number of int32")
        return np.frombuffer(raw, dtype="<i4").astype(np.int32)
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return np.asarray(value, dtype=np.int32)
    raise ReplayDataError(f"meta_info.{field}: expected base64 int32 or a list of ints, got {type(value).__name__}")


@dataclass(frozen=True, eq=False)
class TopPSpans:
    ids: np.ndarray
    offsets: np.ndarray

    @classmethod
    def none(cls, n_tokens: int = 0) -> TopPSpans:
        return cls(np.empty(0, dtype=np.int32), np.zeros(n_tokens + 1, dtype=np.int32))

    @classmethod
    def from_meta(cls, meta: dict[str, Any], n_tokens: int) -> TopPSpans:
        if "top_p_token_ids" not in meta or "top_p_token_offsets" not in meta:
            raise ReplayDataError(
                "meta_info has no top_p_token_ids / top_p_token_offsets: was custom_params.return_top_p_token_ids "
                "honoured?"
            )
        ids, offsets = (
            int32_array(meta["top_p_token_ids"], "top_p_token_ids"),
            int32_array(meta["top_p_token_offsets"], "top_p_token_offsets"),
        )
        if len(offsets) != n_tokens + 1 or offsets[0] != 0 or offsets[-1] != len(ids) or np.any(np.diff(offsets) < 0):
            raise ReplayDataError(
                f"meta_info.top_p_token_offsets: {len(offsets)} offsets from 0 to {len(ids)} needed for {n_tokens} "
                f"tokens"
            )
        return cls(ids, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def then(self, other: TopPSpans) -> TopPSpans:
        return TopPSpans(
            np.concatenate([self.ids, other.ids]), np.concatenate([self.offsets, other.offsets[1:] + self.offsets[-1]])
        )

    def first(self, n_tokens: int) -> TopPSpans:
        return TopPSpans(self.ids[: self.offsets[n_tokens]], self.offsets[: n_tokens + 1])


@dataclass(frozen=True, eq=False)
class RoutedRows:
    """Rows for positions ``[start, start + len(rows))`` of a call's sequence (``rows``: uint16, ``width`` wide)."""

    start: int
    rows: np.ndarray

    @classmethod
    def from_meta(cls, meta: dict[str, Any], positions: int, width: int) -> RoutedRows:
        """``positions``: the call's input + output length; its last position has no row."""
        if "routed_experts" not in meta:
            raise ReplayDataError("meta_info has no routed_experts: was return_routed_experts honoured (an MoE model)?")
        flat = int32_array(meta["routed_experts"], "routed_experts")
        start = meta.get("routed_experts_start_len") or 0
        if not isinstance(start, int) or start < 0:
            raise ReplayDataError(f"meta_info.routed_experts_start_len: {start!r} is not a position")
        expected = max(positions - 1 - start, 0)
        if flat.size != expected * width:
            raise ReplayDataError(
                f"meta_info.routed_experts: {flat.size} ids, expected {expected} rows x {width} for positions "
                f"{start}..{positions - 1}"
            )
        if flat.size and (flat.min() < 0 or flat.max() > MAX_EXPERT_ID):
            raise ReplayDataError(f"meta_info.routed_experts: expert ids outside 0..{MAX_EXPERT_ID}")
        return cls(start, flat.astype(np.uint16).reshape(expected, width))

    @property
    def end(self) -> int:
        return self.start + len(self.rows)

    def before(self, position: int) -> RoutedRows:
        """The rows for positions before ``position``."""
        return RoutedRows(self.start, self.rows[: max(position - self.start, 0)])

    def then(self, other: RoutedRows) -> RoutedRows:
        """These rows, then ``other``'s for the positions past them (``other`` must reach back to them)."""
        if other.start > self.end:
            raise ReplayDataError(
                f"routed experts missing for positions {self.end}..{other.start} of a continued generation"
            )
        return RoutedRows(self.start, np.concatenate([self.rows, other.rows[self.end - other.start :]]))


def joined(values: Sequence[Any]) -> Any:
    """Consecutive pieces' ``TopPSpans`` (or ``RoutedRows``) joined in order; None when the first has none."""
    if values[0] is None:
        return None
    if any(value is None for value in values):
        raise ReplayDataError("a continued generation's piece carries no replay data where the first did")
    out = values[0]
    for value in values[1:]:
        out = out.then(value)
    return out
