"""Token capture: turn a session's model calls into trainable token segments.

Every turn is (prompt ids sent, output ids sampled, their log-probs). A
*segment* is one growing token sequence; a turn joins a segment only when the
turn's prompt starts with the segment's tokens exactly, so that every token
with ``loss_mask == 1`` was sampled by the server at that very position given
exactly the tokens before it. This is checked on every append, not assumed.

Prompts are planned so that this holds as often as it can:

* **extend**: the request repeats the segment's conversation (same tools,
  same messages, our reply echoed back) and the template renders that history
  unchanged; the prompt is then the segment's tokens (the *sampled* ids, never
  a re-tokenisation of their text) plus the tokenised rendering of only the new
  messages. Only the new tail is tokenised.
* **retry**: the request equals the one that produced the segment's last turn
  (the client never saw that reply: a dropped connection, a fallback); the last
  turn is rolled back and the identical prompt is sent again.
* **fresh**: anything else (sub-agent, compaction, a template that re-renders
  history, e.g. by dropping earlier reasoning): the full prompt is rendered and
  tokenised; if it happens to extend a segment token-for-token it still
  appends, otherwise it opens a new segment whose prompt carries loss_mask 0.

Clients may rewrite the replies they echo back (Claude Code strips a leading
``cd <cwd> &&`` from Bash commands). The model's context is what it sampled,
so an echoed assistant message carrying tool-call ids this ledger minted is
replaced by the recorded reply before any comparison or rendering; those ids
are unguessable, so they identify the reply.

``plan`` is pure CPU work and thread-safe to run in an executor; ``record``
mutates state and must run on the owning event loop, one call per lane at a
time (the adapter holds a per-lane lock from plan to record). Message dicts
handed to ``plan`` and ``record`` are kept by reference and must not be
mutated afterwards (the translation builds fresh ones per request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from activities.contracts import SegmentKind, TokenSegment


class Renderer(Protocol):
    end_of_turn: str
    end_of_turn_id: int

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, add_generation_prompt: bool) -> str: ...

    def encode(self, text: str) -> list[int]: ...


class TokenProofError(AssertionError):
    """A turn would put tokens into a segment whose sampled origin is not proven."""


@dataclass
class _Turn:
    start: int
    prompt_end: int
    finish_reason: str


@dataclass
class Segment:
    kind: SegmentKind
    lane: str
    tools: list[dict[str, Any]]
    tokens: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    prompt_length: int = 0
    turns: list[_Turn] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    ended_with_end_of_turn: bool = False
    anchor_text: str | None = None

    def truncate(self, length: int) -> None:
        del self.tokens[length:], self.loss_mask[length:], self.log_probs[length:]

    def to_contract(self) -> TokenSegment:
        return TokenSegment(
            kind=self.kind,
            lane=self.lane,
            tokens=list(self.tokens),
            loss_mask=list(self.loss_mask),
            rollout_log_probs=list(self.log_probs),
            prompt_length=self.prompt_length,
            turns=len(self.turns),
            finish_reason=self.turns[-1].finish_reason if self.turns else "none",
        )


@dataclass(frozen=True)
class PromptPlan:
    lane: str
    kind: SegmentKind
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    prompt_ids: list[int]
    mode: Literal["extend", "retry", "fresh"]
    base: Segment | None
    rendered_tokens: int

    @property
    def prompt_length(self) -> int:
        return len(self.prompt_ids)


class TokenLedger:
    """All segments of one adapter session."""

    def __init__(self, renderer: Renderer):
        self._renderer = renderer
        self.segments: list[Segment] = []
        self._replies_by_call_id: dict[str, dict[str, Any]] = {}

    def plan(self, lane: str, kind: SegmentKind, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PromptPlan:
        messages = [self._recorded_reply(m) for m in messages]
        candidates = [s for s in reversed(list(self.segments)) if s.lane == lane and s.kind == kind and s.tools == tools]
        full_text: str | None = None
        for segment in candidates:
            n = len(segment.messages)
            if messages == segment.messages[:-1]:
                prompt = segment.tokens[: segment.turns[-1].prompt_end]
                return PromptPlan(lane, kind, messages, tools, prompt, "retry", segment, 0)
            if len(messages) > n and messages[:n] == segment.messages:
                anchor = self._anchor(segment)
                full_text = full_text or self._renderer.render(messages, tools, True)
                if full_text.startswith(anchor):
                    tail = full_text[len(anchor) :]
                    if not segment.ended_with_end_of_turn:
                        tail = self._renderer.end_of_turn + tail
                    tail_ids = self._renderer.encode(tail)
                    return PromptPlan(lane, kind, messages, tools, segment.tokens + tail_ids, "extend", segment, len(tail_ids))
        full_text = full_text or self._renderer.render(messages, tools, True)
        prompt = self._renderer.encode(full_text)
        for segment in candidates:
            if len(prompt) > len(segment.tokens) and prompt[: len(segment.tokens)] == segment.tokens:
                return PromptPlan(lane, kind, messages, tools, prompt, "extend", segment, len(prompt))
        return PromptPlan(lane, kind, messages, tools, prompt, "fresh", None, len(prompt))

    def record(
        self,
        plan: PromptPlan,
        reply_message: dict[str, Any],
        output_ids: list[int],
        output_log_probs: list[float],
        finish_reason: str,
    ) -> Segment:
        if len(output_ids) != len(output_log_probs):
            raise TokenProofError("output ids and log-probs differ in length")
        segment = self._segment_for(plan)
        start = len(segment.tokens)
        tail = plan.prompt_ids[start:]
        segment.tokens.extend(tail)
        segment.loss_mask.extend([0] * len(tail))
        segment.log_probs.extend([0.0] * len(tail))
        prompt_end = len(segment.tokens)
        segment.tokens.extend(output_ids)
        segment.loss_mask.extend([1] * len(output_ids))
        segment.log_probs.extend(float(x) for x in output_log_probs)
        segment.turns.append(_Turn(start=start, prompt_end=prompt_end, finish_reason=finish_reason))
        segment.messages = [*plan.messages, reply_message]
        segment.ended_with_end_of_turn = bool(output_ids) and output_ids[-1] == self._renderer.end_of_turn_id
        segment.anchor_text = None
        for call in reply_message.get("tool_calls") or []:
            self._replies_by_call_id[call["id"]] = segment.messages[-1]
        return segment

    def finish(self) -> list[TokenSegment]:
        return [s.to_contract() for s in self.segments if s.turns]

    def _segment_for(self, plan: PromptPlan) -> Segment:
        segment = plan.base
        if segment is None:
            segment = Segment(kind=plan.kind, lane=plan.lane, tools=plan.tools, prompt_length=len(plan.prompt_ids))
            self.segments.append(segment)
            return segment
        if plan.mode == "retry":
            last = segment.turns.pop()
            segment.truncate(last.start)
        if plan.prompt_ids[: len(segment.tokens)] != segment.tokens:
            raise TokenProofError(f"prompt does not extend segment {self.segments.index(segment)} exactly")
        return segment

    def _recorded_reply(self, message: dict[str, Any]) -> dict[str, Any]:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            return message
        recorded = self._replies_by_call_id.get(calls[0]["id"])
        if recorded is None or [c["id"] for c in recorded["tool_calls"]] != [c["id"] for c in calls]:
            return message
        return recorded

    def _anchor(self, segment: Segment) -> str:
        """The template's rendering of the segment's conversation through its last end-of-turn marker."""
        if segment.anchor_text is None:
            rendered = self._renderer.render(segment.messages, segment.tools, False)
            cut = rendered.rfind(self._renderer.end_of_turn)
            segment.anchor_text = rendered[: cut + len(self._renderer.end_of_turn)] if cut >= 0 else rendered
        return segment.anchor_text
