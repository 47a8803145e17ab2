"""A scripted policy server that speaks SGLang's native ``/generate`` contract offline.

Tests and the demo point the worker at it instead of SGLang: it answers with real token ids from the project's
tokenizer, so the whole coding-agent loop (render → generate → parse → record) runs without a GPU. It also
serves ``/abort_request``, sglang's control API (``durable_rollouts.scripted_policy.control``) and its own
``/scripted/*`` routes: docs/adapter.md (*The scripted policy server's contract*) gives each endpoint, the
policies (``POLICIES``) and the CLI.

Invariants: an answer is sampled one engine step per token, each token stamped with the weight version served
then, and it ends where sglang 0.5.23 would end it (a stop string, then the end-of-turn id, then
``max_new_tokens``; an aborted request with the tokens sampled so far). Every answered ``/generate`` (aborted
and ``error`` ones included, rejected 400s not) is recorded as a :class:`SampledRecord`, in answer order, with
exactly the ids, log-probs and per-token versions returned.

Pacing: ``slow`` spreads its answer over ``delay_s``, every other policy over ``turn_delay(prompt, routing_key)``
seconds when a turn delay is set, else ``token_delay_s`` per token; each token waits through the control's
pacing, so a pause or an abort lands mid-output.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import math
import random
import signal
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiohttp import web
from pydantic import BaseModel

from durable_rollouts.config.arg_types import count_arg, existing_path_arg, number_arg, port_arg
from durable_rollouts.drift_repair.corpus import load_corpus
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import DEFAULT_TOKENIZER_DIR, ensure_qwen_tokenizer
from durable_rollouts.scripted_policy.completions import (
    ASSISTANT_TURN,
    OraclePolicy,
    OracleTask,
    length_completion,
    malformed_completion,
    noop_completion,
)
from durable_rollouts.scripted_policy.control import (
    FLUSH_REFUSED,
    PAUSE_MODES,
    Generation,
    GenerationControl,
    abort_finish_reason,
    weight_version_spans,
)
from durable_rollouts.scripted_policy.drift_roles import RepairCompletion, SelfPlayCompletion, drift_completion
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.replay_data import DEFAULT_MOE, MoEShape, nucleus, routing
from durable_rollouts.scripted_policy.turn_delays import TurnDelay, parse_lognormal

ROUTING_KEY_HEADER = "X-SMG-Routing-Key"
DEFAULT_MAX_NEW_TOKENS = 128
POLICIES = ("oracle", "noop", "malformed", "length", "error", "slow", "garbage", "drift", "repair", "self_play")


class SampledRecord(BaseModel):
    """One answered ``/generate`` call, exactly as returned; ``output_versions[i]`` sampled ``output_ids[i]``."""

    rid: str
    routing_key: str | None
    input_ids: list[int]
    output_ids: list[int]
    output_logprobs: list[float]
    output_versions: list[str]
    finish_reason: dict[str, Any]
    policy: str
    sampling_params: dict[str, Any] = {}


class AbortRecord(BaseModel):
    """One ``/abort_request`` as received; ``in_flight``: whether its rid named a request in flight then."""

    rid: str | None
    abort_all: bool
    in_flight: bool


def token_logprob(rid: str, position: int) -> float:
    # Deterministic in (rid, position), in (-4, 0].
    return -4.0 * random.Random(f"{rid}:{position}").random()


def finish(ids: list[int], max_new_tokens: int, end_of_turn_id: int) -> tuple[list[int], dict[str, Any]]:
    if len(ids) > max_new_tokens:
        return ids[:max_new_tokens], {"type": "length", "length": max_new_tokens}
    return ids, {"type": "stop", "matched": end_of_turn_id}


def finish_at_stops(
    ids: list[int],
    max_new_tokens: int,
    end_of_turn_id: int,
    stops: Sequence[str],
    decode: Callable[[list[int]], str],
    tail_tokens: int,
) -> tuple[list[int], dict[str, Any]]:
    """``ids`` sampled one by one with sglang 0.5.23's checks after each (``Req.update_finish_state``): a stop
    string in the decoded tail (the last ``tail_tokens`` ids), in ``stops`` order; then the end-of-turn id; then
    ``max_new_tokens``. The answer ends after the token that ends it."""
    for count in range(1, len(ids) + 1):
        tail = decode(ids[max(0, count - tail_tokens) : count])
        matched = next((stop for stop in stops if stop in tail), None)
        if matched is not None:
            return ids[:count], {"type": "stop", "matched": matched}
        if ids[count - 1] == end_of_turn_id:
            return ids[:count], {"type": "stop", "matched": end_of_turn_id}
        if count >= max_new_tokens:
            return ids[:count], {"type": "length", "length": max_new_tokens}
    return finish(ids, max_new_tokens, end_of_turn_id)


def trim_matched_stop(text: str, finish_reason: dict[str, Any], no_stop_trim: bool) -> str:
    """sglang 0.5.23's ``DetokenizerManager.trim_matched_stop`` for a stop string: the text through the end of its
    first occurrence with ``no_stop_trim``, before it without; any other finish: the text unchanged."""
    matched = finish_reason.get("matched")
    if not isinstance(matched, str) or (position := text.find(matched)) < 0:
        return text
    return text[: position + len(matched)] if no_stop_trim else text[:position]


class BadRequest(Exception):
    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field = field


@dataclass(frozen=True)
class GenerateRequest:
    """``sampling_params``: the request's, as sent; ``stop``: its stop strings."""

    input_ids: list[int]
    max_new_tokens: int
    rid: str
    return_logprob: bool
    stop: tuple[str, ...] = ()
    no_stop_trim: bool = False
    sampling_params: dict[str, Any] = field(default_factory=dict)
    return_routed_experts: bool = False

    @property
    def top_p_token_ids(self) -> bool:
        return bool((self.sampling_params.get("custom_params") or {}).get("return_top_p_token_ids"))


def parse_generate_request(body: Any, vocab_size: int) -> GenerateRequest:
    if not isinstance(body, dict):
        raise BadRequest("body", "must be a JSON object")
    if body.get("stream"):
        raise BadRequest("stream", "streaming is not supported, send stream=false")
    input_ids = body.get("input_ids")
    if not isinstance(input_ids, list) or not input_ids:
        raise BadRequest("input_ids", "must be a non-empty list of token ids")
    for index, token in enumerate(input_ids):
        if type(token) is not int or not 0 <= token < vocab_size:
            raise BadRequest("input_ids", f"input_ids[{index}] = {token!r} is not a token id in [0, {vocab_size})")
    sampling = body.get("sampling_params") or {}
    if not isinstance(sampling, dict):
        raise BadRequest("sampling_params", "must be an object")
    max_new_tokens = sampling.get("max_new_tokens")
    if max_new_tokens is None:
        max_new_tokens = DEFAULT_MAX_NEW_TOKENS
    if type(max_new_tokens) is not int or max_new_tokens < 1:
        raise BadRequest("sampling_params.max_new_tokens", "must be a positive integer")
    rid = body.get("rid") or uuid.uuid4().hex
    if not isinstance(rid, str):
        raise BadRequest("rid", "must be a string")
    _check_sampling(sampling)  # temperature, top_p and top_k are checked and recorded, never applied
    stop = sampling.get("stop")
    stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
    no_stop_trim = bool(sampling.get("no_stop_trim") or False)
    return GenerateRequest(
        input_ids,
        max_new_tokens,
        rid,
        bool(body.get("return_logprob", False)),
        stops,
        no_stop_trim,
        dict(sampling),
        bool(body.get("return_routed_experts")),
    )


def _check_sampling(sampling: dict[str, Any]) -> None:
    """sglang's ``SamplingParams.verify`` for the keys the adapter sends (null: the default)."""
    for key, valid, expected in (
        ("temperature", lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0"),
        ("top_p", lambda v: 0 < v <= 1, "a number in (0, 1]"),
    ):
        value = sampling.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not valid(value)):
            raise BadRequest(f"sampling_params.{key}", f"must be {expected}, got {value!r}")
    top_k = sampling.get("top_k")
    if top_k is not None and (type(top_k) is not int or not (top_k == -1 or top_k >= 1)):
        raise BadRequest("sampling_params.top_k", f"must be -1 (disable) or at least 1, got {top_k!r}")
    stop = sampling.get("stop")
    if (
        stop is not None
        and not isinstance(stop, str)
        and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise BadRequest("sampling_params.stop", "must be a string or a list of strings")


@dataclass(frozen=True)
class Completion:
    """What one ``/generate`` call produced; ``text`` decodes the in-vocabulary ``output_ids``."""

    output_ids: list[int]
    logprobs: list[float]
    versions: list[str]
    finish_reason: dict[str, Any]
    text: str = ""
    retractions: int = 0
    spans: tuple[dict[str, Any], ...] = ()

    def response(
        self, generate: GenerateRequest, latency: float, vocab_size: int = 0, moe: MoEShape | None = None
    ) -> dict[str, Any]:
        meta_info: dict[str, Any] = {
            "id": generate.rid,
            "finish_reason": self.finish_reason,
            "prompt_tokens": len(generate.input_ids),
            "completion_tokens": len(self.output_ids),
            "cached_tokens": 0,
            "num_retractions": self.retractions,
            "weight_version": self.spans[-1]["version"],
            "weight_versions": list(self.spans),
            "e2e_latency": latency,
        }
        if generate.return_logprob:
            meta_info["output_token_logprobs"] = [
                [logprob, token, None] for logprob, token in zip(self.logprobs, self.output_ids, strict=False)
            ]
        # Replay data as SGLang returns it when asked (``replay_data`` says what it is), base64 int32: offsets one
        # per output token + 1; routed experts ``moe.layers x moe.top_k`` per position of input + output but the last.
        if generate.top_p_token_ids:
            start = len(generate.input_ids)
            nuclei = [nucleus(token, start + i, vocab_size) for i, token in enumerate(self.output_ids)]
            meta_info["top_p_token_ids"] = _base64_int32([t for kept in nuclei for t in kept])
            meta_info["top_p_token_offsets"] = _base64_int32(
                np.concatenate([[0], np.cumsum([len(kept) for kept in nuclei])])
            )
        if generate.return_routed_experts and moe is not None:
            meta_info["routed_experts"] = _base64_int32(routing([*generate.input_ids, *self.output_ids], moe).ravel())
        return {"text": self.text, "output_ids": self.output_ids, "meta_info": meta_info}


@dataclass(frozen=True)
class Plan:
    """What one answer will be: the decoded prompt the policy scripted it from, the ids to sample, how it ends."""

    prompt: str
    ids: list[int]
    finish_reason: dict[str, Any]


ERRORED = Completion([], [], [], {"type": "error", "message": "scripted policy error"})


def _base64_int32(values: Any) -> str:
    return base64.b64encode(np.asarray(values, dtype="<i4").tobytes()).decode("ascii")


def bad_request(error: BadRequest) -> web.Response:
    return web.json_response({"error": str(error), "field": error.field}, status=400)


async def json_body(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest("body", f"not valid JSON ({exc})") from exc


async def control_body(request: web.Request, fields: dict[str, tuple[type, Any]]) -> dict[str, Any]:
    """A control request's known fields, each ``(type, default)``; a missing body is ``{}``, unknown fields are ignored.

    A default of ``...`` makes the field required; ``None`` allows null.
    """
    body = await json_body(request) if await request.read() else {}
    if not isinstance(body, dict):
        raise BadRequest("body", "must be a JSON object")
    values = {}
    for name, (kind, default) in fields.items():
        value = body.get(name, default)
        if value is ...:
            raise BadRequest(name, "is required")
        if not (value is None and default is None) and type(value) is not kind:
            raise BadRequest(name, f"must be a {kind.__name__}")
        values[name] = value
    return values


class ScriptedPolicyServer:
    """See the module docstring for the HTTP contract and the pacing. ``delay_s`` spreads a ``slow`` answer over
    that time; ``turn_delay`` (when set) spreads every other policy's answer over the seconds it gives, else
    ``token_delay_s`` paces their tokens, one per that many seconds (0: as fast as it can). All three may be
    replaced between requests."""

    def __init__(
        self,
        renderer: PromptRenderer,
        default_policy: str = "oracle",
        oracle_tasks: Sequence[OracleTask] = (),
        delay_s: float = 2.0,
        weight_version: str = "default",
        token_delay_s: float = 0.0,
        turn_delay: TurnDelay | None = None,
        moe: MoEShape = DEFAULT_MOE,
        oracle_explore_turns: int = 0,
    ):
        self.renderer = renderer
        self.default_policy = self._known(default_policy)
        self.delay_s = delay_s
        self.token_delay_s = token_delay_s
        self.turn_delay = turn_delay
        self.moe = moe
        self.control = GenerationControl(weight_version)
        self._assistant_header = renderer.encode(f"{ASSISTANT_TURN}\n")
        self.model_path = f"scripted-{self.default_policy}"
        self.load_format = "auto"
        self.records: list[SampledRecord] = []
        self.aborts: list[AbortRecord] = []
        self._overrides: dict[str, str] = {}
        self._inflight: set[str] = set()
        self._runner: web.AppRunner | None = None
        oracle = OraclePolicy(oracle_tasks, oracle_explore_turns)
        self._completions: dict[str, Callable[[str, int], str]] = {
            "oracle": oracle,
            "slow": oracle,
            "noop": noop_completion,
            "malformed": malformed_completion,
            "length": length_completion,
            "drift": drift_completion,
            "repair": RepairCompletion(load_corpus),
            "self_play": SelfPlayCompletion(load_corpus),
        }

    @staticmethod
    def _known(policy: str) -> str:
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(POLICIES)}")
        return policy

    def set_policy(self, routing_key: str | None, policy: str) -> None:
        """Use ``policy`` for requests carrying ``routing_key``; ``None`` sets the server default."""
        if routing_key is None:
            self.default_policy = self._known(policy)
        else:
            self._overrides[routing_key] = self._known(policy)

    def policy_for(self, routing_key: str | None) -> str:
        return self._overrides.get(routing_key, self.default_policy) if routing_key else self.default_policy

    def records_for(self, routing_key: str | None) -> list[SampledRecord]:
        return [record for record in self.records if record.routing_key == routing_key]

    @property
    def in_flight(self) -> list[str]:
        """The request ids of the ``/generate`` calls not yet answered, running or waiting for admission."""
        return list(self._inflight)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/generate", self._generate)
        app.router.add_post("/abort_request", self._abort_request)
        app.router.add_get("/health", self._health)
        app.router.add_get("/health_generate", self._health)
        app.router.add_get("/get_model_info", self._model_info)
        app.router.add_get("/model_info", self._model_info)
        app.router.add_post("/pause_generation", self._pause_generation)
        app.router.add_post("/continue_generation", self._continue_generation)
        app.router.add_post("/update_weights_from_disk", self._update_weights_from_disk)
        app.router.add_post("/update_weight_version", self._update_weight_version)
        app.router.add_post("/scripted/policy", self._set_policy)
        app.router.add_get("/scripted/records", self._records)
        app.router.add_get("/scripted/aborts", self._aborts)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve on ``host:port`` (0 picks a free port) and return the base URL."""
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        bound_host, bound_port = self._runner.addresses[0][:2]
        return f"http://{bound_host}:{bound_port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _generate(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        routing_key = request.headers.get(ROUTING_KEY_HEADER)
        try:
            generate = parse_generate_request(await json_body(request), self.renderer.vocab_size)
            if generate.rid in self._inflight:
                raise BadRequest("rid", f"{generate.rid!r} is already in flight")
        except BadRequest as error:
            return bad_request(error)
        policy = self.policy_for(routing_key)
        generation = Generation(generate.rid)
        self._inflight.add(generate.rid)
        try:
            await self.control.admit(generation)
            try:
                completion = await self._answer(policy, generate, generation, routing_key)
            finally:
                self.control.release(generation)
        except BadRequest as error:
            return bad_request(error)
        finally:
            self._inflight.discard(generate.rid)
        # Aborted and ``error`` answers are recorded too; a rejected (400) request never gets here.
        self._record(generate, routing_key, policy, completion)
        if completion is ERRORED:
            return web.json_response({"error": "scripted policy error (policy 'error')"}, status=500)
        answer = await asyncio.to_thread(
            completion.response, generate, time.monotonic() - started, self.renderer.vocab_size, self.moe
        )
        return web.json_response(answer)

    async def _answer(
        self, policy: str, generate: GenerateRequest, generation: Generation, routing_key: str | None
    ) -> Completion:
        """Sample the scripted answer one engine step per token, each followed by its pause (``_step_s``)."""
        if policy == "error":
            return ERRORED
        plan = await asyncio.to_thread(self._plan, policy, generate)
        finish_reason = plan.finish_reason
        paced_by: TurnDelay | None = None
        turn_s: float | None = None
        for position, token in enumerate(plan.ids):
            if not await self.control.next_step(generation):
                finish_reason = abort_finish_reason()
                break
            generation.sample(token, token_logprob(generate.rid, position), self.control.version)
            # ``turn_delay`` is called once per answer, when it starts, and again when a test replaces it mid-answer.
            if position == 0 or self.turn_delay is not paced_by:
                paced_by = self.turn_delay
                turn_s = paced_by(plan.prompt, routing_key) if policy != "slow" and paced_by is not None else None
            if step_s := self._step_s(policy, turn_s, len(plan.ids)):
                await self.control.pace(step_s)
        # text == decode(output_ids) with special tokens kept (in-vocabulary ids only: ``garbage``); only a matched
        # stop string is trimmed, never the end-of-turn id, whatever ``no_stop_trim`` says.
        in_vocabulary = [token for token in generation.output_ids if 0 <= token < self.renderer.vocab_size]
        text = trim_matched_stop(
            await asyncio.to_thread(self.renderer.decode, in_vocabulary), finish_reason, generate.no_stop_trim
        )
        spans = weight_version_spans(generation.versions, self.control.version)
        return Completion(
            generation.output_ids,
            generation.logprobs,
            generation.versions,
            finish_reason,
            text,
            generation.retractions,
            tuple(spans),
        )

    def _step_s(self, policy: str, turn_s: float | None, tokens: int) -> float:
        """The pause after each of ``tokens`` sampled tokens: ``slow`` over ``delay_s``, else over the answer's turn
        delay ``turn_s``, else ``token_delay_s``; read at every step, so a test may change ``delay_s`` mid-answer."""
        if policy == "slow":
            return self.delay_s / tokens
        if turn_s is not None:
            return turn_s / tokens
        return self.token_delay_s

    def _plan(self, policy: str, generate: GenerateRequest) -> Plan:
        """Run in a worker thread: decode the prompt, script the answer, encode it, cut it to the budget.

        Like a language model, it continues an answer already begun: a prompt whose last assistant turn
        holds tokens (a client resubmitting an aborted generation's prompt + output) gets the rest of the
        answer scripted for the prompt without them. Tokens that do not begin that answer are refused
        (``input_ids``), so a client that resubmits the wrong tokens fails loudly instead of being
        answered with a second, garbled answer.
        """
        end_id = self.renderer.end_of_turn_id
        prompt_ids, begun = self._split_begun_answer(generate.input_ids)
        prompt, scripted = self._scripted_ids(policy, prompt_ids, generate.max_new_tokens + len(begun))
        planned = scripted + [end_id]
        if planned[: len(begun)] != begun:
            raise BadRequest(
                "input_ids", f"the {len(begun)} tokens after the last assistant header do not begin the scripted answer"
            )
        if not generate.stop or policy == "garbage":
            return Plan(prompt, *finish(planned[len(begun) :], generate.max_new_tokens, end_id))
        # As in sglang, only the request's own output is searched: a resubmitted begun answer is prompt.
        tail_tokens = max(len(self.renderer.encode(stop)) for stop in generate.stop) + 1
        ids, finish_reason = finish_at_stops(
            planned[len(begun) :], generate.max_new_tokens, end_id, generate.stop, self.renderer.decode, tail_tokens
        )
        return Plan(prompt, ids, finish_reason)

    def _split_begun_answer(self, input_ids: list[int]) -> tuple[list[int], list[int]]:
        """``(prompt up to the last assistant header, the tokens after it)``."""
        marker = self._assistant_header
        for start in range(len(input_ids) - len(marker), -1, -1):
            if input_ids[start : start + len(marker)] == marker:
                cut = start + len(marker)
                return input_ids[:cut], input_ids[cut:]
        return input_ids, []

    def _scripted_ids(self, policy: str, input_ids: list[int], max_new_tokens: int) -> tuple[str, list[int]]:
        """``(the decoded prompt, the answer's ids)``; the prompt is decoded once, here."""
        prompt = self.renderer.decode(input_ids)
        if policy == "garbage":
            return prompt, [-1, self.renderer.vocab_size + 7]
        return prompt, self.renderer.encode(self._completions[policy](prompt, max_new_tokens))

    def _record(self, generate: GenerateRequest, routing_key: str | None, policy: str, completion: Completion) -> None:
        self.records.append(
            SampledRecord(
                rid=generate.rid,
                routing_key=routing_key,
                input_ids=generate.input_ids,
                output_ids=completion.output_ids,
                output_logprobs=completion.logprobs,
                output_versions=completion.versions,
                finish_reason=completion.finish_reason,
                policy=policy,
                sampling_params=generate.sampling_params,
            )
        )

    async def _abort_request(self, request: web.Request) -> web.Response:
        try:
            body = await control_body(request, {"rid": (str, None), "abort_all": (bool, False)})
        except BadRequest as error:
            return bad_request(error)
        self.aborts.append(
            AbortRecord(rid=body["rid"], abort_all=body["abort_all"], in_flight=body["rid"] in self._inflight)
        )
        if body["abort_all"]:
            self.control.abort(abort_all=True)
        elif body["rid"] in self._inflight:
            self.control.abort(body["rid"])
        return web.Response()

    async def _pause_generation(self, request: web.Request) -> web.Response:
        try:
            mode = (await control_body(request, {"mode": (str, "abort")}))["mode"]
            if mode not in PAUSE_MODES:
                raise BadRequest("mode", f"must be one of {', '.join(PAUSE_MODES)}")
        except BadRequest as error:
            return bad_request(error)
        await self.control.pause(mode)
        return web.json_response({"message": "Generation paused successfully.", "status": "ok"})

    async def _continue_generation(self, request: web.Request) -> web.Response:
        try:
            await control_body(request, {"torch_empty_cache": (bool, True)})
        except BadRequest as error:
            return bad_request(error)
        self.control.resume()
        return web.json_response({"message": "Generation continued successfully.", "status": "ok"})

    async def _update_weights_from_disk(self, request: web.Request) -> web.Response:
        fields = {
            "model_path": (str, ...),
            "load_format": (str, None),
            "abort_all_requests": (bool, False),
            "weight_version": (str, None),
            "flush_cache": (bool, True),
        }
        try:
            body = await control_body(request, fields)
        except BadRequest as error:
            return bad_request(error)
        if body["abort_all_requests"]:
            self.control.abort(abort_all=True)
        if not await self.control.update_weights(body["weight_version"], body["flush_cache"]):
            return web.json_response({"success": False, "message": FLUSH_REFUSED, "num_paused_requests": 0}, status=400)
        self.model_path = body["model_path"]
        self.load_format = body["load_format"] or self.load_format
        message = "Succeeded to update model weights."
        if body["weight_version"] is not None:
            message += f" Weight version updated to {body['weight_version']}."
        return web.json_response({"success": True, "message": message, "num_paused_requests": 0})

    async def _update_weight_version(self, request: web.Request) -> web.Response:
        try:
            body = await control_body(request, {"new_version": (str, ...), "abort_all_requests": (bool, True)})
        except BadRequest as error:
            return bad_request(error)
        if body["abort_all_requests"]:
            self.control.abort(abort_all=True)
        self.control.set_version(body["new_version"])
        version = body["new_version"]
        return web.json_response(
            {"success": True, "message": f"Weight version updated to {version}", "new_version": version}
        )

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def _model_info(self, request: web.Request) -> web.Response:
        """sglang's ``/model_info`` fields, as a text-only model without parsers configured reports them."""
        return web.json_response(
            {
                "model_path": self.model_path,
                "served_model_name": self.model_path,
                "tokenizer_path": self.renderer.tokenizer.name_or_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": self.control.reported_version,
                "load_format": self.load_format,
                "reasoning_parser": None,
                "tool_call_parser": None,
                "disaggregation_mode": "null",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": None,
                "architectures": None,
            }
        )

    async def _set_policy(self, request: web.Request) -> web.Response:
        try:
            body = await json_body(request)
            if not isinstance(body, dict):
                raise BadRequest("body", "must be a JSON object")
            routing_key, policy = body.get("routing_key"), body.get("policy")
            if routing_key is not None and not isinstance(routing_key, str):
                raise BadRequest("routing_key", "must be a string or null")
            if policy not in POLICIES:
                raise BadRequest("policy", f"must be one of {', '.join(POLICIES)}")
        except BadRequest as error:
            return bad_request(error)
        self.set_policy(routing_key, policy)
        return web.json_response({"routing_key": routing_key, "policy": policy})

    async def _aborts(self, request: web.Request) -> web.Response:
        return web.json_response([record.model_dump() for record in self.aborts])

    async def _records(self, request: web.Request) -> web.Response:
        routing_key = request.query.get("routing_key")
        records = self.records if routing_key is None else self.records_for(routing_key)
        return web.json_response([record.model_dump() for record in records])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m durable_rollouts.scripted_policy.server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port_arg, default=30000)
    parser.add_argument("--policy", choices=POLICIES, default="oracle", help="the server-wide default policy")
    parser.add_argument(
        "--oracle-tasks",
        type=existing_path_arg,
        help="dataset JSONL (or directory of Harbor tasks) whose reference patches the oracle knows",
    )
    parser.add_argument(
        "--dataset-root", help="where --oracle-tasks rows' script paths resolve (default: ROLLOUT_DATASET_ROOT)"
    )
    parser.add_argument(
        "--tokenizer", type=existing_path_arg, help=f"HF tokenizer directory (default: {DEFAULT_TOKENIZER_DIR})"
    )
    parser.add_argument(
        "--delay", type=number_arg(0), default=2.0, help="seconds the 'slow' policy spreads its tokens over"
    )
    parser.add_argument(
        "--weight-version", default="default", help="the weight version served at start (sglang's default)"
    )
    parser.add_argument(
        "--oracle-explore-turns",
        type=count_arg(0),
        default=0,
        help="read-only Bash turns the oracle takes before its patch (long rollouts)",
    )
    parser.add_argument(
        "--lognormal-turn-delay",
        type=parse_lognormal,
        metavar="MEDIAN,SIGMA[,SEED]",
        help="spread every non-slow answer over one log-normal draw per session (routing key): median seconds, sigma, "
        "seed (0)",
    )
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    tokenizer_dir = args.tokenizer or await asyncio.to_thread(ensure_qwen_tokenizer)
    renderer = await asyncio.to_thread(PromptRenderer.from_folder, tokenizer_dir)
    tasks = await asyncio.to_thread(oracle_tasks_from, args.oracle_tasks, args.dataset_root)
    server = ScriptedPolicyServer(
        renderer,
        args.policy,
        tasks,
        args.delay,
        args.weight_version,
        turn_delay=args.lognormal_turn_delay,
        oracle_explore_turns=args.oracle_explore_turns,
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    url = await server.start(args.host, args.port)
    print(f"scripted policy server ({args.policy}, {len(tasks)} oracle tasks) at {url}", flush=True)
    try:
        await stopping.wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    asyncio.run(serve(parse_args()))
