"""A PolicySession records the weight version of every token it samples, live and after a restart from its spool."""

from __future__ import annotations

import aiohttp
import pytest

from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.session import SessionConfig
from durable_rollouts.contracts.tokens import SegmentSummary
from durable_rollouts.contracts.weight_versions import WeightVersionSpan
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.session import PolicySession
from durable_rollouts.policy.session_spool import SessionSpool
from durable_rollouts.policy.sglang_client import SGLangClient, parse_generation
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from tests.policy.replies import anthropic_reply

pytestmark = pytest.mark.asyncio(loop_scope="session")

CONFIG = SessionConfig(policy_url="http://policy.invalid")
SYSTEM = {"role": "system", "content": "You are a coding agent."}


class ScriptedClient:
    """Answers each /generate with the next scripted text, its ids real Qwen3.6 ids, its versions as given."""

    def __init__(self, renderer, replies: list[tuple[str, dict]]):
        self.renderer = renderer
        self.replies = list(replies)

    async def generate(self, base_url, input_ids, sampling_params, rid, routing_key, routed_width=None):
        text, versions = self.replies.pop(0)
        ids = self.renderer.encode(text) + [self.renderer.end_of_turn_id]
        spans = versions.get("spans")
        meta = {
            "finish_reason": {"type": "stop"},
            "output_token_logprobs": [[-0.5, t, None] for t in ids],
            **({"weight_version": versions["single"]} if "single" in versions else {}),
            **(
                {"weight_versions": [{**s, "end": len(ids) if s["end"] == -1 else s["end"]} for s in spans]}
                if spans
                else {}
            ),
        }
        return parse_generation({"output_ids": ids, "meta_info": meta}, self.renderer.vocab_size)


async def test_versions_follow_each_sampled_token_and_survive_the_spool(renderer, tmp_path):
    spool = SessionSpool(tmp_path)
    spool.open("s1", "secret", CONFIG)
    client = ScriptedClient(
        renderer,
        [
            ("Looking at the code.", {"single": "41"}),
            ("Still looking.", {"single": "41"}),
            (
                "Found it: the loop is off by one.",
                {
                    "single": "42",
                    "spans": [{"version": "41", "start": 0, "end": 3}, {"version": "42", "start": 3, "end": -1}],
                },
            ),
        ],
    )
    cpu = FairExecutor(1)
    try:
        await _three_turns_and_a_restart(renderer, tmp_path, spool, client, cpu)
    finally:
        cpu.shutdown()


async def _three_turns_and_a_restart(renderer, tmp_path, spool, client, cpu):
    session = PolicySession(
        "s1", CONFIG, renderer, client, cpu, journal=lambda delta, summary: spool.append("s1", delta, summary)
    )
    messages = [SYSTEM, {"role": "user", "content": "Fix the bug."}]
    for _ in range(3):
        outcome = await session.run_turn("main", "main", messages, [], None, anthropic_reply)
        reply = session.ledger.segments[0].messages[-1]
        assert outcome.output_tokens > 0
        messages = [*messages, reply, {"role": "user", "content": "Go on."}]
    spool.close()

    (segment,) = session.ledger.finish()
    sampled = [i for i, m in enumerate(segment.loss_mask) if m]
    runs = segment.sampled_runs()
    assert len(runs) == 3
    third = runs[2][0]
    assert segment.weight_version_spans == [
        WeightVersionSpan(start=sampled[0], end=third + 3, version="41"),
        WeightVersionSpan(start=third + 3, end=len(segment.tokens), version="42"),
    ], "the first two turns and the third's first three tokens are 41, one span enclosing the context between them"
    per_token = segment.token_weight_versions()
    assert all(v is None for v, m in zip(per_token, segment.loss_mask, strict=True) if not m)
    assert [per_token[i] for i in sampled].count("41") == (runs[0][1] - runs[0][0]) + (runs[1][1] - runs[1][0]) + 3

    (spooled,) = SessionSpool(tmp_path).load()
    restarted = PolicySession("s1", CONFIG, renderer, ScriptedClient(renderer, []), cpu)
    restarted.restore(spooled.turns)
    assert restarted.ledger.finish() == [segment]


async def test_against_the_scripted_server_every_token_has_the_version_it_was_sampled_with(renderer):
    server = ScriptedPolicyServer(renderer, default_policy="noop", delay_s=0.0, weight_version="7")
    url = await server.start()
    cpu = FairExecutor(1)
    try:
        async with aiohttp.ClientSession() as http:
            client = SGLangClient(http, vocab_size=renderer.vocab_size)
            session = PolicySession("s-e2e", SessionConfig(policy_url=url), renderer, client, cpu)
            messages = [SYSTEM, {"role": "user", "content": "Fix the bug."}]
            for new_version in ("8", "step-9", None):
                await session.run_turn("main", "main", messages, [], None, anthropic_reply)
                messages = [*messages, session.ledger.segments[0].messages[-1], {"role": "user", "content": "Go on."}]
                if new_version is not None:
                    async with http.post(
                        f"{url}/update_weight_version", json={"new_version": new_version, "abort_all_requests": False}
                    ) as answer:
                        assert answer.status == 200, await answer.text()
    finally:
        cpu.shutdown()
        await server.stop()
    segments = session.ledger.finish()
    records = {(tuple(r.input_ids), tuple(r.output_ids)): r.output_versions for r in server.records}
    runs = [(segment, start, end) for segment in segments for start, end in segment.sampled_runs()]
    assert len(runs) == 3
    for segment, start, end in runs:
        sampled_with = records[(tuple(segment.tokens[:start]), tuple(segment.tokens[start:end]))]
        assert segment.token_weight_versions()[start:end] == sampled_with
    summaries = [SegmentSummary.of(segment) for segment in segments]
    result = RolloutResult(
        workflow_id="w", instance_id="i", sample_index=0, group_index=0, status="completed", segments=summaries
    )
    assert (result.oldest_weight_version, result.newest_weight_version, result.weight_version_changes) == (
        "7",
        "step-9",
        2,
    )
