"""Finishing an adapter session with turns in flight, over real HTTP against the scripted policy server.

Finishing closes the session to new requests at once, waits up to the finish bound for the turns in
flight (those that end are in the segments), then aborts the rest upstream (one ``/abort_request``
per rid, never continued) and answers their clients with a 409; with nothing in flight it returns
at once and aborts nothing.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
import pytest_asyncio

from durable_rollouts.contracts.session import FinishReport, SamplingParams, SessionConfig
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.session_registry import ClosedSession
from durable_rollouts.scripted_policy.server import AbortRecord, ScriptedPolicyServer
from tests.policy.sampled_records import assert_every_sample_is_a_record_in_its_context
from tests.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="session")

HOLD = "HOLD-THIS-TURN"  # a prompt with it takes a minute: still in flight at any finish bound here
WAIT = "WAIT-FOR-THIS-TURN"  # a prompt with it takes half a second: ends within the default bound
GRACE_S = 3.0


def turn_delay(prompt: str, routing_key: str | None) -> float:
    return 60.0 if HOLD in prompt else 0.5 if WAIT in prompt else 0.0


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def held(renderer):
    """A scripted policy whose turns take as long as their prompt's marker says."""
    server = ScriptedPolicyServer(renderer, default_policy="noop", turn_delay=turn_delay)
    server.url = await server.start()
    yield server
    await server.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def adapter(renderer):
    server = AdapterServer(renderer, keepalive_s=0.2, finish_grace_s=GRACE_S)
    await server.start()
    yield server
    await server.stop()


def open_session(adapter, held, **overrides):
    return adapter.registry.open_session(
        SessionConfig(policy_url=held.url, sampling=SamplingParams(max_new_tokens=256), **overrides)
    )


async def post(adapter, ticket, content: str, stream: bool = False) -> tuple[int, str]:
    body = {"model": "m", "max_tokens": 128, "stream": stream, "messages": [{"role": "user", "content": content}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{adapter.url}/v1/messages", json=body, headers={"Authorization": f"Bearer {ticket.secret}"}
        ) as r:
            return r.status, await r.text()


def in_flight(held, ticket) -> list[str]:
    return [rid for rid in held.in_flight if rid.startswith(f"{ticket.session_id}-")]


def aborts(held, ticket) -> list[AbortRecord]:
    return [a for a in held.aborts if (a.rid or "").startswith(f"{ticket.session_id}-")]


async def test_a_turn_that_ends_within_the_bound_is_waited_for_and_in_the_segments(adapter, held):
    ticket = open_session(adapter, held)
    turn = asyncio.ensure_future(post(adapter, ticket, f"{WAIT} please"))
    await until(lambda: in_flight(held, ticket))
    result = await adapter.registry.finish_session(ticket.session_id)
    status, text = await turn
    assert status == 200 and json.loads(text)["stop_reason"] == "end_turn"
    assert result.finish == FinishReport(waited=1, aborted=0)
    (record,) = held.records_for(ticket.session_id)
    assert record.finish_reason["type"] == "stop"
    assert_every_sample_is_a_record_in_its_context(result, [record])
    assert aborts(held, ticket) == []
    assert await adapter.registry.finish_session(ticket.session_id) == result, "finishing twice returns the same result"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_turn_still_in_flight_at_the_bound_is_aborted_upstream_not_continued_and_not_recorded(
    adapter, held, stream
):
    ticket = open_session(adapter, held, continue_after_abort=True)
    turn = asyncio.ensure_future(post(adapter, ticket, f"{HOLD} please", stream=stream))
    await until(lambda: in_flight(held, ticket))
    (rid,) = in_flight(held, ticket)
    started = time.monotonic()
    result = await adapter.registry.finish_session(ticket.session_id, grace_s=1.0)
    assert time.monotonic() - started >= 1.0, (
        "finishing waits the bound before it aborts (the record below shows it did not wait the minute)"
    )
    assert result.finish == FinishReport(waited=0, aborted=1, aborted_rids=[rid])
    assert result.segments == [] and result.turns == []
    assert aborts(held, ticket) == [AbortRecord(rid=rid, abort_all=False, in_flight=True)], (
        "one /abort_request, for exactly that rid"
    )
    status, text = await turn
    if stream:
        assert (
            status == 200 and text.startswith(": keep-alive") and "event: error" in text and "message_stop" not in text
        )
    else:
        assert status == 409 and json.loads(text)["error"]["type"] == "invalid_request_error"
    assert "finished" in text
    await until(
        lambda: held.records_for(ticket.session_id)
    )  # the server records an aborted generation at its next step
    await asyncio.sleep(0.5)  # time enough for a continuation to reach the server, were one sent
    (record,) = held.records_for(ticket.session_id)
    assert record.rid == rid and record.finish_reason["type"] == "abort", (
        "the generation stopped; nothing was resubmitted"
    )
    assert in_flight(held, ticket) == []


async def test_finishing_with_nothing_in_flight_returns_at_once_and_aborts_nothing(adapter, held):
    ticket = open_session(adapter, held)
    status, _ = await post(adapter, ticket, "quick")
    assert status == 200
    # An hour's bound: finishing returns only because nothing is in flight to wait for.
    result = await adapter.registry.finish_session(ticket.session_id, grace_s=3600)
    assert result.finish == FinishReport() and len(result.turns) == 1
    assert_every_sample_is_a_record_in_its_context(result, held.records_for(ticket.session_id))
    assert aborts(held, ticket) == []
    idle = open_session(adapter, held)
    assert (await adapter.registry.finish_session(idle.session_id, grace_s=3600)).finish == FinishReport()


async def test_a_request_arriving_while_or_after_the_session_finishes_is_refused(adapter, held):
    ticket = open_session(adapter, held)
    turn = asyncio.ensure_future(post(adapter, ticket, f"{HOLD} please"))
    await until(lambda: in_flight(held, ticket))
    finishing = asyncio.ensure_future(adapter.registry.finish_session(ticket.session_id, grace_s=1.0))
    await asyncio.sleep(0.1)
    assert not finishing.done()
    with pytest.raises(ClosedSession):
        adapter.registry.authenticate(ticket.secret)
    status, text = await post(adapter, ticket, "a new turn while finishing")
    assert status == 409 and "finished" in json.loads(text)["error"]["message"]
    assert not finishing.done(), "refused at once, not after the finish"
    concurrent = await adapter.registry.finish_session(ticket.session_id)
    assert concurrent == await finishing and concurrent.finish.aborted == 1, (
        "a second finish waits for the first and returns its result"
    )
    assert (await turn)[0] == 409
    status, text = await post(adapter, ticket, "a new turn after the finish")
    assert status == 409 and "finished" in json.loads(text)["error"]["message"]
    await until(
        lambda: held.records_for(ticket.session_id)
    )  # the server records an aborted generation at its next step
    assert [r.rid for r in held.records_for(ticket.session_id)] == [r.rid for r in aborts(held, ticket)], (
        "only the held turn reached the policy"
    )


async def test_a_session_being_finished_cannot_be_claimed_by_a_retry_and_the_sweep_closes_all_at_once(adapter, held):
    ticket = open_session(adapter, held)
    assert adapter.registry.claim(ticket.session_id, 1) is not None
    turn = asyncio.ensure_future(post(adapter, ticket, f"{HOLD} please"))
    await until(lambda: in_flight(held, ticket))
    finishing = asyncio.ensure_future(adapter.registry.finish_session(ticket.session_id, grace_s=1.0))
    await asyncio.sleep(0.1)
    assert not finishing.done() and adapter.registry.get(ticket.session_id) is not None, (
        "still readable while it finishes"
    )
    assert not adapter.registry.resumable(ticket.session_id)
    assert adapter.registry.claim(ticket.session_id, 2) is None and not adapter.registry.held_by(ticket.session_id, 2)
    assert (await finishing).finish.aborted == 1 and (await turn)[0] == 409

    left = [open_session(adapter, held) for _ in range(2)]
    for stale in left:
        adapter.registry.claim(stale.session_id, 1)
        adapter.registry.unclaim(stale.session_id)
    sweep = asyncio.ensure_future(adapter.registry.forget_unclaimed())
    await asyncio.sleep(0)  # the sweep runs to its first await
    assert not sweep.done() and not any(adapter.registry.resumable(stale.session_id) for stale in left), (
        "every swept session is closed before the sweep awaits"
    )
    assert sorted(await sweep) == sorted(stale.session_id for stale in left)
