"""Client for SGLang's native ``/generate`` endpoint (token ids in, token ids out).

The request carries ``input_ids`` (never text), ``return_logprob`` and a request id; ``X-SMG-Routing-Key`` keeps
a session on one server for prefix-cache affinity behind a router. A call that is cancelled, times out or loses
its connection aborts the upstream request (best effort), so it stops burning GPU time. Each sampled token's
weight version comes from the reply (sglang 0.5.23): ``meta_info.weight_versions`` spans when present, else
``meta_info.weight_version`` for every token, else none. Replay data (``durable_rollouts.policy.replay_capture``)
is asked for and read when the caller wants it (docs/slime.md, *Top-p replay and routing replay*).

Invariant: every reply is validated or rejected as garbage: ids are in-vocabulary integers with one finite
log-prob each; spans ``{"version", "start", "end"}`` are half-open, in order and within the output, with string
versions (output tokens no span covers have no version); replay data asked for is there and fits its tokens.
"""

from __future__ import annotations

import asyncio
import json
import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard

import aiohttp

from durable_rollouts.contracts.weight_versions import VersionSpan
from durable_rollouts.policy.replay_capture import ReplayDataError, RoutedRows, TopPSpans


def as_json_list(value: Any) -> list:
    """JSON encoding for the ``array`` buffers token ids travel in."""
    if isinstance(value, array):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


class PolicyServerError(RuntimeError):
    """The policy server failed or was unreachable; the client may retry the turn. ``status``: the HTTP status
    it answered with, None when it did not answer."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class PolicyOutputError(PolicyServerError):
    """The policy server answered with something that is not a valid sample."""


class GenerationAborted(PolicyServerError):
    """The server ended the request with ``finish_reason.type == "abort"`` (a pause in ``abort`` mode, a weight
    update that aborts running requests, an ``/abort_request`` for its rid); ``partial`` is what it sampled before."""

    def __init__(self, message: str, partial: Generation):
        super().__init__(message)
        self.partial = partial


@dataclass(frozen=True)
class Generation:
    """``weight_versions``: ``(start, end, version)`` over ``output_ids``, half-open, ordered, non-empty,
    adjacent spans of one version merged; output tokens outside every span have no version.
    ``stop_sequence``: the string of a ``{"type": "stop", "matched": <str>}`` finish (SGLang's stop strings; also
    its ``"NaN happened"`` sentinel, so a caller honours it only if it asked for that string), else None."""

    output_ids: list[int]
    log_probs: list[float]
    finish_reason: str
    weight_versions: list[VersionSpan] = field(default_factory=list)
    stop_sequence: str | None = None
    top_p: TopPSpans | None = None
    routed: RoutedRows | None = None


class Generates(Protocol):
    """What a caller of ``/generate`` needs: ``SGLangClient`` or a wrapper around it."""

    async def generate(
        self,
        base_url: str,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        rid: str,
        routing_key: str,
        routed_width: int | None = None,
    ) -> Generation: ...


class SGLangClient:
    """SGLang's protocol; ``VLLMClient`` overrides only the protocol's parts (paths, request body, reply reader,
    refusals, abort body), so both share the transport: aborting upstream on cancellation or failure, timeouts,
    parsing off the event loop."""

    engine = "sglang"
    generate_path = "/generate"
    version_path = "/get_model_info"

    def __init__(self, http: aiohttp.ClientSession, vocab_size: int, request_timeout_s: float = 900.0):
        self._http = http
        self._vocab_size = vocab_size
        self._timeout = aiohttp.ClientTimeout(total=request_timeout_s, sock_connect=10)

    async def generate(
        self,
        base_url: str,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        rid: str,
        routing_key: str,
        routed_width: int | None = None,
    ) -> Generation:
        payload = self.request_body(input_ids, sampling_params, rid, routed_width)
        data = await asyncio.to_thread(json.dumps, payload, default=as_json_list)
        headers = {"X-SMG-Routing-Key": routing_key, "Content-Type": "application/json"}
        try:
            async with self._http.post(
                f"{base_url}{self.generate_path}", data=data, headers=headers, timeout=self._timeout
            ) as response:
                if response.status != 200:
                    detail = (await response.text())[:300]
                    raise PolicyServerError(self.refusal(base_url, response.status, detail), status=response.status)
                body = await asyncio.to_thread(json.loads, await response.read())
        except asyncio.CancelledError:
            await asyncio.shield(self.abort(base_url, rid))
            raise
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            await asyncio.shield(self.abort(base_url, rid))
            raise PolicyServerError(
                f"policy server at {base_url} unreachable or invalid: {type(exc).__name__}: {exc}"
            ) from exc
        top_p = bool((sampling_params.get("custom_params") or {}).get("return_top_p_token_ids"))
        return await asyncio.to_thread(self.parse, body, self._vocab_size, len(input_ids), top_p, routed_width)

    def request_body(
        self, input_ids: Sequence[int], sampling_params: dict[str, Any], rid: str, routed_width: int | None
    ) -> dict[str, Any]:
        return {
            "input_ids": input_ids,
            "sampling_params": sampling_params,
            "return_logprob": True,
            "logprob_start_len": len(input_ids),
            "rid": rid,
            "stream": False,
            **({"return_routed_experts": True} if routed_width else {}),
        }

    @staticmethod
    def parse(body: Any, vocab_size: int, input_length: int, top_p: bool, routed_width: int | None) -> Generation:
        return parse_generation(body, vocab_size, input_length, top_p, routed_width)

    def refusal(self, base_url: str, status: int, detail: str) -> str:
        """The one line a non-200 answer becomes (a 404 names the other engine)."""
        if status == 404:
            return (
                f"the policy at {base_url} does not speak sglang's protocol: POST /generate answered 404 "
                "(a vLLM server answers /inference/v1/generate: choose engine 'vllm' for it)"
            )
        return f"policy server answered HTTP {status}: {detail}"

    async def current_weight_version(self, base_url: str) -> str:
        """The version the server serves now (``weight_version`` of ``GET version_path``)."""
        path = self.version_path
        try:
            async with self._http.get(f"{base_url}{path}", timeout=aiohttp.ClientTimeout(total=30)) as response:
                if response.status != 200:
                    raise PolicyServerError(f"policy server answered HTTP {response.status} to {path}")
                info = await response.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            raise PolicyServerError(
                f"policy server at {base_url} unreachable for {path}: {type(exc).__name__}: {exc}"
            ) from exc
        version = info.get("weight_version") if isinstance(info, dict) else None
        if not isinstance(version, str):
            raise PolicyOutputError(f"{path} at {base_url} has no string weight_version: {version!r}")
        return version

    def abort_request(self, rid: str) -> tuple[str, dict[str, Any]]:
        """The path and body that abort the request the caller named ``rid``."""
        return "/abort_request", {"rid": rid}

    async def abort(self, base_url: str, rid: str) -> None:
        path, body = self.abort_request(rid)
        try:
            async with self._http.post(
                f"{base_url}{path}", json=body, timeout=aiohttp.ClientTimeout(total=5)
            ) as response:
                await response.read()
        except (TimeoutError, aiohttp.ClientError):
            pass


def parse_generation(
    body: Any, vocab_size: int, input_length: int = 0, top_p: bool = False, routed_width: int | None = None
) -> Generation:
    """A ``/generate`` reply as a ``Generation``; ``PolicyOutputError`` if it is not a valid sample,
    ``GenerationAborted`` (carrying the tokens sampled before the abort) if the server aborted it.
    ``top_p`` / ``routed_width``: the replay data asked for (``input_length``: the request's ids)."""
    meta = body.get("meta_info") if isinstance(body, dict) else None
    if not isinstance(meta, dict):
        raise PolicyOutputError("policy reply has no meta_info")
    triples = meta.get("output_token_logprobs")
    if not isinstance(triples, list):
        raise PolicyOutputError("meta_info.output_token_logprobs missing: was return_logprob honoured?")
    for position, triple in enumerate(triples):
        if not isinstance(triple, (list, tuple)) or len(triple) < 2:
            raise PolicyOutputError(f"output_token_logprobs[{position}] is not a [logprob, id, …] triple")
    ids, log_probs = checked_tokens([(triple[0], triple[1]) for triple in triples], vocab_size, "output_token_logprobs")
    declared = body.get("output_ids")
    if declared is not None and declared != ids:
        raise PolicyOutputError("output_ids disagree with output_token_logprobs")
    finish = meta.get("finish_reason") or {}
    kind = finish.get("type") if isinstance(finish, dict) else str(finish)
    generation = Generation(
        output_ids=ids,
        log_probs=log_probs,
        finish_reason={"length": "length", "abort": "abort"}.get(kind or "", "stop"),
        weight_versions=_weight_versions(meta, len(ids)),
        stop_sequence=_matched_string(finish) if kind == "stop" else None,
        **replay_data(meta, len(ids), input_length, top_p, routed_width),
    )
    if kind == "abort":
        message = finish.get("message", "") if isinstance(finish, dict) else ""
        raise GenerationAborted(f"policy server aborted the request after {len(ids)} tokens: {message}", generation)
    return generation


def checked_tokens(pairs: Sequence[tuple[Any, Any]], vocab_size: int, field: str) -> tuple[list[int], list[float]]:
    """The ids and log-probs of ``(log-prob, id)`` pairs; ``PolicyOutputError`` naming ``field[position]`` for an id
    outside the vocabulary or a log-prob that is not a finite number <= 0."""
    ids: list[int] = []
    log_probs: list[float] = []
    for position, (log_prob, token) in enumerate(pairs):
        if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < vocab_size:
            raise PolicyOutputError(f"{field}[{position}]: token id {token!r} outside the vocabulary")
        if not isinstance(log_prob, (int, float)) or not math.isfinite(log_prob) or log_prob > 1e-6:
            raise PolicyOutputError(f"{field}[{position}]: invalid log-prob {log_prob!r}")
        ids.append(token)
        log_probs.append(float(log_prob))
    return ids, log_probs


def replay_data(
    meta: dict[str, Any], n_tokens: int, input_length: int, top_p: bool, routed_width: int | None
) -> dict[str, Any]:
    """The ``Generation`` fields of the replay data asked for, read from SGLang-shaped ``meta``."""
    try:
        return {
            "top_p": TopPSpans.from_meta(meta, n_tokens) if top_p else None,
            "routed": RoutedRows.from_meta(meta, input_length + n_tokens, routed_width) if routed_width else None,
        }
    except ReplayDataError as error:
        raise PolicyOutputError(str(error)) from None


def _weight_versions(meta: dict[str, Any], n_tokens: int) -> list[VersionSpan]:
    spans = meta.get("weight_versions")
    if spans is None:
        version = meta.get("weight_version")
        if version is None or n_tokens == 0:
            return []
        if not isinstance(version, str):
            raise PolicyOutputError(f"meta_info.weight_version {version!r} is not a string")
        return [(0, n_tokens, version)]
    return version_spans(spans, n_tokens, "meta_info.weight_versions")


def version_spans(spans: Any, n_tokens: int, field: str) -> list[VersionSpan]:
    """``{"version", "start", "end"}`` spans over ``n_tokens`` output tokens, checked and merged (``Generation``);
    None: no versions."""
    if spans is None:
        return []
    if not isinstance(spans, list):
        raise PolicyOutputError(f"{field} is not a list of spans")
    out: list[VersionSpan] = []
    cursor = 0
    for position, span in enumerate(spans):
        start, end, version = (
            (span.get("start"), span.get("end"), span.get("version")) if isinstance(span, dict) else (None, None, None)
        )
        if not (_is_int(start) and _is_int(end) and isinstance(version, str)):
            raise PolicyOutputError(f"{field}[{position}] is not a {{version, start, end}} span: {span!r}")
        if not cursor <= start <= end <= n_tokens:
            raise PolicyOutputError(
                f"{field}[{position}] [{start}, {end}) overlaps, runs backwards or passes {n_tokens} output tokens"
            )
        cursor = end
        if start == end:
            continue
        if out and out[-1][1] == start and out[-1][2] == version:
            out[-1] = (out[-1][0], end, version)
        else:
            out.append((start, end, version))
    return out


def _matched_string(finish: Any) -> str | None:
    matched = finish.get("matched") if isinstance(finish, dict) else None
    return matched if isinstance(matched, str) else None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
