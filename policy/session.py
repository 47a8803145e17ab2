"""One policy conversation state: render -> generate -> parse -> record.

A ``PolicySession`` is what the Anthropic adapter keeps per rollout attempt and
what the drift -> repair roles use directly. Each turn:

1. plans the prompt ids with the ``TokenLedger`` (chat template + tokenizer,
   run in an executor so the event loop keeps serving other sessions);
2. clamps ``max_new_tokens`` to the request's ``max_tokens``, the session's
   sampling default and what the context budget has left; a prompt that
   leaves no room ends the turn with stop reason ``max_tokens`` and samples
   nothing;
3. calls the policy server with the exact ids; a generation the server
   aborts (a weight update) is continued from what it sampled
   (``policy.continuation``), so the client sees one ordinary turn;
4. decodes and parses the sampled ids (reasoning, text, tool calls);
5. records the turn, with the weight version of every sampled token as the
   server reported it (and journals it, for crash recovery), before the reply
   leaves the process.

Turns of one lane are serialised; different lanes (sub-agents) run
concurrently. All of a session's CPU work (parsing, planning, decoding,
counting) goes through the shared ``FairExecutor`` under the session's id, so
it holds at most one CPU thread at a time whatever it sends. The adapter also
uses ``admitted`` (the per-session cap on requests in flight, every endpoint)
and ``intake`` (one request of the session at a time goes from reading its
body to a planned prompt) before it reads a body.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from contracts.rollout import SegmentKind, SessionConfig, TurnSummary, collapse_runs, order_weight_versions
from policy.anthropic_translation import tool_schemas
from policy.completion_parser import ParsedCompletion, parse_completion, stop_reason
from policy.continuation import Continued, generate_through_aborts
from policy.fair_executor import FairExecutor
from policy.prompt_renderer import PromptRenderer
from policy.sglang_client import SGLangClient
from policy.token_capture import LedgerDelta, PromptPlan, TokenLedger

Reply = TypeVar("Reply")
T = TypeVar("T")
ReplyBuilder = Callable[[ParsedCompletion, str], tuple[Reply, dict[str, Any]]]
TurnObserver = Callable[["PolicySession", TurnSummary], Awaitable[None]]
TurnJournal = Callable[[LedgerDelta, TurnSummary], None]


def assistant_reply(parsed: ParsedCompletion, finish_reason: str) -> tuple[ParsedCompletion, dict[str, Any]]:
    """A ``ReplyBuilder`` for callers that want the parsed completion back and record it as a plain assistant
    message (text, and its reasoning when there is some): drift -> repair role calls, benchmarks."""
    message: dict[str, Any] = {"role": "assistant", "content": parsed.text}
    if parsed.reasoning:
        message["reasoning_content"] = parsed.reasoning
    return parsed, message


class SessionLimitExceeded(RuntimeError):
    """The session's turn cap or concurrent-request cap was hit (the adapter answers 429)."""


@dataclass(frozen=True)
class TurnOutcome(Generic[Reply]):
    reply: Reply
    parsed: ParsedCompletion
    prompt_tokens: int
    output_tokens: int
    finish_reason: str
    over_budget: bool


class PolicySession:
    def __init__(
        self,
        session_id: str,
        config: SessionConfig,
        renderer: PromptRenderer,
        client: SGLangClient,
        cpu: FairExecutor,
        on_turn: TurnObserver | None = None,
        journal: TurnJournal | None = None,
    ):
        self.session_id = session_id
        self.config = config
        self.ledger = TokenLedger(renderer)
        self.turns: list[TurnSummary] = []
        self.last_turn_at: datetime | None = None
        self._renderer = renderer
        self._client = client
        self._cpu = cpu
        self._on_turn = on_turn
        self._journal = journal
        self._lane_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.intake = asyncio.Lock()
        self._calls = 0
        self._inflight = 0

    async def run_turn(
        self,
        lane: str,
        kind: SegmentKind,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int | None,
        build_reply: ReplyBuilder[Reply],
    ) -> TurnOutcome[Reply]:
        async with self.lane_lock(lane):
            return await self.turn(lane, kind, messages, tools, max_tokens, build_reply)

    def lane_lock(self, lane: str) -> asyncio.Lock:
        """Held around every turn of ``lane`` (``run_turn`` takes it; the adapter takes it before reading a body)."""
        return self._lane_locks[lane]

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """One request in flight, any endpoint; past ``max_concurrent_requests`` raises ``SessionLimitExceeded`` at once."""
        if self._inflight >= self.config.max_concurrent_requests:
            raise SessionLimitExceeded(f"session has {self._inflight} requests in flight (cap {self.config.max_concurrent_requests})")
        self._inflight += 1
        try:
            yield
        finally:
            self._inflight -= 1

    async def cpu(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the shared CPU pool as this session (at most one thread per session)."""
        return await self._cpu.run(self.session_id, fn, *args)

    async def turn(
        self, lane, kind, messages, tools, max_tokens, build_reply: ReplyBuilder[Reply], on_planned: Callable[[], None] | None = None
    ) -> TurnOutcome[Reply]:
        """One turn; the caller holds ``lane_lock(lane)``.

        ``on_planned`` is called once the prompt is planned (or planning
        failed), before the policy is asked: the adapter releases the
        session's intake there, so a session has at most one request between
        reading its body and holding a planned prompt.
        """
        try:
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
            return TurnOutcome(reply, parsed, plan.prompt_length, 0, "length", over_budget=True)
        continued = await self._generate(plan, min(room, self.config.sampling.max_new_tokens, max_tokens or room))
        generation = continued.generation
        parsed = await self.cpu(self._parse, generation.output_ids, tools)
        reply, reply_message = build_reply(parsed, generation.finish_reason)
        delta = self.ledger.record(
            plan, reply_message, generation.output_ids, generation.log_probs, generation.finish_reason, generation.weight_versions
        )
        summary = TurnSummary(
            index=len(self.turns),
            lane=lane,
            kind=kind,
            prompt_tokens=plan.prompt_length,
            completion_tokens=len(generation.output_ids),
            finish_reason=generation.finish_reason,
            stop_reason=stop_reason(parsed, generation.finish_reason),
            tool_names=[c.name for c in parsed.tool_calls],
            parse_errors=parsed.errors,
            aborts_continued=continued.aborts,
            weight_versions=collapse_runs(version for _, _, version in generation.weight_versions),
        )
        self.turns.append(summary)
        self.last_turn_at = datetime.now(UTC)
        if self._journal is not None:
            self._journal(delta, summary)
        if self._on_turn is not None:
            await self._on_turn(self, summary)
        return TurnOutcome(reply, parsed, plan.prompt_length, len(generation.output_ids), generation.finish_reason, over_budget=False)

    def weight_version_range(self) -> tuple[str | None, str | None]:
        """The oldest and newest weight version that sampled this session's tokens so far (``order_weight_versions``)."""
        order = order_weight_versions(collapse_runs(v for turn in self.turns for v in turn.weight_versions))
        return (order[0], order[-1]) if order else (None, None)

    def restore(self, turns: list[tuple[LedgerDelta, TurnSummary]]) -> None:
        """Rebuild this session from journalled turns (a restarted worker taking its sessions back)."""
        for delta, summary in turns:
            self.ledger.apply(delta)
            self.turns.append(summary)

    async def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return await self.cpu(self._count, messages, tools)

    def _parse(self, output_ids: Any, tools: list[dict[str, Any]]) -> ParsedCompletion:
        """Decode and parse a completion in one pool call (both are CPU work off the event loop)."""
        text = self._renderer.decode(output_ids)
        return parse_completion(text.removesuffix(self._renderer.end_of_turn), self.config.tool_parser, tool_schemas(tools))

    def _count(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        """Render and encode in one pool call, so a count waits for one round-robin turn, not two."""
        return len(self._renderer.encode(self._renderer.render(messages, tools, True)))

    async def _generate(self, plan: PromptPlan, max_new_tokens: int) -> Continued:
        self._calls += 1
        sampling = self.config.sampling
        params = {
            "max_new_tokens": max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "stop_token_ids": [self._renderer.end_of_turn_id],
            "skip_special_tokens": False,
            "no_stop_trim": True,
        }
        rid = f"{self.session_id}-{self._calls}-{secrets.token_hex(3)}"
        if not self.config.continue_after_abort:
            return Continued(await self._client.generate(self.config.policy_url, plan.prompt_ids, params, rid, self.session_id), aborts=0)
        return await generate_through_aborts(
            self._client, self.config.policy_url, plan.prompt_ids, params, rid, self.session_id, self.config.abort_resume_budget_s
        )
