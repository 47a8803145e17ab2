"""Today's slime sample contract on ledger segments: fresh samples, full reward, today's metadata keys."""

from slime_samples import current, seed
from tests.slime_sample import Sample
from tests.slime_samples.segments import COMPACTION, CONTINUATION, MAIN, SUBAGENT, result_of, segment


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


def test_every_sample_is_fresh_with_only_the_identity_fields_and_the_full_reward():
    base = drawn()
    out = current.samples(base, result_of(), [MAIN, COMPACTION, CONTINUATION, SUBAGENT], None)
    assert len(out) == 3 and all(s is not base for s in out)
    for s in out:
        assert (s.index, s.group_index, s.rollout_id, s.prompt, s.label) == (3, 1, 3, "fix it", "calc")
        assert (s.session_id, s.train_metadata, s.remove_sample, s.reward) == (None, None, False, 1.0)
        assert s.status is Sample.Status.COMPLETED and s.metadata["image"] == "img"
        assert s.metadata is not base.metadata and len(s.loss_mask) == len(s.rollout_log_probs) == s.response_length
    assert base.metadata == {"image": "img"} and base.tokens == [], "the drawn sample is left as it was"
    assert [s.metadata["segment_kinds"] for s in out] == [["main", "compaction"], ["continuation"], ["subagent"]]


def test_todays_metadata_keys():
    truncated = segment("main", [1, 2, 3, 10], 3, {3}).model_copy(update={"finish_reason": "length"})
    main, sub = current.samples(drawn(), result_of(), [MAIN, SUBAGENT], None)
    (cut,) = current.samples(drawn(), result_of(0.0, False), [truncated], None)
    assert {k: main.metadata[k] for k in ("use_tool", "ill_formed", "truncated", "finish_reason")} == {
        "use_tool": True,
        "ill_formed": False,
        "truncated": False,
        "finish_reason": "stop",
    }
    assert (sub.metadata["use_tool"], sub.metadata["ill_formed"]) == (False, True)
    assert cut.metadata["truncated"] and not cut.metadata["grading_solved"] and cut.reward == 0.0
    assert (main.metadata["agent_exit_code"], main.metadata["grading_solved"], main.metadata["instance_id"]) == (0, True, "calc")
    assert (main.metadata["sample_idx"], main.metadata["num_samples"], main.metadata["workflow_id"]) == (0, 2, "rollout-r-calc-3-1")


def test_seed_and_current_differ_where_slime_changed():
    segments = [MAIN, COMPACTION, CONTINUATION, SUBAGENT]
    old, new = seed.samples(drawn(), result_of(), segments, None), current.samples(drawn(), result_of(), segments, None)
    assert (len(old), len(new)) == (4, 3)
    assert [s.reward for s in old] == [0.25] * 4 and [s.reward for s in new] == [1.0] * 3
    assert sum(len(s.tokens) for s in old) - sum(len(s.tokens) for s in new) == len(MAIN.tokens)
    assert sum(sum(s.loss_mask) for s in old) == sum(sum(s.loss_mask) for s in new)


def test_an_aborted_rollout_is_removed_from_the_loss():
    sample = current.aborted(drawn(), "wall_clock_timeout")
    assert sample.remove_sample and sample.status is Sample.Status.ABORTED and sample.loss_mask == [0]
    assert not seed.aborted(drawn(), "wall_clock_timeout").remove_sample
