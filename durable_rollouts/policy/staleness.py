"""Staleness bounds: how many weight updates behind the server's current version a rollout's tokens may be.

At merge time the oldest sampled token's version is compared with the policy server's current version.
Versions are strings on the wire; ``StalenessBound.order`` says how to order them (integers by default,
e.g. the trainer step; or an explicit oldest-first list the trainer supplies), and a version's staleness
is how many places it lies behind the current one in that order.

Invariants:

* ``mask`` sets ``loss_mask`` (and the log-prob) to 0 for every turn, i.e. every maximal run of sampled
  tokens, whose oldest token is more than ``max_staleness`` behind; the tokens stay, as context; the
  version spans then cover only the tokens still sampled;
* ``drop`` changes no segment: the verdict says the sample is to be dropped (``aborted: stale_policy``);
* a token without a version, or a version the order does not know, is never judged stale: the report
  counts it as ``unjudged``, so a server that reports no versions is visible, not silently passed; when
  the server's current version cannot be read, nothing is judged (``unjudged``).
"""

from __future__ import annotations

from durable_rollouts.contracts.session import StalenessBound, StalenessReport
from durable_rollouts.contracts.tokens import TokenSegment
from durable_rollouts.contracts.weight_versions import is_integer_version, spans_from_runs


def staleness_of(version: str, current: str, bound: StalenessBound) -> int | None:
    """How many versions ``version`` lies behind ``current`` in ``bound.order``; None when the order cannot place
    both."""
    if bound.order == "integer":
        if is_integer_version(version) and is_integer_version(current):
            return int(current) - int(version)
        return None
    if version in bound.order and current in bound.order:
        return bound.order.index(current) - bound.order.index(version)
    return None


def unjudged(segments: list[TokenSegment], bound: StalenessBound, why: str) -> StalenessReport:
    """The report when the server's current version is unknown: nothing judged, every sampled token counted."""
    return StalenessReport(
        bound=bound, current_version=None, note=why, unjudged_tokens=sum(sum(s.loss_mask) for s in segments)
    )


def judge(
    segments: list[TokenSegment], bound: StalenessBound, current: str
) -> tuple[list[TokenSegment], StalenessReport]:
    """The segments as the bound's policy leaves them, and what was found (see the module docstring)."""
    stale_turns = masked_tokens = unjudged = 0
    worst: int | None = None
    oldest: str | None = None
    judged: list[TokenSegment] = []
    for segment in segments:
        versions = segment.token_weight_versions()
        keep = list(segment.loss_mask)
        for start, end in segment.sampled_runs():
            ages = []
            for position in range(start, end):
                sampled = versions[position]
                age = staleness_of(sampled, current, bound) if sampled is not None else None
                if age is None:
                    unjudged += 1
                else:
                    ages.append((age, sampled))
            if not ages:
                continue
            age, version = max(ages, key=lambda item: item[0])
            if worst is None or age > worst:
                worst, oldest = age, version
            if age > bound.max_staleness:
                stale_turns += 1
                if bound.policy == "mask":
                    keep[start:end] = [0] * (end - start)
                    masked_tokens += end - start
        judged.append(_masked(segment, keep, versions) if keep != segment.loss_mask else segment)
    report = StalenessReport(
        bound=bound,
        current_version=current,
        oldest_version=oldest,
        staleness=worst,
        stale_turns=stale_turns,
        masked_tokens=masked_tokens,
        unjudged_tokens=unjudged,
        dropped=bound.policy == "drop" and stale_turns > 0,
    )
    return judged, report


def _masked(segment: TokenSegment, keep: list[int], versions: list[str | None]) -> TokenSegment:
    runs = [(position, position + 1, versions[position]) for position, mask in enumerate(keep) if mask]
    return TokenSegment.model_validate(
        {
            **segment.model_dump(),
            "loss_mask": keep,
            "rollout_log_probs": [p if mask else 0.0 for p, mask in zip(segment.rollout_log_probs, keep, strict=True)],
            "weight_version_spans": spans_from_runs(runs),
        }
    )
