"""The adapter over real HTTP: the official anthropic SDK as client, the scripted policy server behind."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import anthropic
import pytest

from durable_rollouts.contracts.session import SamplingParams, SessionConfig
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.policy.adapter_server import AdapterServer

pytestmark = pytest.mark.asyncio(loop_scope="session")

WORKDIR_PROMPT = "Please fix it.\nPrimary working directory: /tmp/task-repo"
READ_TOOL = {
    "name": "Read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]},
}


def open_session(adapter, policy_server, policy: str = "noop", **overrides):
    """Open an adapter session whose turns the scripted server answers with ``policy``."""
    config = SessionConfig(policy_url=policy_server.url, sampling=SamplingParams(max_new_tokens=512), **overrides)
    ticket = adapter.registry.open_session(config)
    policy_server.set_policy(ticket.session_id, policy)
    return ticket


def sdk(adapter, ticket) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=adapter.url, auth_token=ticket.secret, api_key=None, max_retries=0)


def assert_segments_equal_records(result, records):
    """Every sampled token in the segments is a recorded sample, and every recorded sample is in the segments."""
    sampled = [(r.output_ids, r.output_logprobs) for r in records if r.output_ids]
    found = []
    for segment in result.segments:
        i = 0
        while i < len(segment.tokens):
            if segment.loss_mask[i]:
                j = i
                while j < len(segment.tokens) and segment.loss_mask[j]:
                    j += 1
                found.append((segment.tokens[i:j], segment.rollout_log_probs[i:j]))
                i = j
            else:
                i += 1
    assert found == sampled


async def test_sdk_create_returns_tool_use_and_segments_match_the_server(adapter, policy_server):
    ticket = open_session(adapter, policy_server, "oracle")
    client = sdk(adapter, ticket)
    message = await client.messages.create(
        model="slime-actor", max_tokens=1024, tools=[READ_TOOL], messages=[{"role": "user", "content": WORKDIR_PROMPT}]
    )
    assert message.stop_reason == "tool_use"
    (tool_use,) = [b for b in message.content if b.type == "tool_use"]
    assert tool_use.name == "Read" and tool_use.input == {"file_path": "/tmp/task-repo/PROBLEM_STATEMENT.md"}
    assert [b.type for b in message.content][0] == "thinking"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    result = await adapter.registry.finish_session(ticket.session_id)
    assert_segments_equal_records(result, policy_server.records_for(ticket.session_id))
    (segment,) = result.segments
    (record,) = policy_server.records_for(ticket.session_id)
    assert segment.tokens[: segment.prompt_length] == record.input_ids
    assert await adapter.registry.finish_session(ticket.session_id) == result


async def test_sdk_stream_parses_blocks_and_a_second_turn_extends_the_segment(adapter, policy_server):
    ticket = open_session(adapter, policy_server, "oracle")
    client = sdk(adapter, ticket)
    messages = [{"role": "user", "content": WORKDIR_PROMPT}]
    async with client.messages.stream(
        model="slime-actor", max_tokens=1024, tools=[READ_TOOL], messages=messages
    ) as stream:
        first = await stream.get_final_message()
    (tool_use,) = [b for b in first.content if b.type == "tool_use"]
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "The bug is elsewhere."}],
        },
    ]
    async with client.messages.stream(
        model="slime-actor", max_tokens=1024, tools=[READ_TOOL], messages=messages
    ) as stream:
        second = await stream.get_final_message()
    assert first.id != second.id
    result = await adapter.registry.finish_session(ticket.session_id)
    assert len(result.segments) == 1 and result.segments[0].turns == 2
    assert_segments_equal_records(result, policy_server.records_for(ticket.session_id))


async def test_raw_sse_has_event_lines_and_a_stop_for_every_block(adapter, policy_server):
    ticket = open_session(adapter, policy_server, "oracle")
    body = {
        "model": "m",
        "max_tokens": 512,
        "stream": True,
        "tools": [READ_TOOL],
        "messages": [{"role": "user", "content": WORKDIR_PROMPT}],
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{adapter.url}/v1/messages", json=body, headers={"Authorization": f"Bearer {ticket.secret}"}
        ) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
            text = await r.text()
    events = [line[len("event: ") :] for line in text.splitlines() if line.startswith("event: ")]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert events.count("content_block_start") == events.count("content_block_stop") == 3
    assert '"input_json_delta"' in text and '"input": {}' in text


async def test_slow_policy_streams_keepalives_and_does_not_block_other_sessions(adapter, policy_server):
    slow = open_session(adapter, policy_server, "slow")
    fast = open_session(adapter, policy_server, "noop")
    body = {"model": "m", "max_tokens": 256, "stream": True, "messages": [{"role": "user", "content": WORKDIR_PROMPT}]}

    async def call(ticket):
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{adapter.url}/v1/messages", json=body, headers={"Authorization": f"Bearer {ticket.secret}"}
            ) as r:
                return await r.text(), asyncio.get_running_loop().time()

    (slow_text, slow_done), (fast_text, fast_done) = await asyncio.gather(call(slow), call(fast))
    assert slow_text.startswith(": keep-alive") and "message_stop" in slow_text
    assert fast_done < slow_done and "message_stop" in fast_text


async def test_client_disconnect_aborts_the_upstream_request(adapter, policy_server):
    ticket = open_session(adapter, policy_server, "slow")
    body = {"model": "m", "max_tokens": 256, "messages": [{"role": "user", "content": WORKDIR_PROMPT}]}
    async with aiohttp.ClientSession() as http:
        request = asyncio.ensure_future(
            http.post(f"{adapter.url}/v1/messages", json=body, headers={"x-api-key": ticket.secret})
        )
        await asyncio.sleep(0.3)
        request.cancel()
    for _ in range(50):
        if policy_server.records_for(ticket.session_id):
            break
        await asyncio.sleep(0.05)
    (record,) = policy_server.records_for(ticket.session_id)
    assert record.finish_reason["type"] == "abort"
    assert (await adapter.registry.finish_session(ticket.session_id)).segments == []


async def test_count_tokens_is_the_rendered_prompt_length(adapter, policy_server, renderer):
    ticket = open_session(adapter, policy_server)
    body = {"model": "m", "messages": [{"role": "user", "content": "count me"}], "system": "sys"}
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{adapter.url}/v1/messages/count_tokens", json=body, headers={"Authorization": f"Bearer {ticket.secret}"}
        ) as r:
            counted = (await r.json())["input_tokens"]
    expected = renderer.encode(
        renderer.render([{"role": "system", "content": "sys"}, {"role": "user", "content": "count me"}], None, True)
    )
    assert counted == len(expected)


async def test_prompt_past_the_context_budget_ends_with_max_tokens_without_sampling(adapter, policy_server):
    ticket = open_session(adapter, policy_server, context_budget=256)
    message = await sdk(adapter, ticket).messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "word " * 400}]
    )
    assert message.stop_reason == "max_tokens"
    assert policy_server.records_for(ticket.session_id) == []


async def test_max_new_tokens_is_clamped_by_request_and_remaining_context(adapter, policy_server):
    ticket = open_session(adapter, policy_server, "length", context_budget=300)
    message = await sdk(adapter, ticket).messages.create(
        model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}]
    )
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 100
    prompt = message.usage.input_tokens
    message = await sdk(adapter, ticket).messages.create(
        model="m", max_tokens=10_000, messages=[{"role": "user", "content": "go on"}]
    )
    assert message.usage.output_tokens == 300 - message.usage.input_tokens and prompt > 0


async def test_turn_cap_answers_429(adapter, policy_server):
    ticket = open_session(adapter, policy_server, max_turns=1)
    client = sdk(adapter, ticket)
    await client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "one"}])
    with pytest.raises(anthropic.RateLimitError):
        await client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "two"}])


async def test_concurrent_request_cap_answers_429(adapter, policy_server):
    ticket = open_session(adapter, policy_server, "slow", max_concurrent_requests=1)
    client = sdk(adapter, ticket)
    slow = asyncio.ensure_future(
        client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": "one"}])
    )
    await asyncio.sleep(0.3)
    with pytest.raises(anthropic.RateLimitError):
        await client.messages.create(
            model="m",
            max_tokens=64,
            messages=[{"role": "user", "content": "two"}],
            extra_headers={"x-claude-code-agent-id": "a1"},
        )
    assert (await slow).stop_reason == "tool_use"


async def post_raw(adapter, data: bytes, token: str | None, path: str = "/v1/messages"):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{adapter.url}{path}", data=data, headers=headers) as r:
            return r.status, await r.json()


@pytest.mark.parametrize(
    "data, status, error_type, mentions",
    [
        (b"{not json", 400, "invalid_request_error", "not valid JSON"),
        (b'{"model": "m", "max_tokens": 5}', 400, "invalid_request_error", "messages"),
        (b"[1, 2]", 400, "invalid_request_error", "JSON object"),
        (
            b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -3}',
            400,
            "invalid_request_error",
            "max_tokens",
        ),
    ],
)
async def test_bad_requests_get_clear_anthropic_errors(adapter, policy_server, data, status, error_type, mentions):
    ticket = open_session(adapter, policy_server)
    code, body = await post_raw(adapter, data, ticket.secret)
    assert code == status and body["type"] == "error"
    assert body["error"]["type"] == error_type and mentions in body["error"]["message"]


async def test_unknown_wrong_secret_and_finished_sessions(adapter, policy_server):
    ticket = open_session(adapter, policy_server)
    payload = json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": 8}).encode()
    assert (await post_raw(adapter, payload, None))[0] == 401
    assert (await post_raw(adapter, payload, "sdeadbeef.nope"))[0] == 401
    assert (await post_raw(adapter, payload, ticket.session_id + ".wrong-secret"))[0] == 401
    unknown = await post_raw(adapter, payload, "sdeadbeef.nope")
    await adapter.registry.finish_session(ticket.session_id)
    assert await post_raw(adapter, payload, ticket.session_id + ".wrong-secret") == unknown
    code, body = await post_raw(adapter, payload, ticket.secret)
    assert code == 409 and "finished" in body["error"]["message"]


async def test_healthz_tells_a_sandbox_nothing_about_the_hosts_sessions(adapter, policy_server):
    open_session(adapter, policy_server)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{adapter.url}/healthz") as r:
            assert r.status == 200 and await r.json() == {"status": "ok"}


@pytest.mark.parametrize("failure", ["error", "garbage", "unreachable"])
async def test_policy_failures_become_retryable_errors_and_the_adapter_keeps_serving(adapter, policy_server, failure):
    if failure == "unreachable":
        config = SessionConfig(policy_url="http://127.0.0.1:9")
        ticket = adapter.registry.open_session(config)
    else:
        ticket = open_session(adapter, policy_server, failure)
    with pytest.raises(anthropic.InternalServerError) as raised:
        await sdk(adapter, ticket).messages.create(
            model="m", max_tokens=64, messages=[{"role": "user", "content": "x"}]
        )
    assert raised.value.status_code == 529
    healthy = open_session(adapter, policy_server, "noop")
    reply = await sdk(adapter, healthy).messages.create(
        model="m", max_tokens=64, messages=[{"role": "user", "content": "x"}]
    )
    assert reply.stop_reason == "end_turn"


async def test_body_over_the_size_limit_is_413(renderer, policy_server):
    small = AdapterServer(renderer, max_body_bytes=2048)
    await small.start()
    try:
        ticket = small.registry.open_session(SessionConfig(policy_url=policy_server.url))
        payload = json.dumps({"messages": [{"role": "user", "content": "x" * 4096}]}).encode()
        code, body = await post_raw(small, payload, ticket.secret)
        assert code == 413 and body["error"]["type"] == "request_too_large"
    finally:
        await small.stop()


FLOOD_TEXT = "".join(p.read_text() for p in sorted((PROJECT_ROOT / "activities").glob("*.py")))
HANG_GUARD_S = 120
FLOOD_CAP = 8


def flood_text(size: int) -> str:
    return (FLOOD_TEXT * (size // len(FLOOD_TEXT) + 1))[:size]


def flood_body(text: str) -> bytes:
    return json.dumps({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": text}]}).encode()


@pytest.mark.parametrize("cpu_threads", [1, 2])
async def test_a_flood_from_one_sandbox_gets_429s_and_another_session_is_answered_before_it_drains(
    renderer, policy_server, cpu_threads
):
    server = AdapterServer(renderer, cpu_threads=cpu_threads)
    await server.start()
    try:
        flooder = open_session(server, policy_server, max_concurrent_requests=FLOOD_CAP)
        victim = open_session(server, policy_server)
        text = flood_text(700_000)
        big = flood_body(text)
        loop = asyncio.get_running_loop()

        async def post(token, path, data, headers=None):
            async with aiohttp.ClientSession() as http:
                hdrs = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", **(headers or {})}
                async with http.post(f"{server.url}{path}", data=data, headers=hdrs) as r:
                    return r.status, await r.json(), loop.time()

        flood = [asyncio.ensure_future(post(flooder.secret, "/v1/messages/count_tokens", big)) for _ in range(10)]
        flood += [
            asyncio.ensure_future(post(flooder.secret, "/v1/messages", big, {"x-claude-code-agent-id": f"a{i}"}))
            for i in range(10)
        ]
        pending = set(flood)
        while not any(t.done() and t.result()[0] == 429 for t in flood):
            _, pending = await asyncio.wait(pending, timeout=HANG_GUARD_S, return_when=asyncio.FIRST_COMPLETED)
        small = json.dumps({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}).encode()
        status, reply, victim_done = await post(victim.secret, "/v1/messages", small)
        assert status == 200 and reply["stop_reason"] == "end_turn"
        outcomes = await asyncio.wait_for(asyncio.gather(*flood), HANG_GUARD_S)
    finally:
        await server.stop()
    rejected = [body for code, body, _ in outcomes if code == 429]
    served = [(body, done) for code, body, done in outcomes if code == 200]
    assert len(rejected) + len(served) == len(flood) and rejected and len(served) >= FLOOD_CAP
    assert all(
        body["error"]["type"] == "rate_limit_error" and "in flight" in body["error"]["message"] for body in rejected
    )
    counts = {body["input_tokens"] for body, _ in served if "input_tokens" in body}
    turns = [body for body, _ in served if "stop_reason" in body]
    assert counts <= {len(renderer.encode(renderer.render([{"role": "user", "content": text}], None, True)))}
    assert all(t["stop_reason"] == "max_tokens" for t in turns)
    assert any(done > victim_done for _, done in served), "the victim waited for the whole flood"
    assert policy_server.records_for(flooder.session_id) == []


async def raw_request(adapter, path: str, token: str, content_length: int, sent: bytes):
    """Open a connection, send the headers and only ``sent`` of a body of ``content_length`` bytes."""
    host, port = adapter.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    )
    writer.write(head.encode() + sent)
    await writer.drain()
    return reader, writer


async def read_response(reader) -> tuple[int, dict]:
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return status, json.loads(await reader.readexactly(length))


async def test_a_request_past_the_in_flight_cap_is_refused_before_its_body_is_read(adapter, policy_server):
    ticket = open_session(adapter, policy_server, max_concurrent_requests=1)
    connections = [
        await raw_request(adapter, "/v1/messages", ticket.secret, 1_000_000, b'{"messages": '),
        await raw_request(adapter, "/v1/messages/count_tokens", ticket.secret, 1_000_000, b'{"messages": '),
    ]
    try:
        reads = [asyncio.ensure_future(read_response(reader)) for reader, _ in connections]
        done, waiting = await asyncio.wait(reads, timeout=HANG_GUARD_S, return_when=asyncio.FIRST_COMPLETED)
        (answered,) = done
        status, body = answered.result()
        assert status == 429 and body["error"]["type"] == "rate_limit_error"
        assert len(waiting) == 1, "the admitted request is still waiting for its body"
        (still_reading,) = waiting
        still_reading.cancel()
    finally:
        for _, writer in connections:
            writer.close()
    probe = json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode()
    for _ in range(100):
        code, _ = await post_raw(adapter, probe, ticket.secret, "/v1/messages/count_tokens")
        if code == 200:
            break
        await asyncio.sleep(0.05)
    assert code == 200, "the dropped connection gave its slot back"


async def test_count_tokens_has_its_own_smaller_body_cap(renderer, policy_server):
    small = AdapterServer(renderer, max_body_bytes=8192, count_tokens_max_body_bytes=1024)
    await small.start()
    try:
        ticket = small.registry.open_session(
            SessionConfig(policy_url=policy_server.url, sampling=SamplingParams(max_new_tokens=64))
        )
        payload = json.dumps({"messages": [{"role": "user", "content": "x" * 4096}]}).encode()
        code, body = await post_raw(small, payload, ticket.secret, "/v1/messages/count_tokens")
        assert code == 413 and body["error"]["type"] == "request_too_large" and "1024" in body["error"]["message"]

        async def chunks():
            for i in range(0, len(payload), 512):
                yield payload[i : i + 512]

        async with aiohttp.ClientSession() as http:
            headers = {"Authorization": f"Bearer {ticket.secret}", "Content-Type": "application/json"}
            async with http.post(f"{small.url}/v1/messages/count_tokens", data=chunks(), headers=headers) as r:
                assert r.status == 413 and "count_tokens" in (await r.json())["error"]["message"]
        code, body = await post_raw(small, payload, ticket.secret)
        assert code == 200 and body["stop_reason"] == "end_turn"
        reader, writer = await raw_request(small, "/v1/messages/count_tokens", ticket.secret, 3 * 1024 * 1024, b"")
        try:
            status, body = await asyncio.wait_for(read_response(reader), HANG_GUARD_S)
        finally:
            writer.close()
        assert status == 413, "a declared length past the cap is refused before any byte is sent"
    finally:
        await small.stop()


async def test_a_turn_waiting_for_the_policy_leaves_the_session_free_to_read_other_requests(adapter, policy_server):
    ticket = open_session(adapter, policy_server, "slow")
    client = sdk(adapter, ticket)
    slow = asyncio.ensure_future(
        client.messages.create(model="m", max_tokens=64, messages=[{"role": "user", "content": WORKDIR_PROMPT}])
    )
    while not any(rid.startswith(f"{ticket.session_id}-") for rid in policy_server.in_flight) and not slow.done():
        await asyncio.sleep(0.01)
    counted = await client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "count me"}])
    assert counted.input_tokens > 0 and not slow.done(), (
        "count_tokens was answered while the slow turn waited for the policy"
    )
    assert (await slow).stop_reason == "tool_use"
