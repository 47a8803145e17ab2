"""The /generate reply as a Generation: sampled ids, log-probs and the weight version of every token.

Replies are built in sglang 0.5.23's shape (``meta_info.weight_versions`` spans
``{"version", "start", "end"}`` over the output tokens, and/or
``meta_info.weight_version``) around real Qwen3.6 token ids.
"""

from __future__ import annotations

import pytest

from durable_rollouts.policy.sglang_client import PolicyOutputError, PolicyServerError, parse_generation


def reply(ids: list[int], **meta) -> dict:
    return {
        "text": "",
        "output_ids": ids,
        "meta_info": {
            "id": "r1",
            "finish_reason": {"type": "stop", "matched": ids[-1] if ids else None},
            "prompt_tokens": 12,
            "completion_tokens": len(ids),
            "output_token_logprobs": [[-0.25 * (i + 1), token, None] for i, token in enumerate(ids)],
            **meta,
        },
    }


@pytest.fixture
def sampled(renderer) -> list[int]:
    ids = renderer.encode("<think>\nlook at parser.py\n</think>\n\nThe bug is an off-by-one.") + [
        renderer.end_of_turn_id
    ]
    assert len(ids) > 8
    return ids


def test_spans_give_each_output_token_the_version_that_sampled_it(renderer, sampled):
    n = len(sampled)
    spans = [
        {"version": "7", "start": 0, "end": 3},
        {"version": "8", "start": 3, "end": n - 2},
        {"version": "9", "start": n - 2, "end": n},
    ]
    generation = parse_generation(reply(sampled, weight_version="9", weight_versions=spans), renderer.vocab_size)
    assert generation.output_ids == sampled
    assert generation.log_probs == [-0.25 * (i + 1) for i in range(n)]
    assert generation.weight_versions == [(0, 3, "7"), (3, n - 2, "8"), (n - 2, n, "9")]


def test_a_single_weight_version_covers_the_whole_reply(renderer, sampled):
    generation = parse_generation(reply(sampled, weight_version="step-12"), renderer.vocab_size)
    assert generation.weight_versions == [(0, len(sampled), "step-12")]


def test_spans_win_over_the_single_version_and_adjacent_spans_of_one_version_merge(renderer, sampled):
    n = len(sampled)
    spans = [{"version": "a", "start": 0, "end": 2}, {"version": "a", "start": 2, "end": n}]
    generation = parse_generation(reply(sampled, weight_version="stale", weight_versions=spans), renderer.vocab_size)
    assert generation.weight_versions == [(0, n, "a")]


def test_without_either_field_no_version_is_invented(renderer, sampled):
    assert parse_generation(reply(sampled), renderer.vocab_size).weight_versions == []
    assert parse_generation(reply(sampled, weight_version=None), renderer.vocab_size).weight_versions == []


def test_tokens_no_span_covers_have_no_version(renderer, sampled):
    generation = parse_generation(
        reply(sampled, weight_versions=[{"version": "3", "start": 0, "end": 4}]), renderer.vocab_size
    )
    assert generation.weight_versions == [(0, 4, "3")]


def test_an_empty_reply_keeps_sglangs_empty_span_and_no_version(renderer):
    generation = parse_generation(
        reply([], weight_version="5", weight_versions=[{"version": "5", "start": 0, "end": 0}]), renderer.vocab_size
    )
    assert generation.output_ids == [] and generation.weight_versions == []
    assert parse_generation(reply([], weight_version="5"), renderer.vocab_size).weight_versions == []


@pytest.mark.parametrize(
    "meta",
    [
        {"weight_version": 3},
        {"weight_versions": "0-9"},
        {"weight_versions": [["v", 0, 2]]},
        {"weight_versions": [{"version": 1, "start": 0, "end": 2}]},
        {"weight_versions": [{"version": "v", "start": 0.0, "end": 2}]},
        {"weight_versions": [{"version": "v", "start": True, "end": 2}]},
        {"weight_versions": [{"version": "v", "start": 2, "end": 1}]},
        {"weight_versions": [{"version": "v", "start": 0, "end": 4}, {"version": "w", "start": 3, "end": 6}]},
        {"weight_versions": [{"version": "v", "start": 0, "end": 10_000}]},
        {"weight_versions": [{"version": "v", "start": -1, "end": 2}]},
    ],
)
def test_malformed_versions_reject_the_reply(renderer, sampled, meta):
    with pytest.raises(PolicyOutputError):
        parse_generation(reply(sampled, **meta), renderer.vocab_size)


def test_an_abort_still_raises_with_whatever_versions_it_carries(renderer, sampled):
    body = reply(sampled, weight_version="4", weight_versions=[{"version": "4", "start": 0, "end": 2}])
    body["meta_info"]["finish_reason"] = {"type": "abort", "message": "paused for a weight update"}
    with pytest.raises(PolicyServerError, match="aborted"):
        parse_generation(body, renderer.vocab_size)
