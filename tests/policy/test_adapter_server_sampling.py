"""Client sampling keys and stop sequences over real HTTP: the adapter app in front, the scripted SGLang server behind.

What the scripted server recorded is what the adapter sent: the client's
``temperature`` / ``top_p`` / ``top_k`` / ``stop_sequences`` unless the trainer
pinned them, ``max_new_tokens`` never above the session's. A stop-sequence
turn replies as Anthropic does and its segment holds exactly what was sampled.
"""

from __future__ import annotations

import aiohttp
import anthropic
import pytest

from durable_rollouts.contracts.session import SamplingParams, SessionConfig
from tests.policy.sampled_records import assert_every_sample_is_a_record_in_its_context

pytestmark = pytest.mark.asyncio(loop_scope="session")

PROMPT = [{"role": "user", "content": "Please fix it."}]


def open_session(adapter, policy_server, sampling: SamplingParams, policy: str = "noop"):
    ticket = adapter.registry.open_session(SessionConfig(policy_url=policy_server.url, sampling=sampling))
    policy_server.set_policy(ticket.session_id, policy)
    return ticket


async def post(adapter, ticket, body: dict) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{adapter.url}/v1/messages", json=body, headers={"Authorization": f"Bearer {ticket.secret}"}
        ) as r:
            return r.status, await r.json()


async def test_client_sampling_keys_reach_sglang_and_a_stop_sequence_turn_replies_and_records_as_sampled(
    adapter, policy_server, renderer
):
    ticket = open_session(
        adapter, policy_server, SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, max_new_tokens=512)
    )
    body = {
        "model": "m",
        "max_tokens": 300,
        "messages": PROMPT,
        "temperature": 0.25,
        "top_p": 0.9,
        "top_k": 20,
        "stop_sequences": ["not chan"],
    }
    status, reply = await post(adapter, ticket, body)
    assert status == 200
    assert (reply["stop_reason"], reply["stop_sequence"]) == ("stop_sequence", "not chan")
    assert [b["type"] for b in reply["content"]] == ["thinking", "text"] and reply["content"][1]["text"] == "I will"

    (record,) = policy_server.records_for(ticket.session_id)
    sent = record.sampling_params
    assert (sent["temperature"], sent["top_p"], sent["top_k"], sent["stop"], sent["max_new_tokens"]) == (
        0.25,
        0.9,
        20,
        ["not chan"],
        300,
    )
    assert sent["stop_token_ids"] == [renderer.end_of_turn_id] and sent["no_stop_trim"] is True
    assert record.finish_reason == {"type": "stop", "matched": "not chan"}
    assert renderer.decode(record.output_ids).endswith("I will not change"), (
        "the string's tokens were sampled and returned"
    )

    # Claude Code's next turn echoes the reply (without the string) and goes on.
    messages = [*PROMPT, {"role": "assistant", "content": reply["content"]}, {"role": "user", "content": "Go on."}]
    status, follow = await post(adapter, ticket, {"model": "m", "max_tokens": 300, "messages": messages})
    assert status == 200 and (follow["stop_reason"], follow["stop_sequence"]) == ("end_turn", None)

    result = await adapter.registry.finish_session(ticket.session_id)
    records = policy_server.records_for(ticket.session_id)
    assert_every_sample_is_a_record_in_its_context(result, records)
    # A new user query makes the template drop the earlier reasoning, so the next turn opens a fresh segment
    # (the extend past a stop sequence, the marker added as context, is in tests/policy/test_sampling.py).
    first, second = result.segments
    prompt, out = len(record.input_ids), len(record.output_ids)
    assert first.tokens == record.input_ids + record.output_ids
    assert first.loss_mask == [0] * prompt + [1] * out
    assert first.rollout_log_probs == [0.0] * prompt + record.output_logprobs
    assert (first.finish_reason, second.finish_reason) == ("stop", "stop")
    assert not any(second.loss_mask[: second.prompt_length]) and "not chan" not in renderer.decode(
        second.tokens[: second.prompt_length]
    )
    turn = result.turns[0]
    assert (turn.finish_reason, turn.stop_reason, turn.stop_sequence) == ("stop", "stop_sequence", "not chan")
    assert turn.sampling.model_dump() == {
        "temperature": 0.25,
        "top_p": 0.9,
        "top_k": 20,
        "max_new_tokens": 300,
        "stop": ["not chan"],
        "stop_token_ids": [],
        "from_client": ["temperature", "top_p", "top_k", "stop_sequences", "max_tokens"],
        "ignored": [],
    }
    assert result.turns[1].sampling.stop == [] and result.turns[1].sampling.temperature == 1.0, (
        "the next turn sent none"
    )


async def test_a_streamed_stop_sequence_reaches_the_sdk(adapter, policy_server):
    ticket = open_session(adapter, policy_server, SamplingParams(max_new_tokens=512))
    client = anthropic.AsyncAnthropic(base_url=adapter.url, auth_token=ticket.secret, api_key=None, max_retries=0)
    async with client.messages.stream(
        model="m", max_tokens=256, messages=PROMPT, stop_sequences=["anything"]
    ) as stream:
        message = await stream.get_final_message()
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "anything")
    assert message.content[-1].text == "I will not change"


async def test_pinned_keys_keep_the_trainers_values_whatever_the_client_sends(adapter, policy_server):
    pinned = SamplingParams(temperature=1.0, top_k=-1, max_new_tokens=128, pinned=["temperature", "stop_sequences"])
    ticket = open_session(adapter, policy_server, pinned)
    body = {
        "model": "m",
        "max_tokens": 10_000,
        "messages": PROMPT,
        "temperature": 0.0,
        "top_k": 5,
        "stop_sequences": ["not chan"],
    }
    status, reply = await post(adapter, ticket, body)
    assert status == 200 and (reply["stop_reason"], reply["stop_sequence"]) == ("end_turn", None)
    (record,) = policy_server.records_for(ticket.session_id)
    sent = record.sampling_params
    assert (sent["temperature"], sent["top_k"], sent["max_new_tokens"]) == (1.0, 5, 128) and "stop" not in sent
    result = await adapter.registry.finish_session(ticket.session_id)
    assert result.turns[0].sampling.ignored == ["temperature", "stop_sequences"]
    assert result.turns[0].sampling.from_client == ["top_k"]


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"temperature": 1.5}, "temperature"),
        ({"temperature": -0.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_k": -3}, "top_k"),
        ({"top_k": 2.5}, "top_k"),
        ({"stop_sequences": "STOP"}, "stop_sequences"),
        ({"stop_sequences": ["ok", " "]}, "stop_sequences[1]"),
    ],
)
async def test_an_invalid_sampling_value_is_a_400_naming_it_and_the_session_goes_on(
    adapter, policy_server, extra, field
):
    ticket = open_session(adapter, policy_server, SamplingParams(max_new_tokens=64, pinned=["temperature"]))
    status, error = await post(adapter, ticket, {"model": "m", "max_tokens": 64, "messages": PROMPT, **extra})
    assert status == 400 and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(f"{field}: ")
    assert policy_server.records_for(ticket.session_id) == [], "nothing was sampled"
    status, reply = await post(adapter, ticket, {"model": "m", "max_tokens": 64, "messages": PROMPT})
    assert status == 200 and reply["stop_reason"] == "end_turn"
    result = await adapter.registry.finish_session(ticket.session_id)
    assert len(result.turns) == 1 and len(result.segments) == 1
