"""Per-turn delays: spread over the answer's tokens through the control's pacing, deterministic per session, abortable.

Nothing here reads a wall clock: every test records the pauses the server
asks ``GenerationControl.pace`` for (and still takes them), which says both
how long an answer was made to take and over how many steps.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import AsyncIterator

import aiohttp
import pytest

from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.scripted_policy.server import ROUTING_KEY_HEADER, ScriptedPolicyServer, parse_args
from durable_rollouts.scripted_policy.turn_delays import LogNormalSessionDelay, MarkedPromptDelay
from tests.scripted_policy.generate_requests import conversation, generate_body, prompt_ids

MARKER = "frobnicator"  # in the problem statement, so in the prompt once the agent has read it (turn 1 on)


class RecordingDelay:
    """A turn delay of ``seconds`` that records every ``(prompt, routing_key)`` it is asked about."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.calls: list[tuple[str, str | None]] = []

    def __call__(self, prompt: str, routing_key: str | None) -> float:
        self.calls.append((prompt, routing_key))
        return self.seconds


@pytest.fixture
async def server(renderer: PromptRenderer) -> AsyncIterator[ScriptedPolicyServer]:
    scripted = ScriptedPolicyServer(renderer, default_policy="noop", delay_s=0.1)
    scripted.url = await scripted.start()
    yield scripted
    await scripted.stop()


@pytest.fixture
def paces(server: ScriptedPolicyServer, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every pause the server asks its control for, in order; the pauses are still taken."""
    asked: list[float] = []
    pace = server.control.pace

    async def recording(seconds: float) -> None:
        asked.append(seconds)
        await pace(seconds)

    monkeypatch.setattr(server.control, "pace", recording)
    return asked


async def generate(
    http: aiohttp.ClientSession, server: ScriptedPolicyServer, input_ids: list[int], rid: str, routing_key: str
) -> dict:
    async with http.post(
        f"{server.url}/generate", json=generate_body(input_ids, rid), headers={ROUTING_KEY_HEADER: routing_key}
    ) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def paced_s(http, server, paces: list[float], input_ids: list[int], rid: str, routing_key: str) -> float:
    """The seconds one answer was paced over; checks they were spread evenly, one pause per token."""
    before = len(paces)
    reply = await generate(http, server, input_ids, rid, routing_key)
    steps = paces[before:]
    assert len(steps) == len(reply["output_ids"]) and len(set(steps)) == 1
    return sum(steps)


async def test_a_turn_delay_is_spread_over_the_answer_and_sees_the_decoded_prompt(server, http, renderer, paces):
    delay = RecordingDelay(0.2)
    server.turn_delay = delay
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 1))
    assert await paced_s(http, server, paces, input_ids, "r1", "sess-a") == pytest.approx(0.2)
    assert delay.calls == [(renderer.decode(input_ids), "sess-a")]

    server.turn_delay, before = None, len(paces)
    await generate(http, server, input_ids, "r2", "sess-a")
    assert len(paces) == before, "no turn delay, no token delay: no pauses"


async def test_a_begun_answer_is_delayed_for_the_prompt_before_it(server, http, renderer, paces):
    delay = RecordingDelay(0.1)
    server.turn_delay = delay
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    whole = await generate(http, server, input_ids, "whole", "sess")
    rest = await paced_s(http, server, paces, input_ids + whole["output_ids"][:2], "rest", "sess")
    assert rest == pytest.approx(0.1)
    assert delay.calls == [(renderer.decode(input_ids), "sess")] * 2


async def test_lognormal_draws_are_per_session_deterministic_and_differ_between_sessions(server, http, renderer, paces):
    server.turn_delay = LogNormalSessionDelay(median_s=0.05, sigma=1.0, seed=7)
    turn0, turn1 = (prompt_ids(renderer, conversation("/tmp/x", turns)) for turns in (0, 1))
    a0 = await paced_s(http, server, paces, turn0, "a0", "sess-a")
    a1 = await paced_s(http, server, paces, turn1, "a1", "sess-a")
    b0 = await paced_s(http, server, paces, turn0, "b0", "sess-b")

    expected = random.Random("7:sess-a").lognormvariate(math.log(0.05), 1.0)
    assert a0 == pytest.approx(expected) and a1 == pytest.approx(expected)
    assert b0 == pytest.approx(LogNormalSessionDelay(0.05, 1.0, 7)("any prompt", "sess-b")) and b0 != pytest.approx(a0)
    assert LogNormalSessionDelay(0.05, 1.0, 8)("", "sess-a") != pytest.approx(expected)


def test_lognormal_draws_are_heavy_tailed_around_the_median():
    delay = LogNormalSessionDelay(median_s=2.0, sigma=1.0, seed=0)
    draws = sorted(delay("", f"session-{i}") for i in range(2001))
    assert 1.8 < draws[1000] < 2.2
    assert draws[-20] > 5 * draws[1000] > 25 * draws[19]


async def test_marked_prompts_are_slow_and_the_others_fast(server, http, renderer, paces):
    server.turn_delay = MarkedPromptDelay(MARKER, slow_s=0.2)
    unread, read = (prompt_ids(renderer, conversation("/tmp/x", turns)) for turns in (0, 1))
    await generate(http, server, unread, "fast", "sess")
    assert paces == []
    assert await paced_s(http, server, paces, read, "slow", "sess") == pytest.approx(0.2)
    assert MarkedPromptDelay(MARKER, slow_s=9.0, fast_s=0.5)("no mark", None) == 0.5


async def test_slow_keeps_its_own_delay(server, http, renderer, paces):
    delay = RecordingDelay(100.0)
    server.turn_delay = delay
    server.set_policy("sess-slow", "slow")
    assert await paced_s(
        http, server, paces, prompt_ids(renderer, conversation("/tmp/x", 0)), "s", "sess-slow"
    ) == pytest.approx(0.1)
    assert delay.calls == []


@pytest.mark.parametrize("how", ["abort_request", "abort_pause"])
async def test_an_abort_mid_delay_answers_with_the_tokens_so_far(server, http, renderer, how):
    input_ids = prompt_ids(renderer, conversation("/tmp/x", 1))
    full = await generate(http, server, input_ids, "full", "sess-full")
    server.turn_delay = MarkedPromptDelay(MARKER, slow_s=3600.0)
    pending = asyncio.create_task(generate(http, server, input_ids, "held", "sess-held"))
    while not any(g.rid == "held" and g.output_ids for g in server.control.live):  # then it waits 3600 s / tokens
        await asyncio.sleep(0.01)
    if how == "abort_request":
        async with http.post(f"{server.url}/abort_request", json={"rid": "held"}) as response:
            assert response.status == 200
    else:
        async with http.post(f"{server.url}/pause_generation", json={"mode": "abort"}) as response:
            assert response.status == 200
        async with http.post(f"{server.url}/continue_generation", json={}) as response:
            assert response.status == 200

    reply = await asyncio.wait_for(pending, 60)
    sampled = len(reply["output_ids"])
    assert 1 <= sampled < len(full["output_ids"])
    assert reply["output_ids"] == full["output_ids"][:sampled] and reply["text"] == renderer.decode(reply["output_ids"])
    assert reply["meta_info"]["finish_reason"]["type"] == "abort"


def test_cli_flag_sets_a_lognormal_turn_delay():
    assert parse_args(["--lognormal-turn-delay", "2,1.5,9"]).lognormal_turn_delay == LogNormalSessionDelay(2.0, 1.5, 9)
    assert parse_args(["--lognormal-turn-delay", "0.5,1"]).lognormal_turn_delay == LogNormalSessionDelay(0.5, 1.0, 0)
    assert parse_args([]).lognormal_turn_delay is None
    for bad in ("2", "2,1,3,4", "0,1", "two,1"):
        with pytest.raises(SystemExit):
            parse_args(["--lognormal-turn-delay", bad])


def test_by_arrival_the_nth_session_gets_the_nth_pace_whatever_its_id():
    first, second = (
        LogNormalSessionDelay(2.0, 1.0, seed=4, by_arrival=True),
        LogNormalSessionDelay(2.0, 1.0, seed=4, by_arrival=True),
    )
    paces = [first("p", key) for key in ("s-a", "s-b", "s-c")]
    assert [second("p", key) for key in ("x", "y", "z")] == paces, "paired runs face the same sequence of paces"
    assert first("later turn", "s-b") == paces[1], "a session keeps its pace"
    assert len(set(paces)) == 3
