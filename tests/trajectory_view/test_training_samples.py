"""What each contract makes of a session of real Claude Code requests, told per sample and per turn."""

import pytest

from durable_rollouts.contracts.tokens import SampledTurn, TokenSegment, TurnLog
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.slime_samples import current
from durable_rollouts.slime_samples.options import SampleOptions
from durable_rollouts.trajectory_view.conversation import conversations
from durable_rollouts.trajectory_view.token_text import TokenTexts
from durable_rollouts.trajectory_view.training_samples import sample_plan
from tests.slime_sample import Sample
from tests.slime_samples.segments import result_of
from tests.trajectory_view.captured_pages import captured_session


@pytest.mark.asyncio(loop_scope="session")
async def test_the_plan_is_what_each_contract_hands_slime(adapter, renderer):
    session = await captured_session(adapter, renderer)
    read = conversations(session.segments, session.turn_log, TokenTexts.from_dir(ensure_qwen_tokenizer()))
    plan = sample_plan(read, session.turn_log, "current", "test", SampleOptions())
    handed = current.samples(
        Sample(index=0, group_index=0),
        result_of(),
        Trajectory(session.segments, session.turn_log),
        None,
        SampleOptions(),
    )
    assert [(s.n_tokens, s.trained) for s in plan.samples] == [(len(s.tokens), sum(s.loss_mask)) for s in handed]
    assert [s.turns for s in plan.samples] == [[2], [3], [4]] and plan.samples[0].segments == [0, 1]
    assert plan.fates[1].kind == "realigned" and plan.fates[1].samples == [0], (
        "the main reply is realigned into the compaction sample"
    )
    assert [plan.fates[n].label for n in (2, 3, 4)] == [
        "trains in sample 1",
        "trains in sample 2",
        "trains in sample 3",
    ]

    cut = sample_plan(read, session.turn_log, "current", "test", SampleOptions(max_sample_tokens=19_270))
    assert cut.fates[3].kind == "cut" and cut.samples[1].at_cap and cut.samples[1].n_tokens == 19_270, (
        "a sample cut inside a reply trains part of it"
    )

    early = sample_plan(read, session.turn_log, "current", "test", SampleOptions(max_sample_tokens=19_100))
    assert [early.fates[n].kind for n in (1, 2, 3, 4)] == ["realigned", "past_cap", "past_cap", "trains"], (
        "a cap before a reply leaves it out"
    )
    assert early.fates[3].label == "past the cap of sample 2: not trained" and [s.at_cap for s in early.samples] == [
        True,
        True,
        False,
    ]

    seed = sample_plan(read, session.turn_log, "seed", "test", SampleOptions())
    assert [(s.segments, s.turns, s.reward_share) for s in seed.samples] == [([i], [i + 1], 0.25) for i in range(4)]
    assert all(f.kind == "trains" for f in seed.fates.values())


def test_a_turn_the_staleness_bound_masked_is_named():
    texts = TokenTexts.from_dir(ensure_qwen_tokenizer())
    masked = TokenSegment(
        kind="role",
        tokens=[1, 2, 3, 4],
        loss_mask=[0, 0, 0, 1],
        rollout_log_probs=[0, 0, 0, -0.5],
        prompt_length=1,
        turns=1,
        finish_reason="stop",
    )
    log = TurnLog(
        turns=[
            SampledTurn(segment=0, prompt_end=1, end=3, finish_reason="stop", prompt_messages=[0], reply_message=1),
            SampledTurn(segment=0, prompt_end=3, end=4, finish_reason="stop", prompt_messages=[0, 1], reply_message=2),
        ],
        message_keys=["user:a", "assistant:b", "assistant:c"],
    )
    plan = sample_plan(conversations([masked], log, texts), log, "current", "test", SampleOptions())
    assert plan.fates[1].label == "masked by the staleness bound" and plan.fates[2].kind == "trains"
