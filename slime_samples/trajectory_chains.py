"""Today's slime linearisation: a rollout's token segments become training sequences, compactions appended.

slime's ``TrajectoryManager`` routes every turn by its messages, so a
compaction call (Claude Code's history so far plus the summary request)
lands under the conversation it summarises, and one sample holds both. The
project's ledger keeps the compaction as a segment of its own; this module
joins them back the way slime's ``get_trajectory`` does:

* Segments are taken in ledger order. Every non-compaction segment starts a
  chain. A compaction segment continues the chain of its lane whose tokens it
  shares the longest prefix with (the latest on a tie), provided that prefix
  covers the chain's initial prompt; otherwise it starts a chain of its own.
* Continuing a chain at common prefix ``L``: positions ``[0, L)`` keep the
  chain's mask, log-probs and versions; the chain's tokens past ``L`` (a
  re-rendered history that no longer matches what was sampled) are dropped,
  and the compaction segment's tokens from ``L`` on are appended with its own
  mask, log-probs and versions. So the sequence is exactly what the model saw
  at the compaction call, and every ``loss_mask == 1`` token still sits where
  it was sampled, after exactly the tokens it was sampled after.
* A drop that would lose at least ``fork_min_loss_tokens`` trainable tokens
  forks instead (slime's drift fork, default 1024): the chain as it was
  before the drop is kept as an extra sequence whose mask is 1 only on the
  dropped trainable tokens, so none of them is lost and none is trained twice.
  A smaller drop loses its trained tokens, as in slime, and is counted
  (``tito_dropped_tokens`` / ``tito_dropped_turns``).
* Chains come out in creation order, each drift fork just before the chain
  it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contracts.rollout import SegmentKind, TokenSegment, spans_from_runs

DRIFT_FORK_MIN_LOSS_TOKENS = 1024
_BLOCK = 4096


@dataclass(eq=False)
class Chain:
    """One training sequence under construction; ``versions`` has one entry per position (None: no version)."""

    kinds: list[SegmentKind]
    lane: str
    prompt_length: int
    tokens: list[int]
    loss_mask: list[int]
    log_probs: list[float]
    versions: list[str | None]
    turns: int
    finish_reason: str
    tool_call_turns: int
    ill_formed_turns: int
    notes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, segment: TokenSegment) -> Chain:
        return cls(
            kinds=[segment.kind],
            lane=segment.lane,
            prompt_length=segment.prompt_length,
            tokens=list(segment.tokens),
            loss_mask=list(segment.loss_mask),
            log_probs=list(segment.rollout_log_probs),
            versions=segment.token_weight_versions(),
            turns=segment.turns,
            finish_reason=segment.finish_reason,
            tool_call_turns=segment.tool_call_turns,
            ill_formed_turns=segment.ill_formed_turns,
        )

    def segment(self) -> TokenSegment:
        """The chain as one ``TokenSegment`` (kind of its first segment, spans rebuilt from per-token versions)."""
        return TokenSegment(
            kind=self.kinds[0],
            lane=self.lane,
            tokens=self.tokens,
            loss_mask=self.loss_mask,
            rollout_log_probs=self.log_probs,
            prompt_length=self.prompt_length,
            turns=self.turns,
            finish_reason=self.finish_reason,
            weight_version_spans=spans_from_runs(_version_runs(self.loss_mask, self.versions)),
            tool_call_turns=self.tool_call_turns,
            ill_formed_turns=self.ill_formed_turns,
        )

    def fork_before(self, keep: int) -> Chain:
        """This chain before a drop at ``keep``, trainable only where the drop would lose sampled tokens
        (``tito_drift_fork_at_turn``: the 1-based turn of the chain whose call dropped them)."""
        return Chain(
            kinds=list(self.kinds),
            lane=self.lane,
            prompt_length=self.prompt_length,
            tokens=list(self.tokens),
            loss_mask=[0] * keep + self.loss_mask[keep:],
            log_probs=[0.0] * keep + self.log_probs[keep:],
            versions=[None] * keep + self.versions[keep:],
            turns=self.turns,
            finish_reason=self.finish_reason,
            tool_call_turns=self.tool_call_turns,
            ill_formed_turns=self.ill_formed_turns,
            notes={"tito_drift_fork": True, "tito_drift_fork_at_turn": self.turns + 1, "tito_drift_fork_loss_tokens": sum(self.loss_mask[keep:])},
        )

    def continue_with(self, segment: TokenSegment, keep: int) -> None:
        """Drop this chain's positions from ``keep`` on and append ``segment``'s from ``keep`` on."""
        del self.tokens[keep:], self.loss_mask[keep:], self.log_probs[keep:], self.versions[keep:]
        self.tokens += segment.tokens[keep:]
        self.loss_mask += segment.loss_mask[keep:]
        self.log_probs += segment.rollout_log_probs[keep:]
        self.versions += segment.token_weight_versions()[keep:]
        self.kinds.append(segment.kind)
        self.turns += segment.turns
        self.finish_reason = segment.finish_reason
        self.tool_call_turns += segment.tool_call_turns
        self.ill_formed_turns += segment.ill_formed_turns


def linearise(segments: list[TokenSegment], fork_min_loss_tokens: int = DRIFT_FORK_MIN_LOSS_TOKENS) -> list[Chain]:
    """The training sequences today's slime makes of ``segments`` (see the module docstring)."""
    out: list[Chain] = []
    for segment in segments:
        target, keep = _continued_chain(out, segment) if segment.kind == "compaction" else (None, 0)
        if target is None:
            out.append(Chain.of(segment))
            continue
        dropped = len(target.tokens) - keep
        if dropped:
            lost = sum(target.loss_mask[keep:])
            if lost and lost >= fork_min_loss_tokens:
                out.insert(out.index(target), target.fork_before(keep))
                target.notes["tito_drift_forks_emitted"] = target.notes.get("tito_drift_forks_emitted", 0) + 1
            else:
                target.notes["tito_dropped_tokens"] = target.notes.get("tito_dropped_tokens", 0) + dropped
                target.notes["tito_dropped_turns"] = target.notes.get("tito_dropped_turns", 0) + 1
        target.continue_with(segment, keep)
    return out


def _continued_chain(chains: list[Chain], segment: TokenSegment) -> tuple[Chain | None, int]:
    """The chain ``segment`` continues and their common prefix length, or ``(None, 0)``."""
    best: Chain | None = None
    best_length = 0
    for chain in chains:
        if chain.lane != segment.lane or chain.notes.get("tito_drift_fork"):
            continue
        length = common_prefix_length(chain.tokens, segment.tokens)
        if length >= chain.prompt_length and length >= best_length:
            best, best_length = chain, length
    return best, best_length


def common_prefix_length(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (block-wise slice compares, then one block by hand)."""
    limit = min(len(a), len(b))
    start = 0
    while start < limit and a[start : min(start + _BLOCK, limit)] == b[start : min(start + _BLOCK, limit)]:
        start += _BLOCK
    position = min(start, limit)
    while position < limit and a[position] == b[position]:
        position += 1
    return position


def _version_runs(loss_mask: list[int], versions: list[str | None]) -> list[tuple[int, int, str | None]]:
    """Maximal runs of sampled positions of one version, in position order (``spans_from_runs``' input)."""
    runs: list[tuple[int, int, str | None]] = []
    start: int | None = None
    for position in range(len(loss_mask) + 1):
        sampled = position < len(loss_mask) and loss_mask[position]
        if start is not None and (not sampled or versions[position] != versions[start]):
            runs.append((start, position, versions[start]))
            start = None
        if sampled and start is None:
            start = position
    return runs
