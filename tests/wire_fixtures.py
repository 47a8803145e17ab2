"""Real Claude Code 2.1.328 request captures, kept in the repository under tests/fixtures/claude_code_wire/, and a
session made of them through the adapter."""

import copy
import json
from pathlib import Path

import aiohttp

from durable_rollouts.contracts.session import SamplingParams, SessionConfig

WIRE_DIR = Path(__file__).resolve().parent / "fixtures" / "claude_code_wire"


def captured(name: str) -> tuple[dict, dict]:
    """(headers, body) of a captured request; plain-body captures get the turn-1 headers."""
    data = json.loads((WIRE_DIR / name).read_text())
    if "body" in data:
        return data["headers"], data["body"]
    return json.loads((WIRE_DIR / "turn1_headers.json").read_text()), data


async def post(adapter, secret: str, headers: dict, body: dict) -> dict:
    sent = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "content-length", "host")}
    sent["Authorization"] = f"Bearer {secret}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{adapter.url}/v1/messages", json={**body, "stream": False}, headers=sent) as response:
            assert response.status == 200, await response.text()
            return await response.json()


async def session_from_captures(adapter, policy_server, between_calls=None):
    """Main, compaction, post-compaction and sub-agent calls, as Claude Code makes them (see
    ``tests/slime_samples/test_claude_code_captures.py``), answered by ``policy_server``'s oracle through ``adapter``;
    ``between_calls(n)``, when given, is awaited after call ``n`` (1-4)."""
    ticket = adapter.registry.open_session(
        SessionConfig(policy_url=policy_server.url, sampling=SamplingParams(max_new_tokens=512))
    )
    policy_server.set_policy(ticket.session_id, "oracle")
    headers, compaction = captured("compact_request.json")
    main = copy.deepcopy(compaction)
    main["messages"] = main["messages"][:2]
    calls = iter(range(1, 5))

    async def then():
        if between_calls is not None:
            await between_calls(next(calls))

    reply = await post(adapter, ticket.secret, captured("turn1_body.json")[0], main)
    await then()
    (call,) = [block for block in reply["content"] if block["type"] == "tool_use"]
    history = compaction["messages"]
    history[2] = {"role": "assistant", "content": reply["content"]}
    for block in history[3]["content"]:
        if block["type"] == "tool_result":
            block["tool_use_id"] = call["id"]
    await post(adapter, ticket.secret, headers, compaction)
    await then()
    await post(adapter, ticket.secret, *captured("post_compact_request.json"))
    await then()
    await post(adapter, ticket.secret, *captured("subagent_request.json"))
    await then()
    return await adapter.registry.finish_session(ticket.session_id)
