"""Generations that live through SGLang aborts, against the scripted server over real HTTP and as a property.

The server tests pause the scripted server mid-generation (``slow`` paces its tokens over an hour, so a
request is reliably mid-output), update its weights and continue it; the continued turn must be one
ordinary turn whose tokens, log-probs and versions are exactly what the server sampled, piece by piece.
The property test drives the stitching through random abort points, version changes and outages with a
deterministic model, and checks the ledger invariant on what the session records.
"""

from __future__ import annotations

import asyncio
import random
from array import array
from collections.abc import AsyncIterator

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_rollouts.contracts.session import SessionConfig
from durable_rollouts.policy.continuation import generate_through_aborts
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.session import PolicySession
from durable_rollouts.policy.sglang_client import Generation, GenerationAborted, PolicyServerError, SGLangClient
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from tests.policy.replies import anthropic_reply
from tests.policy.scripted_controls import control, weight_update
from tests.waiting import HANG_GUARD_S, until

pytestmark = pytest.mark.asyncio(loop_scope="session")
MESSAGES = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Say something."}]


@pytest.fixture
async def server(renderer) -> AsyncIterator[ScriptedPolicyServer]:
    scripted = ScriptedPolicyServer(renderer, default_policy="slow", delay_s=3600.0, weight_version="0")
    scripted.url = await scripted.start()
    yield scripted
    await scripted.stop()


def session(renderer, server: ScriptedPolicyServer, http: aiohttp.ClientSession, **config) -> PolicySession:
    client = SGLangClient(http, vocab_size=renderer.vocab_size)
    return PolicySession(
        "s1",
        SessionConfig(policy_url=server.url, **config),
        renderer,
        client,
        FairExecutor(2, thread_name_prefix="test-cpu"),
    )


def sampled_tokens(server: ScriptedPolicyServer) -> tuple[list[int], list[float], list[str]]:
    """Everything the server sampled, in request order."""
    return (
        [t for r in server.records for t in r.output_ids],
        [p for r in server.records for p in r.output_logprobs],
        [v for r in server.records for v in r.output_versions],
    )


@pytest.mark.parametrize("mode", ["abort", "retract", "in_place"])
async def test_a_weight_update_mid_turn_is_one_ordinary_turn_with_every_token_as_sampled(renderer, server, http, mode):
    policy = session(renderer, server, http)
    turn = asyncio.create_task(policy.run_turn("main", "main", MESSAGES, [], None, anthropic_reply))
    await until(lambda: any(g.output_ids for g in server.control.live))
    await weight_update(http, server, mode, "1")
    server.delay_s = 0.0
    await control(http, server, "/continue_generation", {})
    outcome = await turn

    [segment] = policy.ledger.finish()
    ids, log_probs, versions = sampled_tokens(server)
    sampled = [i for i, mask in enumerate(segment.loss_mask) if mask]
    assert [segment.tokens[i] for i in sampled] == ids, "the turn holds exactly the tokens the server sampled"
    assert [segment.rollout_log_probs[i] for i in sampled] == log_probs
    assert [segment.token_weight_versions()[i] for i in sampled] == versions
    assert versions[0] == "0" and set(versions[1:]) == {"1"}, "the tokens after the update carry the new version"
    assert outcome.finish_reason == "stop" and ids[-1] == renderer.end_of_turn_id
    assert policy.turns[0].aborts_continued == (1 if mode == "abort" else 0)
    assert policy.turns[0].weight_versions == ["0", "1"] and policy.weight_version_range() == ("0", "1")
    if mode == "abort":
        first, second = server.records
        assert first.finish_reason["type"] == "abort"
        assert second.input_ids == first.input_ids + first.output_ids, (
            "the resubmission is prompt + what was sampled, as ids"
        )
    else:
        assert len(server.records) == 1, "a held request is resumed by the server, not resubmitted"


async def test_the_continued_answer_is_the_answer_an_uninterrupted_turn_gets(renderer, server, http):
    server.delay_s = 0.0
    plain = session(renderer, server, http)
    await plain.run_turn("main", "main", MESSAGES, [], None, anthropic_reply)
    uninterrupted = server.records[-1].output_ids

    server.delay_s = 3600.0
    policy = session(renderer, server, http)
    turn = asyncio.create_task(policy.run_turn("main", "main", MESSAGES, [], None, anthropic_reply))
    await until(lambda: any(g.output_ids for g in server.control.live))
    await weight_update(http, server, "abort", "1")
    server.delay_s = 0.0
    await control(http, server, "/continue_generation", {})
    await turn
    first, second = server.records[-2:]
    assert first.output_ids + second.output_ids == uninterrupted


async def test_without_continuation_an_abort_fails_the_turn(renderer, server, http):
    policy = session(renderer, server, http, continue_after_abort=False)
    turn = asyncio.create_task(policy.run_turn("main", "main", MESSAGES, [], None, anthropic_reply))
    await until(lambda: any(g.output_ids for g in server.control.live))
    await control(http, server, "/pause_generation", {"mode": "abort"})
    with pytest.raises(GenerationAborted):
        await turn
    await control(http, server, "/continue_generation", {})
    assert policy.turns == [] and policy.ledger.finish() == []


async def test_a_generation_that_makes_no_progress_after_an_abort_ends_the_turn_at_the_resume_budget(
    renderer, server, http
):
    policy = session(renderer, server, http, abort_resume_budget_s=0.5)
    turn = asyncio.create_task(policy.run_turn("main", "main", MESSAGES, [], None, anthropic_reply))
    await until(lambda: any(g.output_ids for g in server.control.live))
    await control(http, server, "/pause_generation", {"mode": "abort"})
    with pytest.raises(PolicyServerError, match="no progress for 0.5 s"):
        await turn
    assert policy.turns == [], "the turn failed as an unreachable policy's does"
    server.delay_s = 0.0
    await control(http, server, "/continue_generation", {})
    await until(lambda: not server.in_flight)


# --------------------------------------------------------------------------- property


class FlakyModel:
    """A deterministic language model behind a flaky server: the next token and its log-prob depend only on the
    ids before it; the weights change at given positions of the output; a request may be aborted after a given
    number of tokens, or refused (an outage) before it starts."""

    def __init__(
        self,
        vocab: int,
        stop_id: int,
        stop_after: int,
        version_at: dict[int, str],
        aborts: list[int],
        outages: list[bool],
    ):
        self.vocab, self.stop_id, self.stop_after = vocab, stop_id, stop_after
        self.version_at, self.aborts, self.outages = version_at, list(aborts), list(outages)
        self.prompt_length: int | None = None
        self.calls: list[list[int]] = []

    def token(self, ids: list[int]) -> tuple[int, float]:
        if self.prompt_length is not None and len(ids) - self.prompt_length >= self.stop_after:
            return self.stop_id, -0.01
        rng = random.Random(hash(tuple(ids)))
        return rng.randrange(self.vocab), -rng.random() * 5

    def version(self, position: int) -> str:
        """The weights serving output position ``position``: the last change at or before it."""
        changed_at = [p for p in self.version_at if p <= position]
        return self.version_at[max(changed_at)] if changed_at else "0"

    async def generate(self, base_url, input_ids, sampling_params, rid, routing_key, routed_width=None):
        if self.outages and self.outages.pop(0):
            raise PolicyServerError("connection refused")
        ids = list(input_ids)
        if self.prompt_length is None:
            self.prompt_length = len(ids)
        self.calls.append(list(ids))
        limit = self.aborts.pop(0) if self.aborts else None
        out: list[int] = []
        probs: list[float] = []
        spans: list[tuple[int, int, str]] = []
        while len(out) < sampling_params["max_new_tokens"] and (limit is None or len(out) < limit):
            version = self.version(len(ids) - self.prompt_length)
            token, log_prob = self.token(ids)
            if spans and spans[-1][2] == version:
                spans[-1] = (spans[-1][0], len(out) + 1, version)
            else:
                spans.append((len(out), len(out) + 1, version))
            out.append(token)
            probs.append(log_prob)
            ids.append(token)
            if token == self.stop_id:
                return Generation(out, probs, "stop", spans)
        if limit is not None and len(out) == limit:
            raise GenerationAborted("aborted", Generation(out, probs, "abort", spans))
        return Generation(out, probs, "length", spans)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    prompt=st.lists(st.integers(1, 999), min_size=1, max_size=20),
    stop_after=st.integers(0, 40),
    budget=st.integers(1, 48),
    changes=st.dictionaries(st.integers(0, 48), st.integers(1, 9).map(str), max_size=4),
    aborts=st.lists(st.integers(0, 12), max_size=6),
    outages=st.lists(st.booleans(), max_size=6),
)
async def test_any_aborts_and_version_changes_stitch_to_the_uninterrupted_generation(
    prompt, stop_after, budget, changes, aborts, outages
):
    outage_plan = [False, *outages]  # the first request reaches the server; outages only follow an abort
    flaky = FlakyModel(1000, 0, stop_after, changes, aborts, outage_plan)
    params = {"max_new_tokens": budget, "stop_token_ids": [0]}
    continuation = generate_through_aborts(
        flaky, "http://model", prompt, params, "r", "k", resume_budget_s=3600, retry_first_s=0.001
    )
    continued = await asyncio.wait_for(continuation, HANG_GUARD_S)
    clean = await FlakyModel(1000, 0, stop_after, changes, [], []).generate("http://model", prompt, params, "r", "k")
    stitched = continued.generation
    assert stitched.output_ids == clean.output_ids and stitched.log_probs == clean.log_probs
    assert stitched.weight_versions == clean.weight_versions, "spans are exact and minimal across the stitch"
    assert stitched.finish_reason == clean.finish_reason
    for call in flaky.calls[1:]:
        assert call[: len(prompt)] == prompt and call[len(prompt) :] == stitched.output_ids[: len(call) - len(prompt)]
    for i, token in enumerate(stitched.output_ids):
        assert (token, stitched.log_probs[i]) == flaky.token(prompt + stitched.output_ids[:i]), (
            "each token is the model's given exactly the tokens before it"
        )


class Scripted:
    """Answers each request from a list: a ``Generation``, or an exception to raise; records every rid sent."""

    def __init__(self, answers: list):
        self.answers = list(answers)
        self.rids: list[str] = []

    async def generate(self, base_url, input_ids, sampling_params, rid, routing_key, routed_width=None):
        self.rids.append(rid)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def aborted(ids: list[int]) -> GenerationAborted:
    return GenerationAborted(
        "aborted", Generation(ids, [-0.1] * len(ids), "abort", [(0, len(ids), "1")] if ids else [])
    )


async def test_every_request_has_its_own_rid_and_only_transient_refusals_are_retried():
    done = Generation([5, 0], [-0.2, -0.3], "stop", [(0, 2, "2")])
    server = Scripted(
        [aborted([4]), PolicyServerError("reset", status=None), PolicyServerError("busy", status=503), done]
    )
    params = {"max_new_tokens": 8, "stop_token_ids": [0]}
    continued = await generate_through_aborts(
        server, "http://x", [1, 2], params, "r", "k", resume_budget_s=60, retry_first_s=0.001
    )
    assert continued.generation.output_ids == [4, 5, 0] and continued.aborts == 1
    assert server.rids == ["r", "r-c1", "r-c2", "r-c3"], "a retry never reuses a rid the server may still be running"

    refused = Scripted([aborted([4]), PolicyServerError("rid already in flight", status=400), done])
    with pytest.raises(PolicyServerError, match="already in flight"):
        await generate_through_aborts(
            refused, "http://x", [1, 2], params, "r", "k", resume_budget_s=60, retry_first_s=0.001
        )
    assert refused.rids == ["r", "r-c1"], "a 4xx is not retried"


async def test_the_prompt_goes_out_as_given_and_a_resubmission_keeps_its_array_type():
    """A session's prompt is an ``array`` of up to 100k ids: it is handed on as it is (no copy into Python ints on
    the event loop), and a resubmission is one new array of the same type code."""
    seen: list = []

    class Recording(Scripted):
        async def generate(self, base_url, input_ids, sampling_params, rid, routing_key, routed_width=None):
            seen.append(input_ids)
            return await super().generate(base_url, input_ids, sampling_params, rid, routing_key, routed_width)

    prompt = array("i", [7, 8, 9])
    server = Recording([aborted([4, 5]), Generation([0], [-0.1], "stop", [(0, 1, "2")])])
    params = {"max_new_tokens": 8, "stop_token_ids": [0]}
    continued = await generate_through_aborts(
        server, "http://x", prompt, params, "r", "k", resume_budget_s=60, retry_first_s=0.001
    )
    assert continued.generation.output_ids == [4, 5, 0]
    assert seen[0] is prompt
    assert isinstance(seen[1], array) and seen[1].typecode == "i" and seen[1].tolist() == [7, 8, 9, 4, 5]
    assert prompt.tolist() == [7, 8, 9], "the caller's prompt is never changed"
