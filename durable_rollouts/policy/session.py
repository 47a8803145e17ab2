"""One policy conversation state: render -> generate -> parse -> record.

A ``PolicySession`` is what the Anthropic adapter keeps per rollout attempt and what the drift -> repair roles
use directly. Each turn plans the prompt ids with the ``TokenLedger``, works out what it is sampled with
(``durable_rollouts.policy.sampling``; a prompt that leaves no room ends the turn with ``max_tokens``, nothing
sampled), calls the policy server with the exact ids (a generation the server aborts is continued,
``durable_rollouts.policy.continuation``, so the client sees one ordinary turn), parses the sampled ids (a
matched stop string is cut from the reply, never from the record) and records and journals the turn, with each
sampled token's weight version, before the reply leaves the process.

Invariants:

* Turns of one lane are serialised; different lanes (sub-agents) run concurrently. All of a session's CPU work
  goes through the shared ``FairExecutor`` under the session's id, so it holds at most one thread at a time.
* Finishing (``close``) takes no new turn from the start (``SessionFinished``), gives the turns in flight up to
  a bound to end, then cancels the rest (which aborts their upstream requests), and returns only once every
  turn has ended, so the ledger holds whole turns only (docs/adapter.md, *Finishing a session*).
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from durable_rollouts.contracts.session import FinishReport, SessionConfig
from durable_rollouts.contracts.tokens import SegmentKind, TurnSampling, TurnSummary
from durable_rollouts.contracts.weight_versions import collapse_runs, order_weight_versions
from durable_rollouts.policy.anthropic_reply import reply_stop
from durable_rollouts.policy.anthropic_translation import tool_schemas
from durable_rollouts.policy.continuation import Continued, generate_through_aborts
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.parsers import ParsedCompletion, parse_completion
from durable_rollouts.policy.policy_clients import PolicyClient
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.sampling import ClientSampling, sglang_params, turn_sampling
from durable_rollouts.policy.sglang_client import Generation, PolicyServerError
from durable_rollouts.policy.token_capture import LedgerDelta, PromptPlan, TokenLedger

Reply = TypeVar("Reply")
T = TypeVar("T")
ReplyBuilder = Callable[[ParsedCompletion, str], tuple[Reply, dict[str, Any]]]
TurnJournal = Callable[[LedgerDelta, TurnSummary], None]
# Told of each upstream request: (rid, True) before it is sent, (rid, False) once it is answered or given up.
RequestJournal = Callable[[str, bool], None]


def assistant_reply(parsed: ParsedCompletion, finish_reason: str) -> tuple[ParsedCompletion, dict[str, Any]]:
    """A ``ReplyBuilder`` for callers that want the parsed completion back and record it as a plain assistant
    message (text, and its reasoning when there is some): drift -> repair role calls, benchmarks."""
    message: dict[str, Any] = {"role": "assistant", "content": parsed.text}
    if parsed.reasoning:
        message["reasoning_content"] = parsed.reasoning
    return parsed, message


class SessionLimitExceeded(RuntimeError):
    """The session's turn cap or concurrent-request cap was hit (the adapter answers 429)."""


class SessionFinished(RuntimeError):
    """The session was finished: it takes no new turn, and a turn still in flight at the finish bound was cut
    (the adapter answers 409, as for a finished session's token)."""


class _UpstreamCalls:
    """The session's policy client: ``rids`` holds the request ids of its ``/generate`` calls in flight."""

    def __init__(self, client: PolicyClient, requests: RequestJournal | None = None):
        self._client = client
        self._requests = requests
        self.rids: set[str] = set()

    async def generate(
        self,
        base_url: str,
        input_ids: Sequence[int],
        sampling_params: dict[str, Any],
        rid: str,
        routing_key: str,
        routed_width: int | None = None,
    ) -> Generation:
        self.rids.add(rid)
        if self._requests is not None:
            self._requests(rid, True)
        try:
            return await self._client.generate(base_url, input_ids, sampling_params, rid, routing_key, routed_width)
        finally:
            self.rids.discard(rid)
            if self._requests is not None:
                self._requests(rid, False)


def _tracked(turn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Run each turn as a task the session tracks (``close`` waits for it, then may cut it). A turn cut by
    ``close`` raises ``SessionFinished`` in its caller; a caller's own cancellation stays a cancellation."""

    @functools.wraps(turn)
    async def tracked(self: PolicySession, *args: Any, **kwargs: Any) -> T:
        task = asyncio.ensure_future(turn(self, *args, **kwargs))
        self._running_turns.add(task)
        try:
            return await task
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if task in self._cut and (caller is None or not caller.cancelling()):
                raise SessionFinished(
                    "the session was finished while this turn was in flight; the turn was aborted"
                ) from None
            raise
        finally:
            self._running_turns.discard(task)
            self._cut.discard(task)

    return tracked


@dataclass(frozen=True)
class TurnOutcome(Generic[Reply]):
    reply: Reply
    parsed: ParsedCompletion
    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    over_budget: bool
    stop_reason: str  # Anthropic's, with ``stop_sequence`` (``anthropic_reply.reply_stop``)
    stop_sequence: str | None = None


class PolicySession:
    def __init__(
        self,
        session_id: str,
        config: SessionConfig,
        renderer: PromptRenderer,
        client: PolicyClient,
        cpu: FairExecutor,
        journal: TurnJournal | None = None,
        requests: RequestJournal | None = None,
    ):
        self.session_id = session_id
        self.config = config
        self.ledger = TokenLedger(renderer)
        self.turns: list[TurnSummary] = []
        self.last_turn_at: datetime | None = None
        self._renderer = renderer
        self._client = _UpstreamCalls(client, requests)
        self._cpu = cpu
        self._journal = journal
        self._lane_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # The adapter holds it from reading a request's body until its prompt is planned: one body per session.
        self.intake = asyncio.Lock()
        self._calls = 0
        self._inflight = 0
        self.closed = False  # set by ``close``: no new turn
        # The policy server's error for the last turn it failed, until a turn succeeds: an agent that gave up on it
        # ended for the infrastructure's reason, not the policy's.
        self.policy_failure: str | None = None
        self._running_turns: set[asyncio.Future] = set()  # the turns running now (``_tracked``)
        self._cut: set[asyncio.Future] = set()  # those ``close`` cancelled

    async def run_turn(
        self,
        lane: str,
        kind: SegmentKind,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int | None,
        build_reply: ReplyBuilder[Reply],
        client: ClientSampling | None = None,
    ) -> TurnOutcome[Reply]:
        async with self.lane_lock(lane):
            return await self.turn(lane, kind, messages, tools, max_tokens, build_reply, client=client)

    def lane_lock(self, lane: str) -> asyncio.Lock:
        """Held around every turn of ``lane`` (``run_turn`` takes it; the adapter takes it before reading a body)."""
        return self._lane_locks[lane]

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """One request in flight, any endpoint; past ``max_concurrent_requests`` raises ``SessionLimitExceeded`` at
        once."""
        if self._inflight >= self.config.max_concurrent_requests:
            raise SessionLimitExceeded(
                f"session has {self._inflight} requests in flight (cap {self.config.max_concurrent_requests})"
            )
        self._inflight += 1
        try:
            yield
        finally:
            self._inflight -= 1

    async def cpu(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the shared CPU pool as this session (at most one thread per session)."""
        return await self._cpu.run(self.session_id, fn, *args)

    @_tracked
    async def turn(
        self,
        lane,
        kind,
        messages,
        tools,
        max_tokens,
        build_reply: ReplyBuilder[Reply],
        on_planned: Callable[[], None] | None = None,
        client: ClientSampling | None = None,
    ) -> TurnOutcome[Reply]:
        """One turn; the caller holds ``lane_lock(lane)``. ``client``: the request's own sampling keys
        (``durable_rollouts.policy.sampling``; None: it set none).

        ``on_planned`` is called once the prompt is planned (or planning
        failed), before the policy is asked: the adapter releases the
        session's intake there, so a session has at most one request between
        reading its body and holding a planned prompt.
        """
        try:
            if self.closed:
                raise SessionFinished("this session has finished; it accepts no more turns")
            if len(self.turns) >= self.config.max_turns:
                raise SessionLimitExceeded(f"session reached its cap of {self.config.max_turns} turns")
            plan = await self.cpu(self.ledger.plan, lane, kind, messages, tools)
        finally:
            if on_planned is not None:
                on_planned()
        room = self.config.context_budget - plan.prompt_length
        if room <= 0:
            parsed = ParsedCompletion(reasoning="", text="")
            reply, _ = build_reply(parsed, "length")
            return TurnOutcome(
                reply, parsed, plan.prompt_length, 0, "length", over_budget=True, stop_reason="max_tokens"
            )
        sampling = turn_sampling(self.config.sampling, client or ClientSampling(), max_tokens, room)
        try:
            continued = await self._generate(plan, sampling)
        except PolicyServerError as error:
            self.policy_failure = str(error)
            raise
        self.policy_failure = None
        generation = continued.generation
        if sampling.stop and continued.aborts:
            generation = await self.cpu(self._cut_at_stop_sequence, generation, sampling.stop, plan.prompt_length)
        stop_sequence = (
            generation.stop_sequence
            if generation.finish_reason == "stop" and generation.stop_sequence in sampling.stop
            else None
        )
        parsed = await self.cpu(self._parse, generation.output_ids, tools, stop_sequence, sampling.stop_token_ids)
        reply, reply_message = build_reply(parsed, generation.finish_reason)
        reason, reply_sequence = reply_stop(parsed, generation.finish_reason, stop_sequence)
        replay = (
            await self.cpu(self.ledger.replay_fields, plan, generation.top_p, generation.routed)
            if self.config.replay.any
            else None
        )
        delta = self.ledger.record(
            plan,
            reply_message,
            generation.output_ids,
            generation.log_probs,
            generation.finish_reason,
            generation.weight_versions,
            ill_formed=bool(parsed.errors),
            replay=replay,
        )
        summary = TurnSummary(
            index=len(self.turns),
            lane=lane,
            kind=kind,
            prompt_tokens=plan.prompt_length,
            completion_tokens=len(generation.output_ids),
            finish_reason=generation.finish_reason,
            stop_reason=reason,
            tool_names=[c.name for c in parsed.tool_calls],
            parse_errors=parsed.errors,
            aborts_continued=continued.aborts,
            weight_versions=collapse_runs(version for _, _, version in generation.weight_versions),
            stop_sequence=stop_sequence,
            sampling=sampling,
        )
        self.turns.append(summary)
        self.last_turn_at = datetime.now(UTC)
        if self._journal is not None:
            self._journal(delta, summary)
        output_tokens = len(generation.output_ids)
        return TurnOutcome(
            reply, parsed, plan.prompt_length, output_tokens, generation.finish_reason, False, reason, reply_sequence
        )

    async def close(self, grace_s: float) -> FinishReport:
        """Finish this session's turns (module docstring): none new from now; those in flight get ``grace_s``
        to end, then the rest are cut. Returns once every turn has ended; with none in flight, at once."""
        self.closed = True
        in_flight = set(self._running_turns)
        done = {task for task in in_flight if task.done()}
        pending = in_flight - done
        if pending and grace_s > 0:
            done, pending = await asyncio.wait(in_flight, timeout=grace_s)
        rids = sorted(self._client.rids)
        for task in pending:
            self._cut.add(task)
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        return FinishReport(waited=len(done), aborted=len(pending), aborted_rids=rids if pending else [])

    def weight_version_range(self) -> tuple[str | None, str | None]:
        """The oldest and newest weight version that sampled this session's tokens so far
        (``order_weight_versions``)."""
        order = order_weight_versions(collapse_runs(v for turn in self.turns for v in turn.weight_versions))
        return (order[0], order[-1]) if order else (None, None)

    def restore(self, turns: list[tuple[LedgerDelta, TurnSummary]]) -> None:
        """Rebuild this session from journalled turns (a restarted worker taking its sessions back)."""
        for delta, summary in turns:
            self.ledger.apply(delta)
            self.turns.append(summary)

    async def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return await self.cpu(self._count, messages, tools)

    def _parse(
        self,
        output_ids: Any,
        tools: list[dict[str, Any]],
        stop_sequence: str | None = None,
        stop_token_ids: Sequence[int] = (),
    ) -> ParsedCompletion:
        """Decode and parse a completion in one pool call (both are CPU work off the event loop); the text loses
        the end-of-turn marker (or a last id among the trainer's ``stop_token_ids``), or, when ``stop_sequence``
        ended the turn, that string and whatever follows it."""
        if len(output_ids) and output_ids[-1] in stop_token_ids:
            output_ids = output_ids[:-1]
        text = self._renderer.decode(output_ids)
        text = (
            text[: text.find(stop_sequence)]
            if stop_sequence and stop_sequence in text
            else text.removesuffix(self._renderer.end_of_turn)
        )
        return parse_completion(text, self.config.tool_parser, self.config.reasoning_parser, tool_schemas(tools))

    def _count(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        """Render and encode in one pool call, so a count waits for one round-robin turn, not two."""
        return len(self._renderer.encode(self._renderer.render(messages, tools, True)))

    def _cut_at_stop_sequence(self, generation: Generation, stops: list[str], prompt_length: int) -> Generation:
        """``generation`` (continued through aborts) through the first token whose text completes one of ``stops``,
        ended there with that string, as SGLang ends a request: SGLang matches stop strings in a request's own
        output only, so it cannot see one that straddles two pieces. What is dropped is a suffix, so every kept
        token keeps exactly the context it was sampled in."""
        ids = generation.output_ids

        def matched(count: int) -> str | None:
            text = self._renderer.decode(ids[:count])
            return next((stop for stop in stops if stop in text), None)

        if matched(len(ids)) is None:
            return generation
        low, high = 1, len(ids)
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if matched(middle) is not None else (middle + 1, high)
        stop = matched(low)
        if low == len(ids) and generation.finish_reason == "stop" and generation.stop_sequence == stop:
            return generation
        versions = [(a, min(b, low), v) for a, b, v in generation.weight_versions if a < low]
        top_p = generation.top_p.first(low) if generation.top_p is not None else None
        routed = generation.routed.before(prompt_length + low - 1) if generation.routed is not None else None
        return Generation(ids[:low], generation.log_probs[:low], "stop", versions, stop, top_p, routed)

    async def _generate(self, plan: PromptPlan, sampling: TurnSampling) -> Continued:
        self._calls += 1
        replay = self.config.replay
        params = sglang_params(sampling, self._renderer.end_of_turn_id, replay.top_p_token_ids)
        width = replay.routed_experts.width if replay.routed_experts is not None else None
        rid = f"{self.session_id}-{self._calls}-{secrets.token_hex(3)}"
        if not self.config.continue_after_abort:
            return Continued(
                await self._client.generate(
                    self.config.policy_url, plan.prompt_ids, params, rid, self.session_id, width
                ),
                aborts=0,
            )
        return await generate_through_aborts(
            self._client,
            self.config.policy_url,
            plan.prompt_ids,
            params,
            rid,
            self.session_id,
            self.config.abort_resume_budget_s,
            routed_width=width,
        )
