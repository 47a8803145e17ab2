"""slime's trajectory rule on the project's turns: routing by messages, realign / fork / drop, the cut, the rewrite
merge. The expected trained-token counts are slime's own (``tests/against_slime`` checks them on slime's code)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from durable_rollouts.slime_samples.message_tree import MessageTree
from tests.slime_samples.turn_cases import (
    CASES,
    SYSTEM,
    TASK,
    CaseTurn,
    project_samples,
    project_turn,
    random_session,
    reply,
)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_gives_slimes_samples(name):
    turns, threshold, max_tokens, trained = CASES[name]
    samples = project_samples(turns, threshold, max_tokens)
    assert [sum(s["loss_mask"]) for s in samples] == trained
    for s in samples:
        assert len(s["loss_mask"]) == len(s["rollout_log_probs"]) == s["response_length"]
        assert all(p == 0.0 for p, m in zip(s["rollout_log_probs"], s["loss_mask"], strict=True) if not m)


def test_a_realigned_reply_becomes_context_and_the_sequence_is_the_last_prompt_and_reply():
    turns, threshold, max_tokens, _ = CASES["realign_in_last_reply"]
    (sample,) = project_samples(turns, threshold, max_tokens)
    assert sample["tokens"] == turns[1].prompt_ids + turns[1].output_ids
    assert sample["loss_mask"] == [0, 0, 0, 0, 1, 1, 1] and sample["response_length"] == 7


def test_the_cut_keeps_slimes_arithmetic_and_flags():
    turns, threshold, max_tokens, _ = CASES["cut_to_max_tokens"]
    (sample,) = project_samples(turns, threshold, max_tokens)
    assert len(sample["tokens"]) == 8 and sample["response_length"] == 5 and sample["truncated"]


def test_flags_cover_the_whole_path():
    turns, threshold, max_tokens, _ = CASES["ill_formed_and_tools"]
    (sample,) = project_samples(turns, threshold, max_tokens)
    assert (sample["use_tool"], sample["ill_formed"], sample["truncated"]) == (True, True, False)


def test_a_turn_without_messages_is_not_recorded():
    tree = MessageTree()
    tree.record(project_turn(CaseTurn([], reply("x"), [1, 2], [3])))
    assert tree.sequences() == []


def test_a_staleness_masked_reply_stays_context_and_keeps_no_version():
    first = project_turn(CaseTurn([SYSTEM, TASK], reply("a"), [1, 2], [3, 4]))
    stale = first.__class__(
        **{**first.__dict__, "output_mask": np.array([0, 1], dtype=np.uint8), "output_versions": ["v1", "v2"]}
    )
    tree = MessageTree()
    tree.record(stale)
    (sequence,) = tree.sequences()
    assert (
        sequence.loss_mask == [0, 0, 0, 1]
        and sequence.log_probs[2] == 0.0
        and sequence.versions == [None, None, None, "v2"]
    )


@pytest.mark.parametrize("seed", range(25))
def test_random_sessions_keep_the_training_invariants(seed):
    rng = random.Random(seed)
    turns = random_session(rng, rng.randrange(1, 14))
    threshold = rng.choice([0, 3, 1024])
    samples = project_samples(turns, threshold)
    assert all(len(s["loss_mask"]) == s["response_length"] and sum(s["loss_mask"]) > 0 for s in samples), (
        "no sample without a trained token"
    )
    assert sum(sum(s["loss_mask"]) for s in samples) <= sum(len(t.output_ids) for t in turns), (
        "no sampled token is trained twice"
    )
    for cut, uncut in zip(project_samples(turns, threshold, 12), samples, strict=True):
        assert cut["tokens"] == uncut["tokens"][:12] and len(cut["loss_mask"]) == max(cut["response_length"], 0)
