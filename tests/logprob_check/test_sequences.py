"""What the log-prob check reads: a slime sample (or a token segment) as the tokens it trains, with each one's
rollout log-prob and version; a sample whose fields disagree is refused naming the sample and the field."""

from __future__ import annotations

import pytest

from durable_rollouts.contracts.tokens import TokenSegment
from durable_rollouts.contracts.weight_versions import WeightVersionSpan
from durable_rollouts.logprob_check.sequences import SampleError, TrainedSequence


def slime_sample(**overrides) -> dict:
    sample = {
        "tokens": [1, 2, 3, 4, 5, 6],
        "response_length": 4,
        "loss_mask": [1, 1, 0, 1],
        "rollout_log_probs": [-0.1, -0.2, 0.0, -0.4],
        "metadata": {
            "weight_version_spans": [{"version": "3", "start": 0, "end": 2}, {"version": "4", "start": 3, "end": 4}]
        },
    }
    return {**sample, **overrides}


def test_a_slime_sample_gives_each_trained_token_its_position_log_prob_and_version():
    sequence = TrainedSequence.from_slime(slime_sample(), "s:1")
    assert list(sequence.trained()) == [(2, -0.1, "3"), (3, -0.2, "3"), (5, -0.4, "4")]


def test_a_token_segment_reads_the_same():
    segment = TokenSegment(
        kind="main",
        turns=2,
        finish_reason="stop",
        tokens=[1, 2, 3, 4, 5, 6],
        loss_mask=[0, 0, 1, 1, 0, 1],
        rollout_log_probs=[0.0, 0.0, -0.1, -0.2, 0.0, -0.4],
        prompt_length=2,
        weight_version_spans=[
            WeightVersionSpan(start=2, end=4, version="3"),
            WeightVersionSpan(start=5, end=6, version="4"),
        ],
    )
    assert list(TrainedSequence.from_segment(segment, "seg").trained()) == [
        (2, -0.1, "3"),
        (3, -0.2, "3"),
        (5, -0.4, "4"),
    ]


@pytest.mark.parametrize(
    ("sample", "named"),
    [
        (slime_sample(loss_mask=[1, 1]), "s:1: loss_mask has 2 entries for a response of 4 tokens"),
        (slime_sample(rollout_log_probs=[-0.1]), "s:1: rollout_log_probs has 1 entries"),
        ({"tokens": [1, 2]}, "s:1: not a slime sample (KeyError"),
        (
            slime_sample(response_length=6, loss_mask=[1] * 6, rollout_log_probs=[-1.0] * 6),
            "s:1: a trained first token has no context",
        ),
        (slime_sample(tokens=[1, 2, "x", 4, 5, 6]), "s:1: tokens.2: Input should be a valid integer"),
    ],
)
def test_a_sample_the_check_cannot_read_is_refused_naming_it(sample, named):
    with pytest.raises(SampleError) as refused:
        TrainedSequence.from_slime(sample, "s:1")
    assert str(refused.value).startswith(named), str(refused.value)
