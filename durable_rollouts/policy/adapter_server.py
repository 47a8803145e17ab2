"""The Anthropic-compatible adapter: Claude Code talks to it, it talks token ids to the policy.

Routes: ``POST /v1/messages`` (SSE or JSON), ``POST /v1/messages/count_tokens``, ``GET /healthz``. A request's
bearer token (``Authorization: Bearer`` or ``x-api-key``) is ``<session id>.<secret>``, minted per rollout
attempt by ``open_session``; the secret is compared in constant time, and no answer reveals another session's
state (a wrong secret gets 401 whether or not its session existed; only a finished session's own secret gets 409).

Invariants:

* Every turn is recorded in the session's ``TokenLedger`` before its reply is written, so ``finish_session``
  returns exactly what the client was shown (a reply lost to a disconnect is rolled back when the client
  retries the same request).
* A bad request, a disconnect (which aborts the upstream request) or a dead policy server ends that request
  only, with an Anthropic-shaped error (an SSE ``error`` event once a stream began); the adapter keeps serving
  every other session, and no session can starve the others (docs/adapter.md, *Fair to every sandbox*).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from aiohttp import web

from durable_rollouts.contracts.session import FINISH_GRACE_S
from durable_rollouts.contracts.tokens import SegmentKind
from durable_rollouts.policy.anthropic_reply import (
    SSE_KEEPALIVE,
    error_body,
    message_body,
    new_message_id,
    reply_blocks,
    sse_blocks_and_stop,
    sse_error,
    sse_message_start,
)
from durable_rollouts.policy.anthropic_translation import ChatRequest, RequestError, translate_request
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.host_metrics import HostMetrics
from durable_rollouts.policy.parsers import ParsedCompletion
from durable_rollouts.policy.policy_clients import policy_clients
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.sampling import client_sampling
from durable_rollouts.policy.session import PolicySession, SessionFinished, SessionLimitExceeded
from durable_rollouts.policy.session_registry import ClosedSession, SessionRegistry, UnknownSession
from durable_rollouts.policy.session_spool import SessionSpool
from durable_rollouts.policy.sglang_client import PolicyServerError

log = logging.getLogger(__name__)

COMPACTION_BETA = "fallback-credit-2026-06-01"
COMPACTION_PROMPT = "Your task is to create a detailed summary of the conversation so far"
CONTINUATION_PROMPT = "This session is being continued from a previous conversation"
SUBAGENT_HEADER = "x-claude-code-agent-id"
MESSAGES_PATH = "/v1/messages"
COUNT_TOKENS_PATH = "/v1/messages/count_tokens"
MAX_BODY_BYTES = 16 * 1024 * 1024
COUNT_TOKENS_MAX_BODY_BYTES = 2 * 1024 * 1024
KEEPALIVE_INTERVAL_S = 5.0  # while the policy works, a streamed reply carries an SSE keep-alive comment this often
GIL_SWITCH_INTERVAL_S = 0.001


REGISTRY = web.AppKey("registry", SessionRegistry)
BODY_CAPS = web.AppKey("body_caps", dict)
KEEPALIVE = web.AppKey("keepalive_s", float)
# Counts every answered turn (its latency, from parsed body to reply, and its sampled tokens) and policy-server failure.
METRICS = web.AppKey("metrics", HostMetrics)


def lane_of(headers: Any) -> str:
    """The lane (main, or one sub-agent) a Claude Code request belongs to; headers only, so known before the body."""
    agent_id = headers.get(SUBAGENT_HEADER)
    return f"agent:{agent_id}" if agent_id else "main"


def classify_turn(headers: Any, body: dict[str, Any], chat: ChatRequest) -> tuple[str, SegmentKind]:
    """Which lane (main or a sub-agent) a Claude Code request belongs to, and its segment kind."""
    lane = lane_of(headers)
    betas = headers.get("anthropic-beta", "")
    last_user = next((m["content"] for m in reversed(chat.messages) if m["role"] == "user"), "")
    if COMPACTION_BETA in betas.split(",") or COMPACTION_PROMPT in last_user:
        return lane, "compaction"
    if lane != "main":
        return lane, "subagent"
    first_user = next((m["content"] for m in chat.messages if m["role"] == "user"), "")
    if CONTINUATION_PROMPT in first_user:
        return lane, "continuation"
    return lane, "main"


def _bearer(request: web.Request) -> str:
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("x-api-key", "").strip()


def _error(status: int, error_type: str, message: str) -> web.Response:
    return web.json_response(error_body(error_type, message), status=status)


def _authenticated(request: web.Request) -> PolicySession:
    registry: SessionRegistry = request.app[REGISTRY]
    try:
        return registry.authenticate(_bearer(request))
    except ClosedSession:
        raise _HTTPFailure(
            409, "invalid_request_error", "this session has finished; it accepts no more turns"
        ) from None
    except UnknownSession:
        raise _HTTPFailure(401, "authentication_error", "unknown session token") from None


@contextmanager
def _admitted(session: PolicySession) -> Iterator[None]:
    """The session's in-flight cap, checked before anything of the body is read: past it, a 429 at once."""
    try:
        with session.admitted():
            yield
    except SessionLimitExceeded as exc:
        raise _HTTPFailure(429, "rate_limit_error", str(exc)) from exc


def _body_cap(request: web.Request) -> int:
    """This route's body cap; a declared ``Content-Length`` past it is refused before any byte is read."""
    cap = request.app[BODY_CAPS][request.path]
    if request.content_length is not None and request.content_length > cap:
        raise _too_large(request, cap)
    return cap


def _too_large(request: web.Request, cap: int) -> _HTTPFailure:
    return _HTTPFailure(413, "request_too_large", f"request body exceeds {cap} bytes (the cap for {request.path})")


async def _read_and_parse(request: web.Request, session: PolicySession, cap: int) -> tuple[dict[str, Any], ChatRequest]:
    """Read the body (at most ``cap`` bytes), then parse and translate it on the session's CPU turn.

    The caller holds ``session.intake``, so a session has at most one body in
    memory before it is planned or counted, however many requests it has open.
    """
    chunks, size = [], 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > cap:
            raise _too_large(request, cap)
        chunks.append(chunk)
    raw = b"".join(chunks)
    del chunks
    return await session.cpu(_parse_and_translate, raw)


def _parse_and_translate(raw: bytes) -> tuple[dict[str, Any], ChatRequest]:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _HTTPFailure(400, "invalid_request_error", f"body: not valid JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise _HTTPFailure(400, "invalid_request_error", "body: must be a JSON object")
    try:
        return body, translate_request(body)
    except RequestError as exc:
        raise _HTTPFailure(400, "invalid_request_error", str(exc)) from exc


class _HTTPFailure(Exception):
    def __init__(self, status: int, error_type: str, message: str):
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


@web.middleware
async def _anthropic_errors(request: web.Request, handler):
    try:
        return await handler(request)
    except _HTTPFailure as failure:
        return _error(failure.status, failure.error_type, failure.message)
    except web.HTTPException:
        raise
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("adapter: unexpected error on %s", request.path)
        return _error(500, "api_error", f"internal adapter error: {type(exc).__name__}")


async def handle_messages(request: web.Request) -> web.StreamResponse:
    """Admit (429), wait for the lane, then on the session's intake read, parse and plan; then generate.

    A request queued behind its lane or behind the session's intake has not
    read its body yet, so a flood of requests costs the adapter no memory for
    their bodies (they wait in the kernel's socket buffers). Such a request
    gets no SSE keep-alives while it waits (whether it streams is in its
    body); Claude Code sends one request per lane at a time, so it never waits there.
    """
    session = _authenticated(request)
    with _admitted(session):
        cap = _body_cap(request)
        lane = lane_of(request.headers)
        async with session.lane_lock(lane):
            await session.intake.acquire()
            release_intake = _ReleaseOnce(session.intake)
            try:
                body, chat = await _read_and_parse(request, session, cap)
                return await _answer_turn(request, session, lane, body, chat, release_intake)
            finally:
                release_intake()


class _ReleaseOnce:
    """Releases a held lock on the first call only: the turn (once planned) or the handler (on any exit), whichever is
    first."""

    def __init__(self, lock: asyncio.Lock):
        self._lock: asyncio.Lock | None = lock

    def __call__(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


async def _answer_turn(
    request: web.Request,
    session: PolicySession,
    lane: str,
    body: dict[str, Any],
    chat: ChatRequest,
    planned: _ReleaseOnce,
) -> web.StreamResponse:
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise _HTTPFailure(400, "invalid_request_error", "max_tokens: must be a positive integer")
    try:
        requested = client_sampling(body)
    except RequestError as exc:
        raise _HTTPFailure(400, "invalid_request_error", str(exc)) from exc
    _, kind = classify_turn(request.headers, body, chat)
    message_id = new_message_id()
    model = str(body.get("model") or session.config.model_name)

    def build_reply(parsed: ParsedCompletion, finish_reason: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        blocks = reply_blocks(parsed)
        echoed = translate_request({"messages": [{"role": "assistant", "content": blocks}]}).messages[0]
        return blocks, echoed

    started = time.monotonic()
    turn = asyncio.ensure_future(
        session.turn(lane, kind, chat.messages, chat.tools, max_tokens, build_reply, planned, requested)
    )
    stream: web.StreamResponse | None = None
    try:
        if body.get("stream"):
            keepalive_s = request.app[KEEPALIVE]
            done, _ = await asyncio.wait({turn}, timeout=keepalive_s)
            while not done:
                if stream is None:
                    stream = await _open_stream(request)
                await stream.write(SSE_KEEPALIVE)
                done, _ = await asyncio.wait({turn}, timeout=keepalive_s)
        outcome = await turn
    except asyncio.CancelledError:
        turn.cancel()
        raise
    except SessionLimitExceeded as exc:
        return await _fail(request, stream, 429, "rate_limit_error", str(exc))
    except SessionFinished as exc:
        return await _fail(request, stream, 409, "invalid_request_error", str(exc))
    except PolicyServerError as exc:
        log.warning("adapter: session %s: %s", session.session_id, exc)
        request.app[METRICS].policy_error(exc)
        return await _fail(request, stream, 529, "overloaded_error", f"policy server error: {exc}")
    request.app[METRICS].turn(time.monotonic() - started, outcome.output_tokens)
    blocks = outcome.reply
    reason, stop_sequence = outcome.stop_reason, outcome.stop_sequence
    if not body.get("stream"):
        return web.json_response(
            message_body(message_id, model, blocks, reason, outcome.prompt_tokens, outcome.output_tokens, stop_sequence)
        )
    if stream is None:
        stream = await _open_stream(request)
    await stream.write(sse_message_start(message_id, model, outcome.prompt_tokens))
    await stream.write(sse_blocks_and_stop(blocks, reason, outcome.output_tokens, stop_sequence))
    await stream.write_eof()
    return stream


async def _open_stream(request: web.Request) -> web.StreamResponse:
    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await stream.prepare(request)
    return stream


async def _fail(
    request: web.Request, stream: web.StreamResponse | None, status: int, error_type: str, message: str
) -> web.StreamResponse:
    if stream is None:
        return _error(status, error_type, message)
    await stream.write(sse_error(error_type, message))
    await stream.write_eof()
    return stream


async def handle_count_tokens(request: web.Request) -> web.Response:
    """Admit (429), then read, parse and count on the session's intake: one count per session at a time."""
    session = _authenticated(request)
    with _admitted(session):
        cap = _body_cap(request)
        async with session.intake:
            _, chat = await _read_and_parse(request, session, cap)
            counted = await session.count_tokens(chat.messages, chat.tools)
    return web.json_response({"input_tokens": counted})


async def handle_health(request: web.Request) -> web.Response:
    """Sandboxes can reach this port, so the answer says nothing about the host's sessions."""
    return web.json_response({"status": "ok"})


def create_app(
    registry: SessionRegistry,
    max_body_bytes: int = MAX_BODY_BYTES,
    keepalive_s: float = KEEPALIVE_INTERVAL_S,
    count_tokens_max_body_bytes: int = COUNT_TOKENS_MAX_BODY_BYTES,
    metrics: HostMetrics | None = None,
) -> web.Application:
    app = web.Application(
        client_max_size=max(max_body_bytes, count_tokens_max_body_bytes), middlewares=[_anthropic_errors]
    )
    app[REGISTRY] = registry
    app[BODY_CAPS] = {MESSAGES_PATH: max_body_bytes, COUNT_TOKENS_PATH: count_tokens_max_body_bytes}
    app[KEEPALIVE] = keepalive_s
    app[METRICS] = metrics or HostMetrics()
    app.router.add_post(MESSAGES_PATH, handle_messages)
    app.router.add_post(COUNT_TOKENS_PATH, handle_count_tokens)
    app.router.add_get("/healthz", handle_health)
    return app


class AdapterServer:
    """Owns the adapter's HTTP site, its policy-client connection pool and its CPU pool.

    Request parsing, translation, rendering and tokenisation run in a
    ``FairExecutor`` of ``max(2, cpu_count - 1)`` threads: each session holds
    at most one of them and waiting work is served round robin across
    sessions, so with two or more threads one session (one sandbox, whatever
    it sends) never holds the whole pool. Those threads hold the GIL in part
    (JSON, Jinja), so start-up lowers the interpreter's switch interval to
    1 ms (the loop gets the GIL back sooner) and freezes the import-time heap
    (``gc.freeze``) so full collections, which pause the loop, do not rescan it.
    """

    def __init__(
        self,
        renderer: PromptRenderer,
        cpu_threads: int = max(2, (os.cpu_count() or 2) - 1),
        max_body_bytes: int = MAX_BODY_BYTES,
        keepalive_s: float = KEEPALIVE_INTERVAL_S,
        spool: SessionSpool | None = None,
        count_tokens_max_body_bytes: int = COUNT_TOKENS_MAX_BODY_BYTES,
        finish_grace_s: float = FINISH_GRACE_S,
        metrics: HostMetrics | None = None,
    ):
        self._renderer = renderer
        self.metrics = metrics or HostMetrics()
        self._finish_grace_s = finish_grace_s
        self._spool = spool
        self._keepalive_s = keepalive_s
        self._cpu_threads = cpu_threads
        self._max_body_bytes = max_body_bytes
        self._count_tokens_max_body_bytes = count_tokens_max_body_bytes
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self._executor: FairExecutor | None = None
        self.registry: SessionRegistry | None = None
        self.url = ""

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        self._executor = FairExecutor(self._cpu_threads, thread_name_prefix="adapter-cpu")
        clients = policy_clients(self._http, vocab_size=self._renderer.vocab_size)
        self.registry = SessionRegistry(self._renderer, clients, self._executor, self._spool, self._finish_grace_s)
        app = create_app(
            self.registry, self._max_body_bytes, self._keepalive_s, self._count_tokens_max_body_bytes, self.metrics
        )
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound_port = self._runner.addresses[0][1]
        self.url = f"http://{host}:{bound_port}"
        gc.freeze()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        return self.url

    @property
    def port(self) -> int:
        assert self._runner is not None
        return self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()
        if self._executor is not None:
            self._executor.shutdown()
