"""The scripted server's SGLang control API over HTTP: pause modes, weight versions and their spans, the per-token
record.

The ``slow`` policy paces its tokens over an hour, so a request is reliably
mid-output: it samples one token at once and the next only when the control
state changes (a continue wakes it) or the test sets ``delay_s`` to 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.scripted_policy.control import FLUSH_REFUSED, Generation, abort_finish_reason
from durable_rollouts.scripted_policy.server import ROUTING_KEY_HEADER, ScriptedPolicyServer
from tests.scripted_policy.generate_requests import conversation, generate_body, prompt_ids
from tests.waiting import until

MODEL_INFO_FIELDS = {
    "model_path",
    "served_model_name",
    "tokenizer_path",
    "is_generation",
    "preferred_sampling_params",
    "weight_version",
    "load_format",
    "reasoning_parser",
    "tool_call_parser",
    "disaggregation_mode",
    "has_image_understanding",
    "has_audio_understanding",
    "model_type",
    "architectures",
}


@pytest.fixture
async def server(renderer: PromptRenderer) -> AsyncIterator[ScriptedPolicyServer]:
    scripted = ScriptedPolicyServer(renderer, default_policy="slow", delay_s=3600.0, weight_version="0")
    scripted.set_policy("fast", "oracle")
    scripted.url = await scripted.start()
    yield scripted
    await scripted.stop()


@pytest.fixture
def input_ids(renderer: PromptRenderer) -> list[int]:
    return prompt_ids(renderer, conversation("/tmp/x", 0))


async def post(
    http: aiohttp.ClientSession, server: ScriptedPolicyServer, path: str, body: dict | None = None
) -> tuple[int, dict]:
    async with http.post(f"{server.url}{path}", json=body) as response:
        return response.status, await response.json()


async def model_info(http: aiohttp.ClientSession, server: ScriptedPolicyServer) -> dict:
    async with http.get(f"{server.url}/get_model_info") as response:
        return await response.json()


async def generate(
    http: aiohttp.ClientSession, server: ScriptedPolicyServer, input_ids: list[int], rid: str, routing_key: str = "sess"
) -> dict:
    body = generate_body(input_ids, rid)
    async with http.post(f"{server.url}/generate", json=body, headers={ROUTING_KEY_HEADER: routing_key}) as response:
        assert response.status == 200, await response.text()
        return await response.json()


def running(server: ScriptedPolicyServer, rid: str) -> Generation | None:
    return next((generation for generation in server.control.live if generation.rid == rid), None)


async def start_slow(http, server, input_ids, rid: str, tokens: int = 1) -> tuple[asyncio.Task, Generation]:
    """A slow request, once it has sampled ``tokens`` tokens."""
    pending = asyncio.create_task(generate(http, server, input_ids, rid))
    await until(lambda: (g := running(server, rid)) is not None and len(g.output_ids) >= tokens)
    generation = running(server, rid)
    assert generation is not None
    return pending, generation


def per_token(spans: list[dict]) -> list[str]:
    return [span["version"] for span in spans for _ in range(span["start"], span["end"])]


def assert_recorded_as_returned(server: ScriptedPolicyServer, reply: dict) -> None:
    [record] = [record for record in server.records if record.rid == reply["meta_info"]["id"]]
    meta = reply["meta_info"]
    assert record.output_ids == reply["output_ids"] == [token for _, token, _ in meta["output_token_logprobs"]]
    assert record.output_logprobs == [logprob for logprob, _, _ in meta["output_token_logprobs"]]
    assert record.output_versions == per_token(meta["weight_versions"])
    assert meta["weight_version"] == meta["weight_versions"][-1]["version"]
    assert record.finish_reason == meta["finish_reason"]


async def test_model_info_has_sglangs_fields_and_the_initial_version(server, http, renderer):
    info = await model_info(http, server)
    assert set(info) == MODEL_INFO_FIELDS
    assert (info["weight_version"], info["model_path"], info["is_generation"]) == ("0", "scripted-slow", True)
    async with http.get(f"{server.url}/model_info") as response:
        assert await response.json() == info
    default = ScriptedPolicyServer(renderer)
    default.url = await default.start()
    try:
        assert (await model_info(http, default))["weight_version"] == "default"
    finally:
        await default.stop()


async def test_update_weight_version_is_served_and_reported(server, http, input_ids):
    before = await generate(http, server, input_ids, "v0", "fast")
    assert before["meta_info"]["weight_version"] == "0"
    assert before["meta_info"]["weight_versions"] == [{"version": "0", "start": 0, "end": len(before["output_ids"])}]

    status, body = await post(http, server, "/update_weight_version", {"new_version": "step-1"})
    assert (status, body) == (
        200,
        {"success": True, "message": "Weight version updated to step-1", "new_version": "step-1"},
    )
    assert (await model_info(http, server))["weight_version"] == "step-1"
    after = await generate(http, server, input_ids, "v1", "fast")
    assert after["meta_info"]["weight_versions"] == [{"version": "step-1", "start": 0, "end": len(after["output_ids"])}]
    assert_recorded_as_returned(server, before)
    assert_recorded_as_returned(server, after)


async def test_update_weights_from_disk_moves_the_version_only_when_given(server, http):
    status, body = await post(
        http, server, "/update_weights_from_disk", {"model_path": "/ckpt/step-2", "weight_version": "2"}
    )
    assert (status, body) == (
        200,
        {
            "success": True,
            "message": "Succeeded to update model weights. Weight version updated to 2.",
            "num_paused_requests": 0,
        },
    )
    info = await model_info(http, server)
    assert (info["model_path"], info["served_model_name"], info["weight_version"]) == (
        "/ckpt/step-2",
        "/ckpt/step-2",
        "2",
    )

    status, body = await post(
        http, server, "/update_weights_from_disk", {"model_path": "/ckpt/step-3", "load_format": "safetensors"}
    )
    assert (status, body["message"]) == (200, "Succeeded to update model weights.")
    info = await model_info(http, server)
    assert (info["model_path"], info["load_format"], info["weight_version"]) == ("/ckpt/step-3", "safetensors", "2")

    for path, bad, field in [
        ("/update_weights_from_disk", {"weight_version": "4"}, "model_path"),
        ("/update_weights_from_disk", {"model_path": "m", "weight_version": 4}, "weight_version"),
        ("/update_weight_version", {}, "new_version"),
        ("/pause_generation", {"mode": "freeze"}, "mode"),
    ]:
        status, body = await post(http, server, path, bad)
        assert (status, body["field"]) == (400, field), path
    assert (await model_info(http, server))["weight_version"] == "2"


async def test_abort_pause_ends_running_requests_with_their_tokens_and_new_requests_wait(
    server, http, input_ids, renderer
):
    reference = await generate(http, server, input_ids, "ref", "fast")
    pending, generation = await start_slow(http, server, input_ids, "a")

    status, body = await post(http, server, "/pause_generation", {})
    assert (status, body) == (200, {"message": "Generation paused successfully.", "status": "ok"})
    assert server.control.live == [], "an abort pause returns once every running request has returned"
    aborted = await pending
    assert aborted["meta_info"]["finish_reason"] == abort_finish_reason()
    assert aborted["output_ids"] == reference["output_ids"][:1] and aborted["text"] == renderer.decode(
        reference["output_ids"][:1]
    )
    assert aborted["meta_info"]["weight_versions"] == [{"version": "0", "start": 0, "end": 1}]

    waiting = asyncio.create_task(generate(http, server, input_ids, "b", "fast"))
    await until(lambda: server.control.waiting == 1)
    assert "b" in server.in_flight and running(server, "b") is None
    status, body = await post(
        http, server, "/update_weights_from_disk", {"model_path": "/ckpt/1", "weight_version": "1"}
    )
    assert status == 200 and body["success"]
    status, body = await post(http, server, "/continue_generation", {})
    assert (status, body) == (200, {"message": "Generation continued successfully.", "status": "ok"})

    admitted = await waiting
    assert admitted["output_ids"] == reference["output_ids"]
    assert admitted["meta_info"]["weight_versions"] == [
        {"version": "1", "start": 0, "end": len(admitted["output_ids"])}
    ]
    for reply in (aborted, admitted):
        assert_recorded_as_returned(server, reply)


@pytest.mark.parametrize(("mode", "flush_cache", "retractions"), [("retract", True, 1), ("in_place", False, 0)])
async def test_held_request_resumes_after_continue_and_spans_two_versions(
    server, http, input_ids, mode, flush_cache, retractions
):
    reference = await generate(http, server, input_ids, "ref", "fast")
    pending, generation = await start_slow(http, server, input_ids, "a")

    status, _ = await post(http, server, "/pause_generation", {"mode": mode})
    held = len(generation.output_ids)
    assert status == 200 and running(server, "a") is generation and not pending.done()
    update = {"model_path": "/ckpt/1", "weight_version": "1", "flush_cache": flush_cache}
    status, body = await post(http, server, "/update_weights_from_disk", update)
    assert (status, body["success"]) == (200, True)
    assert len(generation.output_ids) == held, "a paused engine samples nothing"
    server.delay_s = 0.0
    await post(http, server, "/continue_generation", {})

    reply = await pending
    n = len(reply["output_ids"])
    assert reply["output_ids"] == reference["output_ids"] and reply["meta_info"]["finish_reason"]["type"] == "stop"
    assert reply["meta_info"]["weight_versions"] == [
        {"version": "0", "start": 0, "end": held},
        {"version": "1", "start": held, "end": n},
    ]
    assert reply["meta_info"]["weight_version"] == "1" and reply["meta_info"]["num_retractions"] == retractions
    assert_recorded_as_returned(server, reply)


async def test_two_pauses_give_three_spans(server, http, input_ids):
    pending, generation = await start_slow(http, server, input_ids, "a")
    for step, version in enumerate(["1", "2"], start=1):
        await until(lambda step=step: len(generation.output_ids) >= step)
        await post(http, server, "/pause_generation", {"mode": "in_place"})
        status, _ = await post(
            http, server, "/update_weight_version", {"new_version": version, "abort_all_requests": False}
        )
        assert status == 200
        if version == "2":
            server.delay_s = 0.0
        await post(http, server, "/continue_generation", {})

    reply = await pending
    n = len(reply["output_ids"])
    spans = [
        {"version": "0", "start": 0, "end": 1},
        {"version": "1", "start": 1, "end": 2},
        {"version": "2", "start": 2, "end": n},
    ]
    assert reply["meta_info"]["weight_versions"] == spans
    assert server.records[-1].output_versions == ["0", "1"] + ["2"] * (n - 2)
    assert_recorded_as_returned(server, reply)


async def test_in_place_update_with_a_cache_flush_is_refused_yet_the_engine_serves_the_new_weights(
    server, http, input_ids
):
    pending, generation = await start_slow(http, server, input_ids, "a")
    await post(http, server, "/pause_generation", {"mode": "in_place"})
    status, body = await post(
        http, server, "/update_weights_from_disk", {"model_path": "/ckpt/1", "weight_version": "1"}
    )
    assert (status, body) == (400, {"success": False, "message": FLUSH_REFUSED, "num_paused_requests": 0})
    info = await model_info(http, server)
    assert (info["weight_version"], info["model_path"]) == ("0", "scripted-slow")
    server.delay_s = 0.0
    await post(http, server, "/continue_generation", {})

    reply = await pending
    assert per_token(reply["meta_info"]["weight_versions"]) == ["0"] + ["1"] * (len(reply["output_ids"]) - 1)
    assert_recorded_as_returned(server, reply)


@pytest.mark.parametrize("mode", ["retract", "in_place"])
async def test_an_abort_reaches_a_retracted_request_at_once_and_an_in_place_one_at_continue(
    server, http, input_ids, mode
):
    pending, generation = await start_slow(http, server, input_ids, "a")
    await post(http, server, "/pause_generation", {"mode": mode})
    held = len(generation.output_ids)
    async with http.post(f"{server.url}/abort_request", json={"rid": "a"}) as response:
        assert response.status == 200
    if mode == "retract":
        reply = await pending
        await post(http, server, "/continue_generation", {})
    else:
        assert running(server, "a") is generation and generation.aborted
        await post(http, server, "/continue_generation", {})
        reply = await pending
    assert reply["meta_info"]["finish_reason"] == abort_finish_reason()
    assert len(reply["output_ids"]) == held
    assert reply["meta_info"]["num_retractions"] == (1 if mode == "retract" else 0)
    assert_recorded_as_returned(server, reply)


async def test_unpaused_update_waits_for_running_requests_and_admission_waits_for_it(server, http, input_ids):
    pending, generation = await start_slow(http, server, input_ids, "a")
    update = asyncio.create_task(
        post(http, server, "/update_weights_from_disk", {"model_path": "/ckpt/1", "weight_version": "1"})
    )
    await until(lambda: server.control.writers == 1)
    waiting = asyncio.create_task(generate(http, server, input_ids, "b", "fast"))
    await until(lambda: server.control.waiting == 1)
    assert server.control.version == "0" and not update.done()

    async with http.post(f"{server.url}/abort_request", json={"abort_all": True}) as response:
        assert response.status == 200
    aborted, (status, body), admitted = await asyncio.gather(pending, update, waiting)
    assert aborted["meta_info"]["finish_reason"]["type"] == "abort"
    assert aborted["meta_info"]["weight_versions"] == [{"version": "0", "start": 0, "end": len(aborted["output_ids"])}]
    assert (status, body["success"]) == (200, True)
    assert admitted["meta_info"]["weight_version"] == "1"
    for reply in (aborted, admitted):
        assert_recorded_as_returned(server, reply)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/update_weight_version", {"new_version": "1"}),
        ("/update_weights_from_disk", {"model_path": "/ckpt/1", "weight_version": "1", "abort_all_requests": True}),
    ],
)
async def test_an_update_that_aborts_all_ends_running_requests_under_the_old_version(
    server, http, input_ids, path, body
):
    pending, generation = await start_slow(http, server, input_ids, "a")
    status, answer = await post(http, server, path, body)
    assert status == 200 and answer["success"]
    reply = await pending
    assert reply["meta_info"]["finish_reason"] == abort_finish_reason()
    assert reply["meta_info"]["weight_version"] == "0" and (await model_info(http, server))["weight_version"] == "1"
    assert_recorded_as_returned(server, reply)
