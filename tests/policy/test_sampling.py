"""What a turn is sampled with (``durable_rollouts.policy.sampling``), and what a stop-sequence turn leaves in the
ledger.

The rule: the trainer's ``SamplingParams`` are the defaults, the client's
``temperature`` / ``top_p`` / ``top_k`` / ``stop_sequences`` override them
unless pinned, ``max_new_tokens`` only ever goes down. A stop-sequence turn
keeps every sampled id (the string's included) with loss_mask 1, replies
without the string, and the next turn extends the segment with the
end-of-turn marker as context, never as a sample.
"""

from __future__ import annotations

import math

import aiohttp
import pytest
from pydantic import ValidationError

from durable_rollouts.contracts.session import SamplingParams, SessionConfig
from durable_rollouts.policy.anthropic_translation import RequestError
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.sampling import (
    MAX_STOP_SEQUENCE_CHARS,
    MAX_STOP_SEQUENCES,
    ClientSampling,
    client_sampling,
    sglang_params,
    turn_sampling,
)
from durable_rollouts.policy.session import PolicySession
from durable_rollouts.policy.sglang_client import Generation, GenerationAborted, SGLangClient
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from tests.policy.replies import anthropic_reply

ASYNC = pytest.mark.asyncio(loop_scope="session")
DEFAULTS = SamplingParams(temperature=1.0, top_p=0.95, top_k=40, max_new_tokens=1000)
SYSTEM = {"role": "system", "content": "You are a coding agent."}


# --- the rule ---------------------------------------------------------------------------------------------------


def test_a_request_that_sets_nothing_is_sampled_with_the_trainers_defaults():
    sampling = turn_sampling(DEFAULTS, client_sampling({"max_tokens": 5000}), 5000, room=4000)
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.max_new_tokens) == (1.0, 0.95, 40, 1000)
    assert sampling.stop == [] and sampling.from_client == [] and sampling.ignored == []
    params = sglang_params(sampling, end_of_turn_id=7)
    assert params == {
        "max_new_tokens": 1000,
        "temperature": 1.0,
        "top_p": 0.95,
        "top_k": 40,
        "stop_token_ids": [7],
        "skip_special_tokens": False,
        "no_stop_trim": True,
    }, "no stop key at all when the client sent no stop sequences"


def test_the_clients_values_override_the_defaults():
    client = client_sampling({"temperature": 0.2, "top_p": 0.5, "top_k": 8, "stop_sequences": ["END", "\n\nHuman:"]})
    sampling = turn_sampling(DEFAULTS, client, None, room=4000)
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.2, 0.5, 8)
    assert sampling.stop == ["END", "\n\nHuman:"]
    assert sampling.from_client == ["temperature", "top_p", "top_k", "stop_sequences"] and sampling.ignored == []
    assert sglang_params(sampling, 7)["stop"] == ["END", "\n\nHuman:"]


def test_pinned_keys_ignore_the_client_and_say_so():
    pinned = DEFAULTS.model_copy(update={"pinned": ["temperature", "top_k", "stop_sequences"]})
    client = client_sampling({"temperature": 0.0, "top_p": 0.5, "top_k": 1, "stop_sequences": ["END"]})
    sampling = turn_sampling(pinned, client, None, room=4000)
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.stop) == (1.0, 0.5, 40, [])
    assert sampling.from_client == ["top_p"]
    assert sampling.ignored == ["temperature", "top_k", "stop_sequences"]


def test_a_pin_travels_in_the_policy_spec_and_refuses_unknown_keys():
    assert SamplingParams.model_validate({"pinned": ["temperature"]}).pinned == ["temperature"]
    with pytest.raises(ValidationError):
        SamplingParams(pinned=["max_new_tokens"])
    with pytest.raises(ValidationError):
        SamplingParams(top_k=-2)


def test_top_k_zero_means_no_cut_and_is_sent_as_sglangs_minus_one():
    assert turn_sampling(DEFAULTS, client_sampling({"top_k": 0}), None, 4000).top_k == -1
    assert turn_sampling(DEFAULTS, client_sampling({"top_k": -1}), None, 4000).top_k == -1


@pytest.mark.parametrize(
    "max_tokens, room, expected, lowered_by_client",
    [
        (None, 4000, 1000, False),  # the trainer's default
        (50_000, 4000, 1000, False),  # a client cannot raise it
        (200, 4000, 200, True),  # only lower it
        (50_000, 300, 300, False),  # and never past the context room
        (200, 150, 150, False),
    ],
)
def test_max_new_tokens_is_the_least_of_the_default_the_request_and_the_room(
    max_tokens, room, expected, lowered_by_client
):
    sampling = turn_sampling(DEFAULTS, ClientSampling(), max_tokens, room)
    assert sampling.max_new_tokens == expected
    assert ("max_tokens" in sampling.from_client) is lowered_by_client


@pytest.mark.parametrize(
    "body, field",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": 1.5}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"temperature": math.nan}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.01}, "top_p"),
        ({"top_p": [0.5]}, "top_p"),
        ({"top_k": -2}, "top_k"),
        ({"top_k": 1.5}, "top_k"),
        ({"top_k": False}, "top_k"),
        ({"stop_sequences": "END"}, "stop_sequences"),
        ({"stop_sequences": ["ok", ""]}, "stop_sequences[1]"),
        ({"stop_sequences": ["  \n"]}, "stop_sequences[0]"),
        ({"stop_sequences": [3]}, "stop_sequences[0]"),
        ({"stop_sequences": ["x" * (MAX_STOP_SEQUENCE_CHARS + 1)]}, "stop_sequences[0]"),
        ({"stop_sequences": [f"s{i}" for i in range(MAX_STOP_SEQUENCES + 1)]}, "stop_sequences"),
    ],
)
def test_an_invalid_value_is_refused_naming_its_field(body, field):
    with pytest.raises(RequestError) as raised:
        client_sampling(body)
    assert str(raised.value).startswith(f"{field}: ")


def test_null_means_not_sent_and_anthropic_edges_are_accepted():
    assert (
        client_sampling({"temperature": None, "top_p": None, "top_k": None, "stop_sequences": None}) == ClientSampling()
    )
    edges = client_sampling({"temperature": 0, "top_p": 1, "top_k": 0, "stop_sequences": ["a", "a", "b"]})
    assert edges == ClientSampling(temperature=0.0, top_p=1.0, top_k=0, stop_sequences=("a", "b"))


# --- stop sequences through a session, its ledger and the next turn -----------------------------------------


@ASYNC
async def test_a_stop_sequence_turn_keeps_its_samples_and_the_next_turn_extends_past_it(renderer):
    server = ScriptedPolicyServer(renderer, default_policy="noop", delay_s=0.0)
    url = await server.start()
    cpu = FairExecutor(1)
    try:
        async with aiohttp.ClientSession() as http:
            client = SGLangClient(http, vocab_size=renderer.vocab_size)
            session = PolicySession("s-stop", SessionConfig(policy_url=url, sampling=DEFAULTS), renderer, client, cpu)
            messages = [SYSTEM, {"role": "user", "content": "Fix the bug."}]
            requested = client_sampling({"temperature": 0.3, "stop_sequences": ["not chan"]})
            first = await session.run_turn("main", "main", messages, [], None, anthropic_reply, requested)
            (after_first,) = session.ledger.finish()
            echoed = session.ledger.segments[0].messages[-1]
            follow = [*messages, echoed, {"role": "tool", "tool_call_id": "t1", "content": "ok"}]
            second = await session.run_turn("main", "main", follow, [], None, anthropic_reply)
    finally:
        cpu.shutdown()
        await server.stop()
    one, two = server.records
    end = renderer.end_of_turn_id

    # The first turn: SGLang stopped after " change", the token that completed "not chan"; it was sampled.
    assert one.finish_reason == {"type": "stop", "matched": "not chan"}
    assert one.sampling_params["stop"] == ["not chan"] and one.sampling_params["temperature"] == 0.3
    assert renderer.decode(one.output_ids).endswith("I will not change") and one.output_ids[-1] != end
    assert (first.finish_reason, first.stop_sequence, first.parsed.text) == ("stop", "not chan", "I will")
    assert echoed["content"] == "I will", "the client sees the text before the stop sequence, as Anthropic replies"
    summary = session.turns[0]
    assert (summary.finish_reason, summary.stop_reason, summary.stop_sequence) == ("stop", "stop_sequence", "not chan")
    assert summary.sampling.stop == ["not chan"] and summary.sampling.from_client == ["temperature", "stop_sequences"]
    prompt, out = len(one.input_ids), len(one.output_ids)
    assert after_first.tokens == one.input_ids + one.output_ids
    assert after_first.loss_mask == [0] * prompt + [1] * out
    assert after_first.rollout_log_probs == [0.0] * prompt + one.output_logprobs
    assert after_first.finish_reason == "stop"

    # The next turn extends the segment: the sampled ids as they were, the end-of-turn marker as context.
    assert second.stop_sequence is None and session.turns[1].stop_reason == "end_turn"
    (segment,) = session.ledger.finish()
    assert two.input_ids[: prompt + out] == after_first.tokens
    assert two.input_ids[prompt + out] == end, "no end-of-turn was sampled: it joins the context"
    assert "I will not change<|im_end|>" in renderer.decode(two.input_ids), "the model's context is what it sampled"
    assert "not change" not in renderer.render(follow, None, True), "while the client's echo renders without it"
    tail = len(two.input_ids) - prompt - out
    assert segment.tokens == two.input_ids + two.output_ids
    assert segment.loss_mask == [0] * prompt + [1] * out + [0] * tail + [1] * len(two.output_ids)
    assert segment.rollout_log_probs == [0.0] * prompt + one.output_logprobs + [0.0] * tail + two.output_logprobs
    assert segment.turns == 2 and segment.sampled_runs() == [
        (prompt, prompt + out),
        (len(two.input_ids), len(segment.tokens)),
    ]


class AbortingClient:
    """Plays SGLang across an abort: the first request returns ``first`` ids and is aborted, the resubmission returns
    the rest with an end-of-turn finish; SGLang searched each request's own output only, so it saw no stop string."""

    def __init__(self, renderer, text: str, first: int):
        self.ids = renderer.encode(text) + [renderer.end_of_turn_id]
        self.first = first
        self.requests: list[tuple[list[int], dict]] = []

    async def generate(self, base_url, input_ids, sampling_params, rid, routing_key, routed_width=None):
        self.requests.append((list(input_ids), sampling_params))
        log_probs = [-0.25 * (i + 1) for i in range(len(self.ids))]
        if len(self.requests) == 1:
            partial = Generation(self.ids[: self.first], log_probs[: self.first], "abort", [(0, self.first, "1")])
            raise GenerationAborted("aborted for a weight update", partial)
        rest = len(self.ids) - self.first
        return Generation(self.ids[self.first :], log_probs[self.first :], "stop", [(0, rest, "2")])


@ASYNC
async def test_a_stop_sequence_straddling_an_abort_is_found_and_the_generation_cut_after_it(renderer):
    fake = AbortingClient(renderer, "Done. alpha beta gamma", first=3)  # "Done", ".", " alpha" | " beta", " gamma", end
    cpu = FairExecutor(1)
    try:
        session = PolicySession("s-cut", SessionConfig(policy_url="http://policy.invalid"), renderer, fake, cpu)
        messages = [SYSTEM, {"role": "user", "content": "Go."}]
        outcome = await session.run_turn(
            "main", "main", messages, [], None, anthropic_reply, client_sampling({"stop_sequences": ["alpha beta"]})
        )
    finally:
        cpu.shutdown()
    assert [params["stop"] for _, params in fake.requests] == [["alpha beta"], ["alpha beta"]]
    assert (outcome.finish_reason, outcome.stop_sequence, outcome.parsed.text) == ("stop", "alpha beta", "Done.")
    (segment,) = session.ledger.finish()
    prompt = len(fake.requests[0][0])
    kept = fake.ids[:4]  # through " beta", the token that completed the string; " gamma" and the end are dropped
    assert segment.tokens == fake.requests[0][0] + kept
    assert segment.loss_mask == [0] * prompt + [1] * 4
    assert segment.rollout_log_probs == [0.0] * prompt + [-0.25, -0.5, -0.75, -1.0]
    assert segment.token_weight_versions()[prompt:] == ["1", "1", "1", "2"]
    assert session.turns[0].aborts_continued == 1 and session.turns[0].stop_reason == "stop_sequence"


def test_the_trainers_stop_strings_and_ids_go_out_on_every_turn_beside_the_clients():
    defaults = SamplingParams(stop=["</done>"], stop_token_ids=[248044, 7])
    mine = turn_sampling(defaults, ClientSampling(), None, 100)
    theirs = turn_sampling(defaults, ClientSampling(stop_sequences=("END", "</done>")), None, 100)
    pinned = turn_sampling(
        defaults.model_copy(update={"pinned": ["stop_sequences"]}), ClientSampling(stop_sequences=("END",)), None, 100
    )
    assert (mine.stop, theirs.stop, pinned.stop) == (["</done>"], ["</done>", "END"], ["</done>"])
    params = sglang_params(theirs, end_of_turn_id=7)
    assert params["stop_token_ids"] == [7, 248044] and params["stop"] == ["</done>", "END"]
