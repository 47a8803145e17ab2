"""Token capture: segments hold exactly what the policy sampled, with proof of context.

The property test drives a ``TokenLedger`` through random multi-turn sessions
(tool results, new user queries that make the template drop earlier reasoning,
retried requests whose reply was lost, sub-agent lanes, compaction calls,
length cut-offs, non-canonical sampled tokenisations) against a recording
fake sampler, then checks the invariant the trainer relies on.
"""

from __future__ import annotations

import dataclasses
import json
import random

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from policy.anthropic_reply import reply_blocks
from policy.anthropic_translation import translate_request
from policy.completion_parser import parse_completion
from policy.token_capture import LedgerDelta, TokenLedger

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

    def sample(self, prompt_ids: list[int], completion: str, cut: bool, canonical: bool) -> tuple[list[int], list[float], str]:
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


def reply_message_for(text: str) -> dict:
    parsed = parse_completion(text, "auto", {"Bash": TOOLS[0]["function"]["parameters"]})
    blocks = reply_blocks(parsed)
    return translate_request({"messages": [{"role": "assistant", "content": blocks}]}).messages[0], blocks


def completion(rng: random.Random, with_tool: bool) -> str:
    thought = f"<think>\nstep {rng.randint(0, 999)} reasoning\n</think>\n\n"
    if with_tool:
        return (
            thought
            + f"Running it.\n\n<tool_call>\n<function=Bash>\n<parameter=command>\nls -la /tmp/{rng.randint(0, 99)}\n</parameter>\n</function>\n</tool_call>"
        )
    return thought + f"Done with {rng.randint(0, 99)}."


ACTIONS = st.sampled_from(["tool_result", "user_query", "retry", "subagent", "compaction", "cut", "non_canonical", "rewritten_echo"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(ACTIONS, min_size=1, max_size=14), seed=st.integers(0, 10_000))
def test_every_trained_token_was_sampled_in_exactly_that_context(renderer, actions, seed):
    ledger = TokenLedger(renderer)
    sampler = RecordingSampler(renderer, seed)
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
            messages = messages + [{"role": "user", "content": "Your task is to create a detailed summary of the conversation so far"}]
            kind = "compaction"
        plan = ledger.plan(lane, kind, messages, TOOLS)
        event(f"plan mode: {plan.mode}")
        text = completion(rng, with_tool=action != "compaction")
        ids, log_probs, finish = sampler.sample(plan.prompt_ids, text, cut=action == "cut", canonical=action != "non_canonical")
        reply, _ = reply_message_for(renderer.decode(ids).removesuffix(renderer.end_of_turn))
        deltas.append(json.loads(json.dumps(dataclasses.asdict(ledger.record(plan, reply, ids, log_probs, finish)))))
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
    records = {(tuple(p), tuple(o)): lp for p, o, lp in sampler.records}
    for segment in segments:
        assert len(segment.tokens) == len(segment.loss_mask) == len(segment.rollout_log_probs)
        assert not any(segment.loss_mask[: segment.prompt_length])
        for start, end in _sampled_runs(segment.loss_mask):
            key = (tuple(segment.tokens[:start]), tuple(segment.tokens[start:end]))
            assert key in records, "a loss_mask=1 run is not a sample the server produced in that context"
            assert records[key] == segment.rollout_log_probs[start:end]
        assert all(lp == 0.0 for lp, m in zip(segment.rollout_log_probs, segment.loss_mask, strict=True) if not m)


def rewritten(reply: dict) -> dict:
    """What Claude Code does to echoed Bash calls: it strips a leading ``cd <dir> &&``."""
    calls = [{**c, "function": {**c["function"], "arguments": {"command": "rewritten by the client"}}} for c in reply.get("tool_calls", [])]
    return {**reply, "tool_calls": calls} if calls else reply


def _sampled_runs(mask: list[int]) -> list[tuple[int, int]]:
    runs, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            runs.append((start, i))
            start = None
    return runs


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


def test_retry_of_an_unseen_reply_replaces_it(renderer):
    ledger = TokenLedger(renderer)
    messages = [SYSTEM, {"role": "user", "content": "hello"}]
    first = ledger.plan("main", "main", messages, TOOLS)
    ledger.record(first, {"role": "assistant", "content": "A"}, [1, 2, renderer.end_of_turn_id], [-1.0, -1.0, -1.0], "stop")
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
    follow = ledger.plan("main", "main", messages + [reply, {"role": "user", "content": "Output token limit hit."}], TOOLS)
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
