"""One policy conversation state: render -> generate -> parse -> record.

A ``PolicySession`` is what the Anthropic adapter keeps per rollout attempt and
what the drift -> repair roles use directly. Each turn:

1. plans the prompt ids with the ``TokenLedger`` (chat template + tokenizer,
   run in an executor so the event loop keeps serving other sessions);
2. clamps ``max_new_tokens`` to the request's ``max_tokens``, the session's
   sampling default and what the context budget has left; a prompt that
   leaves no room ends the turn with stop reason ``max_tokens`` and samples
   nothing;
3. calls the policy server with the exact ids;
4. decodes and parses the sampled ids (reasoning, text, tool calls);
5. records the turn (and journals it, for crash recovery) before the reply
   leaves the process.

Turns of one lane are serialised; different lanes (sub-agents) run
concurrently.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import defaultdict
from contextlib import contextmanager
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Generic, Iterator, TypeVar

from activities.anthropic_translation import tool_schemas
from activities.completion_parser import ParsedCompletion, parse_completion, stop_reason
from activities.contracts import SegmentKind, SessionConfig, TurnSummary
from activities.prompt_renderer import PromptRenderer
from activities.sglang_client import SGLangClient
from activities.token_capture import LedgerDelta, PromptPlan, TokenLedger

Reply = TypeVar("Reply")
ReplyBuilder = Callable[[ParsedCompletion, str], tuple[Reply, dict[str, Any]]]
TurnObserver = Callable[["PolicySession", TurnSummary], Awaitable[None]]
TurnJournal = Callable[[LedgerDelta, TurnSummary], None]


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
        executor: Executor,
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
        self._executor = executor
        self._on_turn = on_turn
        self._journal = journal
        self._lane_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
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
        with self._in_flight_slot():
            return await self._turn_in_lane(lane, kind, messages, tools, max_tokens, build_reply)

    @contextmanager
    def _in_flight_slot(self) -> Iterator[None]:
        if self._inflight >= self.config.max_concurrent_requests:
            raise SessionLimitExceeded(f"session has {self._inflight} requests in flight (cap {self.config.max_concurrent_requests})")
        self._inflight += 1
        try:
            yield
        finally:
            self._inflight -= 1

    async def _turn_in_lane(self, lane, kind, messages, tools, max_tokens, build_reply: ReplyBuilder[Reply]) -> TurnOutcome[Reply]:
        async with self._lane_locks[lane]:
            if len(self.turns) >= self.config.max_turns:
                raise SessionLimitExceeded(f"session reached its cap of {self.config.max_turns} turns")
            loop = asyncio.get_running_loop()
            plan = await loop.run_in_executor(self._executor, self.ledger.plan, lane, kind, messages, tools)
            room = self.config.context_budget - plan.prompt_length
            if room <= 0:
                parsed = ParsedCompletion(reasoning="", text="")
                reply, _ = build_reply(parsed, "length")
                return TurnOutcome(reply, parsed, plan.prompt_length, 0, "length", over_budget=True)
            generation = await self._generate(plan, min(room, self.config.sampling.max_new_tokens, max_tokens or room))
            text = await loop.run_in_executor(self._executor, self._renderer.decode, generation.output_ids)
            parsed = parse_completion(
                text.removesuffix(self._renderer.end_of_turn), self.config.tool_parser, tool_schemas(tools)
            )
            reply, reply_message = build_reply(parsed, generation.finish_reason)
            delta = self.ledger.record(plan, reply_message, generation.output_ids, generation.log_probs, generation.finish_reason)
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
            )
            self.turns.append(summary)
            self.last_turn_at = datetime.now(timezone.utc)
            if self._journal is not None:
                self._journal(delta, summary)
            if self._on_turn is not None:
                await self._on_turn(self, summary)
            return TurnOutcome(
                reply, parsed, plan.prompt_length, len(generation.output_ids), generation.finish_reason, over_budget=False
            )

    def restore(self, turns: list[tuple[LedgerDelta, TurnSummary]]) -> None:
        """Rebuild this session from journalled turns (a restarted worker taking its sessions back)."""
        for delta, summary in turns:
            self.ledger.apply(delta)
            self.turns.append(summary)

    async def count_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        loop = asyncio.get_running_loop()
        text = await loop.run_in_executor(self._executor, self._renderer.render, messages, tools, True)
        ids = await loop.run_in_executor(self._executor, self._renderer.encode, text)
        return len(ids)

    async def _generate(self, plan: PromptPlan, max_new_tokens: int):
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
        return await self._client.generate(self.config.policy_url, plan.prompt_ids, params, rid, self.session_id)
