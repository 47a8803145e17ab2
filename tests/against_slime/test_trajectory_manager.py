"""The ``current`` contract's rule is slime's ``TrajectoryManager``: the same turns give the same samples."""

from __future__ import annotations

import random

import pytest

from tests.against_slime import require_slime

require_slime()

from slime.agent.trajectory import TrajectoryManager, TurnRecord  # noqa: E402
from slime.utils.types import Sample  # noqa: E402

from tests.slime_samples.turn_cases import CASES, CaseTurn, project_samples, random_session, sample_view  # noqa: E402


def slime_samples(turns: list[CaseTurn], fork_threshold: int, max_tokens: int) -> list[dict]:
    manager = TrajectoryManager(fork_threshold_tokens=fork_threshold)
    for turn in turns:
        record = TurnRecord(
            list(turn.prompt_ids), list(turn.output_ids), turn.finish_reason, list(turn.log_probs), turn.ill_formed
        )
        manager.record_turn("sid", turn=record, prompt_messages=turn.prompt, response_message=turn.reply)
    base = Sample(index=3, group_index=1, prompt="p", label="l")
    out = manager.get_trajectory("sid", base_sample=base, reward=1.0, max_sample_tokens=max_tokens)
    return [sample_view(s.tokens, s.response_length, s.loss_mask, s.rollout_log_probs, s.metadata) for s in out]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_stand_in_cases_are_slimes(name):
    turns, threshold, max_tokens, trained = CASES[name]
    theirs = slime_samples(turns, threshold, max_tokens)
    assert [sum(s["loss_mask"]) for s in theirs] == trained
    assert project_samples(turns, threshold, max_tokens) == theirs


@pytest.mark.parametrize("seed", range(400))
def test_random_sessions_give_identical_samples(seed):
    rng = random.Random(seed)
    turns = random_session(rng, rng.randrange(1, 16))
    threshold, max_tokens = rng.choice([0, 2, 4, 1024]), rng.choice([0, 0, 0, 10, 25])
    assert project_samples(turns, threshold, max_tokens) == slime_samples(turns, threshold, max_tokens)
