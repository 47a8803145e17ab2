"""Token capture: segments hold exactly what the policy sampled, with proof of context.

The property test drives a ``TokenLedger`` through random multi-turn sessions
(tool results, new user queries that make the template drop earlier reasoning,
retried requests whose reply was lost, sub-agent lanes, compaction calls,
length cut-offs, non-canonical sampled tokenisations) against a recording
fake sampler whose weights change between and during requests (reported in
sglang 0.5.23's reply shapes, parsed by the real client code), then checks the
invariants the trainer relies on: every trained token is a sample in exactly
that context, with its log-prob and the weight version that sampled it, and
the version spans are the fewest that say so.
"""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.tokens import SegmentSummary, TokenSegment
from durable_rollouts.contracts.weight_versions import WeightVersionSpan, collapse_runs, order_weight_versions
from durable_rollouts.policy.anthropic_reply import reply_blocks
from durable_rollouts.policy.anthropic_translation import translate_request
from durable_rollouts.policy.parsers import parse_completion
from durable_rollouts.policy.sglang_client import parse_generation
from durable_rollouts.policy.token_capture import LedgerDelta, TokenLedger, message_key
from durable_rollouts.policy.trajectory_packing import Trajectory, decode_trajectory, encode_trajectory

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "Bash",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
SYSTEM = {"role": "system", "content": "You are a coding agent. Primary working directory: /repo"}


class RecordingSampler:
    """Plays the policy server: returns scripted completions as token ids and remembers every sample."""

    def __init__(self, renderer, seed: int):
        self.renderer = renderer
        self.rng = random.Random(seed)
        self.records: list[tuple[list[int], list[int], list[float]]] = []

    def sample(
        self, prompt_ids: list[int], completion: str, cut: bool, canonical: bool
    ) -> tuple[list[int], list[float], str]:
        renderer = self.renderer
        if canonical:
            ids = renderer.encode(completion)
        else:
            ids = [t for ch in completion for t in renderer.encode(ch)]
        if cut:
            ids, finish = ids[: max(1, len(ids) // 2)], "length"
        else:
            ids, finish = ids + [renderer.end_of_turn_id], "stop"
        log_probs = [-self.rng.random() * 4 for _ in ids]
        self.records.append((list(prompt_ids), ids, log_probs))
        return ids, log_probs, finish


class WeightClock:
    """The server's weights: updated between requests and during them, reported the way sglang 0.5.23 does.

    Each reply comes in one of its shapes: ``weight_versions`` spans (a change
    mid-reply ends one span and starts the next) with ``weight_version`` the
    last span's; ``weight_version`` alone; or neither (a server that does not
    report versions). ``reply`` returns the body and what each token truly had.
    """

    def __init__(self, seed: int, numeric: bool):
        self.rng = random.Random(seed)
        self.numeric = numeric
        self.step = 0

    def version(self) -> str:
        return str(self.step) if self.numeric else f"policy@{self.step:x}"

    def reply(self, ids: list[int], log_probs: list[float], finish: str) -> tuple[dict, list[str | None]]:
        if self.rng.random() < 0.35:
            self.step += 1
        meta = {
            "finish_reason": {"type": finish},
            "completion_tokens": len(ids),
            "output_token_logprobs": [[lp, t, None] for lp, t in zip(log_probs, ids, strict=True)],
        }
        shape = self.rng.choice(["spans", "spans", "single", "none"])
        truth: list[str | None] = [None] * len(ids)
        if shape == "spans":
            cuts = sorted(self.rng.sample(range(1, len(ids)), k=min(self.rng.randint(0, 2), len(ids) - 1)))
            spans, start = [], 0
            for end in [*cuts, len(ids)]:
                if spans:
                    self.step += 1
                spans.append({"version": self.version(), "start": start, "end": end})
                truth[start:end] = [self.version()] * (end - start)
                start = end
            meta.update(weight_versions=spans, weight_version=spans[-1]["version"])
        elif shape == "single":
            meta["weight_version"] = self.version()
            truth = [self.version()] * len(ids)
        return {"output_ids": ids, "meta_info": meta}, truth


def reply_message_for(text: str) -> dict:
    parsed = parse_completion(text, "auto", schemas={"Bash": TOOLS[0]["function"]["parameters"]})
    blocks = reply_blocks(parsed)
    return translate_request({"messages": [{"role": "assistant", "content": blocks}]}).messages[0], blocks


def completion(rng: random.Random, with_tool: bool) -> str:
    thought = f"<think>\nstep {rng.randint(0, 999)} reasoning\n</think>\n\n"
    if with_tool:
        return (
            thought + f"Running it.\n\n<tool_call>\n<function=Bash>\n<parameter=command>\nls -la "
            f"/tmp/{rng.randint(0, 99)}\n</parameter>\n</function>\n</tool_call>"
        )
    return thought + f"Done with {rng.randint(0, 99)}."


ACTIONS = st.sampled_from(
    ["tool_result", "user_query", "retry", "subagent", "compaction", "cut", "non_canonical", "rewritten_echo"]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(ACTIONS, min_size=1, max_size=14), seed=st.integers(0, 10_000), numeric=st.booleans())
def test_every_trained_token_was_sampled_in_exactly_that_context(renderer, actions, seed, numeric):
    ledger = TokenLedger(renderer)
    sampler = RecordingSampler(renderer, seed)
    clock = WeightClock(seed + 1, numeric)
    versions_of: dict[tuple[tuple[int, ...], tuple[int, ...]], list[str | None]] = {}
    rng = random.Random(seed)
    lanes = {"main": [SYSTEM, {"role": "user", "content": "Fix the bug."}]}
    deltas = []
    for action in actions:
        lane = "agent:1" if action == "subagent" else "main"
        if lane not in lanes:
            lanes[lane] = [SYSTEM, {"role": "user", "content": "Sub-task: look around."}]
        messages = lanes[lane]
        kind = "subagent" if lane != "main" else "main"
        if action == "compaction":
            messages = messages + [
                {"role": "user", "content": "Your task is to create a detailed summary of the conversation so far"}
            ]
            kind = "compaction"
        plan = ledger.plan(lane, kind, messages, TOOLS)
        event(f"plan mode: {plan.mode}")
        assert plan.message_keys == tuple(message_key(m) for m in plan.messages), (
            "keys reused from a segment are the messages' own"
        )
        text = completion(rng, with_tool=action != "compaction")
        ids, log_probs, finish = sampler.sample(
            plan.prompt_ids, text, cut=action == "cut", canonical=action != "non_canonical"
        )
        body, truth = clock.reply(ids, log_probs, finish)
        generation = parse_generation(body, renderer.vocab_size)
        assert (generation.output_ids, generation.log_probs) == (ids, log_probs)
        versions_of[(tuple(plan.prompt_ids), tuple(ids))] = truth
        reply, _ = reply_message_for(renderer.decode(ids).removesuffix(renderer.end_of_turn))
        delta = ledger.record(plan, reply, ids, log_probs, finish, generation.weight_versions)
        deltas.append(json.loads(json.dumps(dataclasses.asdict(delta))))
        if action in ("retry", "compaction"):
            continue
        following = (
            {"role": "user", "content": f"Also check case {rng.randint(0, 9)}."}
            if action == "user_query"
            else {"role": "tool", "tool_call_id": "t", "content": f"output {rng.randint(0, 9)}"}
        )
        echoed = rewritten(reply) if action == "rewritten_echo" else reply
        lanes[lane] = messages + [echoed, following]

    segments = ledger.finish()
    replayed = TokenLedger(renderer)
    for delta in deltas:
        replayed.apply(LedgerDelta(**delta))
    assert replayed.finish() == segments, "a worker restarted from the spool must hold the same segments"
    log = ledger.turn_log()
    assert replayed.turn_log() == log, "and the same turn log"
    assert decode_trajectory(encode_trajectory(segments, log)) == Trajectory(segments, log), (
        "the trajectory store keeps versions bit-exact"
    )
    sampled = {(tuple(p), tuple(o)) for p, o, _ in sampler.records}
    for turn in log.turns:
        tokens = segments[turn.segment].tokens
        assert (tuple(tokens[: turn.prompt_end]), tuple(tokens[turn.prompt_end : turn.end])) in sampled, (
            "each logged turn is a call as sent"
        )
    records = {(tuple(p), tuple(o)): lp for p, o, lp in sampler.records}
    for segment in segments:
        assert len(segment.tokens) == len(segment.loss_mask) == len(segment.rollout_log_probs)
        assert not any(segment.loss_mask[: segment.prompt_length])
        truth: list[str | None] = [None] * len(segment.tokens)
        for start, end in segment.sampled_runs():
            key = (tuple(segment.tokens[:start]), tuple(segment.tokens[start:end]))
            assert key in records, "a loss_mask=1 run is not a sample the server produced in that context"
            assert records[key] == segment.rollout_log_probs[start:end]
            truth[start:end] = versions_of[key]
        assert all(lp == 0.0 for lp, m in zip(segment.rollout_log_probs, segment.loss_mask, strict=True) if not m)
        assert segment.token_weight_versions() == truth, (
            "every sampled token carries what the server reported for it; context none"
        )
        assert segment.weight_version_spans == fewest_spans(segment.loss_mask, truth)
        event(
            f"version spans per segment: "
            f"{min(len(segment.weight_version_spans), 3)}{'+' if len(segment.weight_version_spans) >= 3 else ''}"
        )
        summary = SegmentSummary.of(segment)
        assert summary.weight_version_runs == collapse_runs(v for v in truth if v is not None)
        assert summary.weight_version_changes == max(len(summary.weight_version_runs) - 1, 0)


def fewest_spans(mask: list[int], versions: list[str | None]) -> list[WeightVersionSpan]:
    """The reference: walk the tokens; a sampled token extends the open span of its version or opens one."""
    spans: list[WeightVersionSpan] = []
    open_version: str | None = None
    for i, (m, version) in enumerate(zip(mask, versions, strict=True)):
        if not m:
            continue
        if version is not None and version == open_version:
            spans[-1] = WeightVersionSpan(start=spans[-1].start, end=i + 1, version=version)
        elif version is not None:
            spans.append(WeightVersionSpan(start=i, end=i + 1, version=version))
        open_version = version
    return spans


def rewritten(reply: dict) -> dict:
    """What Claude Code does to echoed Bash calls: it strips a leading ``cd <dir> &&``."""
    calls = [
        {**c, "function": {**c["function"], "arguments": {"command": "rewritten by the client"}}}
        for c in reply.get("tool_calls", [])
    ]
    return {**reply, "tool_calls": calls} if calls else reply


def _tool_turn_conversation(renderer, turns: int):
    """A canonical agent loop: each sampled output is the canonical tokenisation of its text."""
    ledger = TokenLedger(renderer)
    messages = [SYSTEM, {"role": "user", "content": "Fix the bug in parser.py"}]
    rng = random.Random(7)
    plans = []
    for _ in range(turns):
        plan = ledger.plan("main", "main", messages, TOOLS)
        plans.append(plan)
        text = completion(rng, with_tool=True)
        ids = renderer.encode(text) + [renderer.end_of_turn_id]
        reply, _ = reply_message_for(text)
        ledger.record(plan, reply, ids, [-0.5] * len(ids), "stop")
        messages = messages + [reply, {"role": "tool", "tool_call_id": "t", "content": f"result {rng.random()}\n"}]
    return ledger, plans, messages


def test_incremental_prompt_ids_equal_a_full_retokenisation(renderer):
    ledger, plans, messages = _tool_turn_conversation(renderer, turns=6)
    assert [p.mode for p in plans] == ["fresh"] + ["extend"] * 5
    for plan in plans:
        assert plan.prompt_ids.tolist() == renderer.encode(renderer.render(plan.messages, TOOLS, True))
    assert all(p.rendered_tokens < p.prompt_length for p in plans[1:]), "only the new tail is tokenised"
    assert len(ledger.finish()) == 1


def test_new_user_query_drops_reasoning_and_opens_a_new_segment(renderer):
    ledger, _, messages = _tool_turn_conversation(renderer, turns=2)
    messages = messages + [{"role": "user", "content": "Now also add a test."}]
    plan = ledger.plan("main", "main", messages, TOOLS)
    assert plan.mode == "fresh", "the template re-rendered history without reasoning: not provable, new segment"
    ids = renderer.encode("Sure.") + [renderer.end_of_turn_id]
    ledger.record(plan, {"role": "assistant", "content": "Sure."}, ids, [-0.1] * len(ids), "stop")
    first, second = ledger.finish()
    assert second.tokens[: second.prompt_length] == plan.prompt_ids.tolist()
    assert second.loss_mask[second.prompt_length :] == [1] * len(ids)


def test_a_segment_counts_its_tool_calling_and_ill_formed_turns_and_a_retry_replaces_the_count(renderer):
    ledger, _, messages = _tool_turn_conversation(renderer, turns=3)
    plan = ledger.plan("main", "main", messages, TOOLS)
    ids = renderer.encode("Broken.") + [renderer.end_of_turn_id]
    ledger.record(plan, {"role": "assistant", "content": "Broken."}, ids, [-0.1] * len(ids), "stop", ill_formed=True)
    counted = ledger.segments[0].to_contract()
    assert (counted.turns, counted.tool_call_turns, counted.ill_formed_turns) == (4, 3, 1)
    retry = ledger.plan("main", "main", messages, TOOLS)
    delta = ledger.record(retry, {"role": "assistant", "content": "Fine."}, ids, [-0.1] * len(ids), "stop")
    assert delta.rollback and not delta.ill_formed
    (segment,) = ledger.finish()
    assert (segment.turns, segment.tool_call_turns, segment.ill_formed_turns) == (4, 3, 0)


def test_retry_of_an_unseen_reply_replaces_it(renderer):
    ledger = TokenLedger(renderer)
    messages = [SYSTEM, {"role": "user", "content": "hello"}]
    first = ledger.plan("main", "main", messages, TOOLS)
    ledger.record(
        first, {"role": "assistant", "content": "A"}, [1, 2, renderer.end_of_turn_id], [-1.0, -1.0, -1.0], "stop"
    )
    again = ledger.plan("main", "main", messages, TOOLS)
    assert again.mode == "retry" and again.prompt_ids == first.prompt_ids
    ledger.record(again, {"role": "assistant", "content": "B"}, [3, renderer.end_of_turn_id], [-2.0, -2.0], "stop")
    (segment,) = ledger.finish()
    assert segment.tokens == first.prompt_ids.tolist() + [3, renderer.end_of_turn_id]
    assert segment.turns == 1


def test_output_without_end_of_turn_gets_it_as_context_not_as_a_sample(renderer):
    ledger = TokenLedger(renderer)
    messages = [SYSTEM, {"role": "user", "content": "write a long essay"}]
    plan = ledger.plan("main", "main", messages, TOOLS)
    cut = renderer.encode("It was a dark")
    reply = {"role": "assistant", "content": "It was a dark"}
    ledger.record(plan, reply, cut, [-0.3] * len(cut), "length")
    follow = ledger.plan(
        "main", "main", messages + [reply, {"role": "user", "content": "Output token limit hit."}], TOOLS
    )
    assert follow.mode == "extend"
    tail = follow.prompt_ids[len(plan.prompt_ids) + len(cut) :]
    assert tail[0] == renderer.end_of_turn_id


def test_a_client_rewritten_echo_of_our_reply_still_extends_with_what_was_sampled(renderer):
    ledger = TokenLedger(renderer)
    messages = [SYSTEM, {"role": "user", "content": "Fix the bug in parser.py"}]
    plan = ledger.plan("main", "main", messages, TOOLS)
    text = completion(random.Random(1), with_tool=True)
    ids = renderer.encode(text) + [renderer.end_of_turn_id]
    reply, _ = reply_message_for(text)
    ledger.record(plan, reply, ids, [-0.5] * len(ids), "stop")
    follow = messages + [rewritten(reply), {"role": "tool", "tool_call_id": "t", "content": "ok"}]
    second = ledger.plan("main", "main", follow, TOOLS)
    assert second.mode == "extend"
    assert second.prompt_ids[: len(plan.prompt_ids) + len(ids)].tolist() == plan.prompt_ids.tolist() + ids
    assert "rewritten by the client" not in renderer.decode(second.prompt_ids.tolist())


def versioned_segment(mask: list[int], spans: list[tuple[int, int, str]], prompt_length: int = 1) -> TokenSegment:
    return TokenSegment(
        kind="main",
        tokens=list(range(len(mask))),
        loss_mask=mask,
        rollout_log_probs=[-1.0 if m else 0.0 for m in mask],
        prompt_length=prompt_length,
        turns=2,
        finish_reason="stop",
        weight_version_spans=[WeightVersionSpan(start=a, end=b, version=v) for a, b, v in spans],
    )


def test_a_span_may_enclose_context_and_the_per_token_view_skips_it():
    segment = versioned_segment([0, 1, 1, 0, 0, 1, 1, 1], [(1, 7, "3"), (7, 8, "4")])
    assert segment.token_weight_versions() == [None, "3", "3", None, None, "3", "3", "4"]
    assert segment.weight_version_runs() == ["3", "4"]
    assert versioned_segment([0, 1, 1], []).token_weight_versions() == [None, None, None]


@pytest.mark.parametrize(
    ("spans", "why"),
    [
        ([(1, 3, "3"), (2, 6, "4")], "out of order"),
        ([(5, 6, "3"), (1, 3, "4")], "out of order"),
        ([(1, 1, "3")], "empty"),
        ([(1, 9, "3")], "outside"),
        ([(0, 3, "3")], "sampled tokens"),
        ([(1, 4, "3")], "sampled tokens"),
        ([(3, 6, "3")], "sampled tokens"),
        ([(1, 3, "3"), (5, 6, "3")], "one span"),
    ],
)
def test_spans_must_claim_exactly_sampled_tokens_in_order_and_be_the_fewest(spans, why):
    with pytest.raises(ValueError, match=why):
        versioned_segment([0, 1, 1, 0, 0, 1, 1, 1], spans)


def test_two_spans_of_one_version_stand_apart_only_around_an_unversioned_sample():
    segment = versioned_segment([0, 1, 1, 0, 1, 1], [(1, 2, "3"), (4, 6, "3")])
    assert segment.token_weight_versions() == [None, "3", None, None, "3", "3"]
    assert segment.weight_version_runs() == ["3"]


def test_a_segment_stored_before_versions_existed_still_loads():
    old = versioned_segment([0, 1], []).model_dump()
    del old["weight_version_spans"]
    assert TokenSegment.model_validate(old).weight_version_spans == []


@pytest.mark.parametrize(
    ("runs", "oldest", "newest"),
    [
        (["9", "10", "8"], "8", "10"),
        (["-1", "0"], "-1", "0"),
        (["step-2", "step-10", "step-1"], "step-2", "step-1"),
        (["7", "warmup", "6"], "7", "6"),
        ([], None, None),
    ],
)
def test_versions_order_as_integers_when_all_are_else_by_first_appearance(runs, oldest, newest):
    summary = SegmentSummary(
        kind="main", lane="main", n_tokens=10, prompt_length=1, n_sampled=5, turns=3, weight_version_runs=runs
    )
    assert (summary.oldest_weight_version, summary.newest_weight_version) == (oldest, newest)
    assert summary.weight_version_changes == max(len(runs) - 1, 0)
    assert order_weight_versions(["1", "01", "1"]) == ["1", "01"], "distinct strings, equal as integers: stable"


def test_the_rollout_summary_spans_its_segments_in_order():
    main = SegmentSummary.of(versioned_segment([0, 1, 1, 0, 1, 1], [(1, 3, "4"), (4, 6, "5")]))
    compaction = SegmentSummary.of(versioned_segment([0, 1, 1], [(1, 3, "5")]))
    continuation = SegmentSummary.of(versioned_segment([0, 1, 1], [(1, 2, "6"), (2, 3, "5")]))
    result = RolloutResult(
        workflow_id="w",
        instance_id="i",
        sample_index=0,
        group_index=0,
        status="completed",
        segments=[main, compaction, continuation],
    )
    assert (result.oldest_weight_version, result.newest_weight_version, result.weight_version_changes) == ("4", "6", 3)
    wire = result.model_dump(mode="json")
    assert (wire["oldest_weight_version"], wire["newest_weight_version"], wire["weight_version_changes"]) == (
        "4",
        "6",
        3,
    )
    assert (
        wire["segments"][0]["weight_version_runs"] == ["4", "5"] and wire["segments"][2]["oldest_weight_version"] == "5"
    )
    assert RolloutResult.model_validate(wire) == result, (
        "the derived fields are recomputed, not trusted, on the way back in"
    )
    empty = RolloutResult(workflow_id="w", instance_id="i", sample_index=0, group_index=0, status="aborted")
    assert (empty.oldest_weight_version, empty.newest_weight_version, empty.weight_version_changes) == (None, None, 0)


def test_sampled_runs_are_the_maximal_runs_of_trained_positions():
    segment = TokenSegment(
        kind="main", tokens=list(range(9)), loss_mask=[0, 0, 1, 1, 0, 1, 0, 1, 1],
        rollout_log_probs=[0, 0, -1, -1, 0, -1, 0, -1, -1], prompt_length=2, turns=3, finish_reason="stop",
    )  # fmt: skip
    assert segment.sampled_runs() == [(2, 4), (5, 6), (7, 9)]
