"""Today's slime sample contract: fresh samples, full reward, slime's metadata keys, the cut, the turn log's routing."""

from durable_rollouts.contracts.tokens import SampledTurn, TurnLog
from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.slime_samples import current, seed
from durable_rollouts.slime_samples.options import SampleOptions, sample_options
from tests.slime_sample import Sample
from tests.slime_samples.segments import COMPACTION, CONTINUATION, MAIN, SUBAGENT, result_of, segment

SEGMENTS = [MAIN, COMPACTION, CONTINUATION, SUBAGENT]
# MAIN's two calls (prompt 3 tokens, reply 2; then 2 context tokens and a reply of 2), the compaction call with the
# main conversation's messages and the main reply echoed, the continuation and the sub-agent on messages of their own.
LOG = TurnLog(
    message_keys=[
        "system:s",
        "user:task",
        "assistant:r1",
        "tool:out",
        "assistant:r2",
        "user:summarise",
        "assistant:sum",
        "system:c",
        "system:a",
    ],
    turns=[
        SampledTurn(
            segment=0,
            prompt_end=3,
            end=5,
            finish_reason="stop",
            called_tool=True,
            prompt_messages=[0, 1],
            reply_message=2,
        ),
        SampledTurn(
            segment=0, prompt_end=7, end=9, finish_reason="stop", prompt_messages=[0, 1, 2, 3], reply_message=4
        ),
        SampledTurn(
            segment=1, prompt_end=11, end=13, finish_reason="stop", prompt_messages=[0, 1, 2, 3, 4, 5], reply_message=6
        ),
        SampledTurn(segment=2, prompt_end=4, end=5, finish_reason="stop", prompt_messages=[7, 1], reply_message=6),
        SampledTurn(
            segment=3,
            prompt_end=3,
            end=5,
            finish_reason="stop",
            ill_formed=True,
            prompt_messages=[8, 1],
            reply_message=6,
        ),
    ],
)


def drawn() -> Sample:
    return Sample(
        index=3,
        group_index=1,
        prompt="fix it",
        label="calc",
        metadata={"image": "img"},
        session_id="s1",
        weight_versions=["old"],
        train_metadata={"x": 1},
    )


def samples(log=LOG, options=None, segments=SEGMENTS, result=None):
    return current.samples(drawn(), result or result_of(), Trajectory(segments, log), None, options or SampleOptions())


def test_every_sample_is_fresh_with_only_the_identity_fields_and_the_full_reward():
    base = drawn()
    out = current.samples(base, result_of(), Trajectory(SEGMENTS, LOG), None, SampleOptions())
    assert len(out) == 3 and all(s is not base for s in out)
    for s in out:
        assert (s.index, s.group_index, s.rollout_id, s.prompt, s.label) == (3, 1, 3, "fix it", "calc")
        assert (s.session_id, s.train_metadata, s.remove_sample, s.reward) == (None, None, False, 1.0)
        assert s.status is Sample.Status.COMPLETED and s.metadata["image"] == "img"
        assert s.metadata is not base.metadata and len(s.loss_mask) == len(s.rollout_log_probs) == s.response_length
    assert base.metadata == {"image": "img"} and base.tokens == [], "the drawn sample is left as it was"
    assert [s.metadata["segment_kinds"] for s in out] == [["main", "compaction"], ["continuation"], ["subagent"]]


def test_the_compaction_extends_the_main_conversation_in_one_sample():
    (joined, _, _) = samples()
    assert joined.tokens == COMPACTION.tokens and sum(joined.loss_mask) == sum(MAIN.loss_mask) + sum(
        COMPACTION.loss_mask
    )
    assert joined.weight_versions == ["3", "3", "4"] and [
        s["version"] for s in joined.metadata["weight_version_spans"]
    ] == ["3", "4"]


def test_todays_metadata_keys():
    main, _, sub = samples()
    assert {k: main.metadata[k] for k in ("use_tool", "ill_formed", "truncated", "finish_reason")} == {
        "use_tool": True,
        "ill_formed": False,
        "truncated": False,
        "finish_reason": "stop",
    }
    assert (sub.metadata["use_tool"], sub.metadata["ill_formed"]) == (False, True)
    assert (main.metadata["agent_exit_code"], main.metadata["grading_solved"], main.metadata["instance_id"]) == (
        0,
        True,
        "calc",
    )
    assert (main.metadata["sample_idx"], main.metadata["num_samples"], main.metadata["workflow_id"]) == (
        0,
        3,
        "rollout-r-calc-3-1",
    )
    truncated = segment("main", [1, 2, 3, 10], 3, {3}).model_copy(update={"finish_reason": "length"})
    (cut,) = samples(None, segments=[truncated], result=result_of(0.0, False))
    assert cut.metadata["truncated"] and not cut.metadata["grading_solved"] and cut.reward == 0.0


def test_samples_are_cut_to_the_context_length_as_slime_cuts_them():
    (joined, continuation, _) = samples(options=sample_options(type("Args", (), {"rollout_max_context_len": 8})(), {}))
    assert len(joined.tokens) == 8 and joined.response_length == 5 and len(continuation.tokens) == 5


def test_without_a_turn_log_each_segment_is_a_sample():
    assert [s.tokens for s in samples(None)] == [s.tokens for s in SEGMENTS]


def test_seed_and_current_differ_where_slime_changed():
    old = seed.samples(drawn(), result_of(), Trajectory(SEGMENTS, LOG), None, SampleOptions())
    new = samples()
    assert (len(old), len(new)) == (4, 3)
    assert [s.reward for s in old] == [0.25] * 4 and [s.reward for s in new] == [1.0] * 3
    assert sum(len(s.tokens) for s in old) - sum(len(s.tokens) for s in new) == len(MAIN.tokens)
    assert sum(sum(s.loss_mask) for s in old) == sum(sum(s.loss_mask) for s in new)


def test_an_aborted_rollout_is_removed_from_the_loss():
    sample = current.aborted(drawn(), "wall_clock_timeout")
    assert sample.remove_sample and sample.status is Sample.Status.ABORTED and sample.loss_mask == [0]
    assert not seed.aborted(drawn(), "wall_clock_timeout").remove_sample
