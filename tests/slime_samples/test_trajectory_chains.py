"""Today's slime linearisation: compactions join the conversation they summarise, drift drops or forks."""

from slime_samples.trajectory_chains import common_prefix_length, linearise
from tests.slime_samples.segments import COMPACTION, CONTINUATION, MAIN, SUBAGENT, segment


def test_a_compaction_is_appended_to_the_conversation_it_summarises():
    main, continuation, subagent = linearise([MAIN, COMPACTION, CONTINUATION, SUBAGENT])
    assert main.kinds == ["main", "compaction"] and continuation.kinds == ["continuation"] and subagent.kinds == ["subagent"]
    merged = main.segment()
    assert merged.tokens == COMPACTION.tokens and merged.prompt_length == MAIN.prompt_length
    assert merged.loss_mask == [0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1]
    assert merged.rollout_log_probs[:9] == MAIN.rollout_log_probs and merged.rollout_log_probs[9:] == COMPACTION.rollout_log_probs[9:]
    assert [(s.start, s.end, s.version) for s in merged.weight_version_spans] == [(3, 9, "3"), (11, 13, "4")]
    assert (merged.turns, merged.tool_call_turns) == (2, 1) and main.notes == {}
    assert sum(len(c.segment().tokens) for c in (main, continuation, subagent)) < sum(
        len(s.tokens) for s in (MAIN, COMPACTION, CONTINUATION, SUBAGENT)
    )
    assert sum(sum(c.segment().loss_mask) for c in (main, continuation, subagent)) == sum(
        sum(s.loss_mask) for s in (MAIN, COMPACTION, CONTINUATION, SUBAGENT)
    ), "every trained token is trained exactly once"


def test_a_compaction_that_re_renders_history_drops_the_stale_tail_and_counts_it():
    drifted = segment("compaction", [1, 2, 3, 10, 11, 4, 5, 99, 6, 7, 20, 21], 10, {10, 11})
    (chain,) = linearise([MAIN, drifted])
    assert chain.tokens == drifted.tokens
    assert chain.loss_mask == [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1], "tokens after the common prefix are the compaction's"
    assert chain.notes == {"tito_dropped_tokens": 2, "tito_dropped_turns": 1}


def test_a_drop_of_many_trained_tokens_forks_so_none_is_lost():
    drifted = segment("compaction", [1, 2, 3, 10, 11, 4, 5, 99, 6, 7, 20, 21], 10, {10, 11})
    fork, chain = linearise([MAIN, drifted], fork_min_loss_tokens=2)
    assert fork.tokens == MAIN.tokens and fork.loss_mask == [0] * 7 + [1, 1], "only the tokens the main sequence drops"
    assert fork.log_probs[7:] == MAIN.rollout_log_probs[7:] and fork.segment().weight_version_spans[0].start == 7
    assert fork.notes == {"tito_drift_fork": True, "tito_drift_fork_at_turn": 2, "tito_drift_fork_loss_tokens": 2}
    assert chain.notes == {"tito_drift_forks_emitted": 1} and chain.kinds == ["main", "compaction"]
    assert sum(fork.loss_mask) + sum(chain.loss_mask) == sum(MAIN.loss_mask) + sum(drifted.loss_mask)


def test_a_compaction_sharing_less_than_the_first_prompt_or_on_another_lane_stands_alone():
    stranger = segment("compaction", [1, 9, 9, 9, 20], 4, {4})
    other_lane = segment("compaction", MAIN.tokens + [6, 20], 10, {10}, lane="agent:a1")
    chains = linearise([MAIN, stranger, other_lane])
    assert [c.kinds for c in chains] == [["main"], ["compaction"], ["compaction"]]


def test_the_longest_shared_prefix_wins_and_the_latest_on_a_tie():
    first = segment("main", [1, 2, 3, 10], 3, {3})
    second = segment("continuation", [1, 2, 3, 10, 4, 11], 5, {5})
    compaction = segment("compaction", [1, 2, 3, 10, 4, 11, 6, 20], 7, {7})
    chains = linearise([first, second, compaction])
    assert [c.kinds for c in chains] == [["main"], ["continuation", "compaction"]]
    twin = segment("continuation", [1, 2, 3, 10], 3, {3})
    chains = linearise([first, twin, segment("compaction", [1, 2, 3, 10, 6, 20], 5, {5})])
    assert [c.kinds for c in chains] == [["main"], ["continuation", "compaction"]]


def test_common_prefix_length_across_blocks():
    a = list(range(10_000))
    assert common_prefix_length(a, a) == 10_000 and common_prefix_length(a, a[:5000]) == 5000
    b = a.copy()
    b[8191] = -1
    assert common_prefix_length(a, b) == 8191 and common_prefix_length([], a) == 0
