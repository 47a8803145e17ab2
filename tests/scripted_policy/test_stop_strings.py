"""The scripted server honours ``sampling_params.stop`` as sglang 0.5.23 does, and records the sampling params it got.

sglang (``Req.update_finish_state``, ``DetokenizerManager.trim_matched_stop``):
after each sampled token, a stop string found in the decoded tail of the output
ends the request with ``{"type": "stop", "matched": <string>}``; ``output_ids``
run through that token; the text is cut through the end of the string with
``no_stop_trim``, before it without; stop strings are checked before the stop
token and before ``max_new_tokens``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.scripted_policy.completions import noop_completion
from durable_rollouts.scripted_policy.server import ROUTING_KEY_HEADER, ScriptedPolicyServer
from tests.scripted_policy.generate_requests import END_ID, conversation, generate_body, prompt_ids

NOOP = noop_completion("", 0)  # "...I will not change anything."


@pytest.fixture
async def server(renderer: PromptRenderer) -> AsyncIterator[ScriptedPolicyServer]:
    scripted = ScriptedPolicyServer(renderer, default_policy="noop", delay_s=0.0)
    scripted.url = await scripted.start()
    yield scripted
    await scripted.stop()


async def generate(http: aiohttp.ClientSession, server: ScriptedPolicyServer, body: dict, status: int = 200) -> dict:
    async with http.post(f"{server.url}/generate", json=body, headers={ROUTING_KEY_HEADER: "sess"}) as response:
        assert response.status == status, await response.text()
        return await response.json()


def with_sampling(body: dict, **sampling) -> dict:
    return {**body, "sampling_params": {**body["sampling_params"], **sampling}}


def through(renderer: PromptRenderer, token_text: str) -> list[int]:
    """The noop answer's ids through the first token that decodes to ``token_text``."""
    ids = renderer.encode(NOOP)
    return ids[: [renderer.decode([t]) for t in ids].index(token_text) + 1]


async def test_a_stop_string_ends_the_answer_after_the_token_that_completes_it(server, http, renderer):
    body = with_sampling(
        generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "stop-1"), stop=["not chan"], temperature=0.3
    )
    reply = await generate(http, server, body)
    expected = through(renderer, " change")  # "chan" ends inside " change": the whole token was sampled
    assert reply["output_ids"] == expected and expected[-1] != END_ID
    assert reply["meta_info"]["finish_reason"] == {"type": "stop", "matched": "not chan"}
    assert [token for _, token, _ in reply["meta_info"]["output_token_logprobs"]] == expected
    assert reply["text"] == renderer.decode(expected).removesuffix("ge"), (
        "no_stop_trim: the text runs through the string"
    )
    (record,) = server.records
    assert record.output_ids == expected and record.finish_reason == reply["meta_info"]["finish_reason"]
    assert record.sampling_params == body["sampling_params"], "the record has the sampling params exactly as sent"


async def test_without_no_stop_trim_the_text_stops_before_the_string(server, http, renderer):
    body = with_sampling(
        generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "stop-2"), stop="not chan", no_stop_trim=False
    )
    reply = await generate(http, server, body)
    assert reply["output_ids"] == through(renderer, " change")
    assert reply["text"].endswith("I will ") and "not" not in reply["text"].split("I will")[-1]


@pytest.mark.parametrize(
    "stops, matched", [(["chan", "ange"], "chan"), (["ange", "chan"], "ange"), (["change", "will"], "will")]
)
async def test_the_first_string_completed_wins_and_ties_go_to_the_list_order(server, http, renderer, stops, matched):
    body = with_sampling(generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), f"stop-{matched}"), stop=stops)
    reply = await generate(http, server, body)
    assert reply["meta_info"]["finish_reason"] == {"type": "stop", "matched": matched}
    assert reply["output_ids"] == through(renderer, " will" if matched == "will" else " change")


async def test_a_string_the_last_allowed_token_completes_is_a_stop_one_token_later_a_length(server, http, renderer):
    ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    budget = len(through(renderer, " change"))
    at = await generate(http, server, with_sampling(generate_body(ids, "at", max_new_tokens=budget), stop=["not chan"]))
    assert at["meta_info"]["finish_reason"] == {"type": "stop", "matched": "not chan"}
    short = await generate(
        http, server, with_sampling(generate_body(ids, "short", max_new_tokens=budget - 1), stop=["not chan"])
    )
    assert short["meta_info"]["finish_reason"] == {"type": "length", "length": budget - 1}


async def test_a_stop_string_beats_the_end_of_turn_id_completed_by_the_same_token(server, http, renderer):
    body = with_sampling(generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "eot"), stop=["<|im_end|>"])
    reply = await generate(http, server, body)
    assert reply["output_ids"][-1] == END_ID
    assert reply["meta_info"]["finish_reason"] == {"type": "stop", "matched": "<|im_end|>"}


async def test_only_the_requests_own_output_is_searched(server, http, renderer):
    """A resubmitted begun answer is prompt: the stop string in it does not end the rest (as in sglang)."""
    ids = prompt_ids(renderer, conversation("/tmp/x", 0))
    head = through(renderer, " will")
    rest = await generate(http, server, with_sampling(generate_body(ids + head, "rest"), stop=["will"]))
    assert rest["meta_info"]["finish_reason"] == {"type": "stop", "matched": END_ID}
    assert head + rest["output_ids"] == renderer.encode(NOOP) + [END_ID]


@pytest.mark.parametrize(
    "sampling, field",
    [
        ({"temperature": -1}, "sampling_params.temperature"),
        ({"temperature": "warm"}, "sampling_params.temperature"),
        ({"top_p": 0}, "sampling_params.top_p"),
        ({"top_p": 1.5}, "sampling_params.top_p"),
        ({"top_k": 0}, "sampling_params.top_k"),
        ({"top_k": -2}, "sampling_params.top_k"),
        ({"top_k": 2.5}, "sampling_params.top_k"),
        ({"stop": 5}, "sampling_params.stop"),
        ({"stop": ["ok", 1]}, "sampling_params.stop"),
    ],
)
async def test_sampling_params_sglang_refuses_are_400_naming_the_field(server, http, renderer, sampling, field):
    body = with_sampling(generate_body(prompt_ids(renderer, conversation("/tmp/x", 0)), "bad"), **sampling)
    error = await generate(http, server, body, status=400)
    assert error["field"] == field and server.records == []
