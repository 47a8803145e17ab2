"""The scripted server's replay data: deterministic top-p nuclei and MoE routing, so tests can check them token by
token.

* ``nucleus(token, position, vocab_size)``: the sampled token first, then ``position % 3`` more ids, all
  distinct, a function of the token and its position in the request's sequence only;
* ``routing(ids, shape)``: for every position but the last, ``shape.layers`` rows of ``shape.top_k`` distinct
  experts (``experts`` a power of two, so the odd stride below visits distinct ones), a function of the
  token at that position and the position: a position's row is the same in every call that processes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MoEShape:
    layers: int = 4
    top_k: int = 2
    experts: int = 16

    def __post_init__(self) -> None:
        if self.experts & (self.experts - 1) or not 0 < self.top_k <= self.experts:
            raise ValueError(f"experts must be a power of two >= top_k, got {self.experts} experts, top {self.top_k}")


def nucleus(token: int, position: int, vocab_size: int) -> list[int]:
    kept = [token]
    for k in range(1, position % 3 + 1):
        candidate = (token + 7919 * k + 31 * position) % vocab_size
        if candidate not in kept:
            kept.append(candidate)
    return kept


def routing(ids: Sequence[int], shape: MoEShape) -> np.ndarray:
    """``(len(ids) - 1, layers, top_k)`` int32 expert ids."""
    tokens = np.asarray(ids[:-1], dtype=np.int64)[:, None, None]
    positions = np.arange(len(tokens), dtype=np.int64)[:, None, None]
    layers = np.arange(shape.layers, dtype=np.int64)[None, :, None]
    picks = np.arange(shape.top_k, dtype=np.int64)[None, None, :]
    first = (tokens * 2654435761 + positions * 40503 + layers * 97) % shape.experts
    stride = 2 * ((tokens + layers) % max(shape.experts // 2, 1)) + 1
    return ((first + picks * stride) % shape.experts).astype(np.int32)


DEFAULT_MOE = MoEShape()
