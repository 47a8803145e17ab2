"""Both sample contracts over a session built from real Claude Code requests: main, compaction, post-compaction,
sub-agent, answered by the scripted policy server through the adapter over HTTP.

The requests are the captured bodies and headers (``tests/fixtures/claude_code_wire``), sent in the order Claude
Code sends them; the compaction request's history carries the main turn's real reply in place of the captured
one, as Claude Code echoes what it was answered. The Qwen3.6 template renders that history without the reply's
reasoning (the summary request is a new user message), so the compaction call no longer extends what was
sampled: exactly the situation today's slime resolves by dropping (or, past its threshold, forking) the stale
tail. What the trainer gets from the same segments:

* ``seed``: four samples (the compaction one repeats the main conversation as its context), each 1/4 of the reward;
* ``current``: three (the compaction appended to the main conversation), each with the full reward; the main
  reply's trained tokens fall in the re-rendered tail and are dropped and counted, as slime drops them below
  its 1024-token fork threshold; at a threshold they reach, they come back as a drift-fork sample instead.
"""

from __future__ import annotations

import copy

import aiohttp
import pytest

from contracts.rollout import SamplingParams, SessionConfig
from slime_samples import current, seed
from slime_samples.trajectory_chains import common_prefix_length
from tests.slime_sample import Sample
from tests.slime_samples.segments import result_of
from tests.wire_fixtures import captured

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def post(adapter, secret: str, headers: dict, body: dict) -> dict:
    sent = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "content-length", "host")}
    sent["Authorization"] = f"Bearer {secret}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{adapter.url}/v1/messages", json={**body, "stream": False}, headers=sent) as response:
            assert response.status == 200, await response.text()
            return await response.json()


async def session_from_captures(adapter, policy_server):
    ticket = adapter.registry.open_session(SessionConfig(policy_url=policy_server.url, sampling=SamplingParams(max_new_tokens=512)))
    policy_server.set_policy(ticket.session_id, "oracle")
    headers, compaction = captured("compact_request.json")
    main = copy.deepcopy(compaction)
    main["messages"] = main["messages"][:2]
    reply = await post(adapter, ticket.secret, captured("turn1_body.json")[0], main)
    (call,) = [block for block in reply["content"] if block["type"] == "tool_use"]
    history = compaction["messages"]
    history[2] = {"role": "assistant", "content": reply["content"]}
    for block in history[3]["content"]:
        if block["type"] == "tool_result":
            block["tool_use_id"] = call["id"]
    await post(adapter, ticket.secret, headers, compaction)
    await post(adapter, ticket.secret, *captured("post_compact_request.json"))
    await post(adapter, ticket.secret, *captured("subagent_request.json"))
    return await adapter.registry.finish_session(ticket.session_id)


async def test_both_contracts_over_real_claude_code_requests(adapter, policy_server):
    result = await session_from_captures(adapter, policy_server)
    kinds = [(s.lane, s.kind) for s in result.segments]
    assert kinds == [("main", "main"), ("main", "compaction"), ("main", "continuation"), ("agent:a74736570725ddfdc", "subagent")]
    main, compaction, continuation, subagent = result.segments
    shared = common_prefix_length(main.tokens, compaction.tokens)
    assert shared == main.prompt_length, "the re-rendered history differs exactly where the main reply begins"

    old = seed.samples(Sample(index=0, group_index=0), result_of(), result.segments, None)
    new = current.samples(Sample(index=0, group_index=0), result_of(), result.segments, None)
    forked = current.samples(Sample(index=0, group_index=0), result_of(), result.segments, None, fork_min_loss_tokens=sum(main.loss_mask))
    totals = {
        name: (sum(len(s.tokens) for s in out), sum(sum(s.loss_mask) for s in out))
        for name, out in (("seed", old), ("current", new), ("forked", forked))
    }
    print(f"\ntokens to train, trained tokens: {totals}")

    trained = sum(sum(s.loss_mask) for s in result.segments)
    assert (len(old), len(new), len(forked)) == (4, 3, 4)
    assert totals["seed"] == (sum(len(s.tokens) for s in result.segments), trained)
    assert totals["current"] == (len(compaction.tokens) + len(continuation.tokens) + len(subagent.tokens), trained - sum(main.loss_mask))
    assert totals["forked"] == totals["seed"], "the fork keeps the main reply's tokens, trained once"
    assert [s.metadata["segment_kinds"] for s in new] == [["main", "compaction"], ["continuation"], ["subagent"]]
    assert new[0].metadata["tito_dropped_tokens"] == len(main.tokens) - shared and new[0].metadata["tito_dropped_turns"] == 1
    assert new[0].tokens == compaction.tokens and new[0].loss_mask == compaction.loss_mask[main.prompt_length :]
    assert forked[0].metadata["tito_drift_fork"] and forked[0].tokens == main.tokens and forked[1].metadata["tito_drift_forks_emitted"] == 1
    assert [s.reward for s in old] == [0.25] * 4 and [s.reward for s in new] == [1.0] * 3
    assert [s.metadata["use_tool"] for s in new] == [True, True, True] and not any(s.metadata["truncated"] for s in new)
    assert all(s.rollout_id == 0 and len(s.loss_mask) == s.response_length for s in [*old, *new, *forked])
