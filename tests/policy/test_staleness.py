"""Staleness bounds on real segments: which turns are stale, what ``mask`` leaves, what ``drop`` decides."""

from __future__ import annotations

import pytest

from durable_rollouts.contracts.session import StalenessBound
from durable_rollouts.contracts.tokens import TokenSegment
from durable_rollouts.contracts.weight_versions import spans_from_runs
from durable_rollouts.policy.staleness import judge, staleness_of


def segment(turn_versions: list[list[str | None]]) -> TokenSegment:
    """A segment of a 3-token prompt, then per turn its sampled tokens (one version each) and 2 context tokens."""
    tokens, mask, log_probs, runs = [1, 2, 3], [0, 0, 0], [0.0, 0.0, 0.0], []
    for versions in turn_versions:
        for version in versions:
            runs.append((len(tokens), version))
            tokens.append(7)
            mask.append(1)
            log_probs.append(-0.5)
        tokens += [8, 9]
        mask += [0, 0]
        log_probs += [0.0, 0.0]
    return TokenSegment(
        kind="main", tokens=tokens, loss_mask=mask, rollout_log_probs=log_probs, prompt_length=3,
        turns=len(turn_versions), finish_reason="stop",
        weight_version_spans=spans_from_runs((p, p + 1, v) for p, v in runs),
    )  # fmt: skip


def test_staleness_is_counted_in_the_bounds_order():
    assert staleness_of("3", "7", StalenessBound(max_staleness=1)) == 4
    assert staleness_of("step-a", "7", StalenessBound(max_staleness=1)) is None
    explicit = StalenessBound(max_staleness=1, order=["base", "rl-1", "rl-2"])
    assert staleness_of("base", "rl-2", explicit) == 2 and staleness_of("rl-9", "rl-2", explicit) is None


def test_mask_keeps_stale_turns_as_context_and_the_rest_as_sampled():
    original = segment([["3", "3"], ["5", "6"], ["7"]])
    [masked], report = judge([original], StalenessBound(max_staleness=2, policy="mask"), current="7")
    assert (report.stale_turns, report.masked_tokens, report.oldest_version, report.staleness, report.dropped) == (
        1,
        2,
        "3",
        4,
        False,
    )
    assert masked.tokens == original.tokens, "masked turns stay in the sequence, as context"
    assert masked.loss_mask == [0] * 3 + [0, 0, 0, 0] + [1, 1, 0, 0] + [1, 0, 0]
    assert all(p == 0.0 for p, m in zip(masked.rollout_log_probs, masked.loss_mask, strict=True) if not m)
    assert [v for v, m in zip(masked.token_weight_versions(), masked.loss_mask, strict=True) if m] == ["5", "6", "7"]


def test_a_turn_spanning_a_stale_and_a_fresh_version_is_judged_by_its_oldest_token():
    [masked], report = judge([segment([["4", "7"]])], StalenessBound(max_staleness=2), current="7")
    assert report.stale_turns == 1 and sum(masked.loss_mask) == 0


def test_drop_changes_no_segment_and_says_to_drop():
    original = segment([["3"], ["7"]])
    [kept], report = judge([original], StalenessBound(max_staleness=2, policy="drop"), current="7")
    assert kept == original and report.dropped and report.stale_turns == 1


@pytest.mark.parametrize("policy", ["mask", "drop"])
def test_a_fresh_sample_is_left_alone(policy):
    original = segment([["6"], ["7"]])
    [kept], report = judge([original], StalenessBound(max_staleness=1, policy=policy), current="7")
    assert kept == original and not report.dropped and report.stale_turns == 0 and report.staleness == 1


def test_tokens_that_cannot_be_judged_are_counted_not_masked():
    original = segment([[None, None], ["step-x"]])
    [kept], report = judge([original], StalenessBound(max_staleness=0, policy="mask"), current="7")
    assert (
        kept == original and report.unjudged_tokens == 3 and report.staleness is None and report.oldest_version is None
    )
