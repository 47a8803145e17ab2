"""A token segment read back as the conversation the policy saw: chat messages of context, and the model's
replies as token ranges split into thinking, text and tool calls.

Invariants:

* the blocks of a segment cover its tokens exactly once, in order: every position lies in one
  ``ContextMessage`` or one ``Reply`` (its lead and its sampled output);
* a ``Reply`` is one model call's sampled output (``tokens[prompt_end:end]`` of a ``SampledTurn`` of the turn
  log, numbered by record order from 1; every turn has one, an empty output an empty reply); without a turn log (a drift
  -> repair role, an old result) each run of sampled (loss_mask 1) positions is one reply, so a turn the staleness bound
  masked reads as context;
* context is split where a chat message starts (``<|im_start|>``): its role is the header's, ``tool`` when a
  user message carries ``<tool_response>``; a context message that is only a reply's generation prompt
  (``<|im_start|>assistant`` and what the template adds) is the reply's ``lead`` instead;
* a reply's parts split at ``<think>`` / ``</think>`` and ``<tool_call>`` / ``</tool_call>`` (the markers stay in
  their part); a reply whose first marker is ``</think>`` began inside thinking (the template opened it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from durable_rollouts.contracts.tokens import TokenSegment, TurnLog
from durable_rollouts.trajectory_view.token_text import TokenTexts

MESSAGE_START = "<|im_start|>"
MESSAGE_END = "<|im_end|>"
TOOL_RESPONSE = "<tool_response>"
PartKind = Literal["text", "thinking", "tool_call"]
MARKERS: dict[str, tuple[PartKind, bool]] = {
    "<think>": ("thinking", True),
    "</think>": ("thinking", False),
    "<tool_call>": ("tool_call", True),
    "</tool_call>": ("tool_call", False),
}


@dataclass(frozen=True)
class ContextMessage:
    """Positions ``[start, end)``: one chat message (or the part of one) the policy read but did not sample."""

    role: str
    start: int
    end: int
    body: str


@dataclass(frozen=True)
class ReplyPart:
    kind: PartKind
    start: int
    end: int


@dataclass(frozen=True)
class Reply:
    """Turn ``number``'s sampled output at ``[start, end)``; ``lead`` the text of its generation prompt, which
    sits at ``[lead_start, start)``."""

    number: int
    lead_start: int
    start: int
    end: int
    finish_reason: str
    parts: list[ReplyPart]
    lead: str = ""


@dataclass(frozen=True)
class SegmentConversation:
    index: int
    segment: TokenSegment
    blocks: list[ContextMessage | Reply] = field(default_factory=list)

    @property
    def replies(self) -> list[Reply]:
        return [block for block in self.blocks if isinstance(block, Reply)]


def conversations(
    segments: list[TokenSegment], turn_log: TurnLog | None, texts: TokenTexts
) -> list[SegmentConversation]:
    """Every segment's conversation (module invariants)."""
    turns = _turn_ranges(segments, turn_log)
    return [SegmentConversation(i, segment, _blocks(segment, turns[i], texts)) for i, segment in enumerate(segments)]


def _turn_ranges(segments: list[TokenSegment], turn_log: TurnLog | None) -> list[list[tuple[int, int, int, str]]]:
    """Per segment, its turns as (number, prompt_end, end, finish_reason), in position order."""
    ranges: list[list[tuple[int, int, int, str]]] = [[] for _ in segments]
    if turn_log is not None and turn_log.turns:
        for number, turn in enumerate(turn_log.turns, start=1):
            ranges[turn.segment].append((number, turn.prompt_end, turn.end, turn.finish_reason))
    else:
        number = 0
        for i, segment in enumerate(segments):
            runs = segment.sampled_runs()
            for position, (start, end) in enumerate(runs, start=1):
                number += 1
                ranges[i].append((number, start, end, segment.finish_reason if position == len(runs) else ""))
    return [sorted(r, key=lambda t: t[1]) for r in ranges]


def _blocks(
    segment: TokenSegment, turns: list[tuple[int, int, int, str]], texts: TokenTexts
) -> list[ContextMessage | Reply]:
    blocks: list[ContextMessage | Reply] = []
    cursor = 0
    for number, prompt_end, end, finish_reason in turns:
        start = max(prompt_end, cursor)
        end = max(end, start)
        context = _context(segment.tokens, cursor, start, texts)
        lead, lead_start = "", start
        if context and context[-1].role == "assistant":
            lead_start = context.pop().start
            lead = texts.text(segment.tokens[lead_start:start])
        blocks.extend(context)
        blocks.append(
            Reply(number, lead_start, start, end, finish_reason, _parts(segment.tokens, start, end, texts), lead)
        )
        cursor = end
    blocks.extend(_context(segment.tokens, cursor, len(segment.tokens), texts))
    return blocks


def _context(tokens: list[int], start: int, end: int, texts: TokenTexts) -> list[ContextMessage]:
    if start >= end:
        return []
    opener = texts.token_id(MESSAGE_START)
    cuts = [start, *(p for p in range(start + 1, end) if tokens[p] == opener), end]
    return [_message(tokens, a, b, texts, opener) for a, b in zip(cuts, cuts[1:], strict=False)]


def _message(tokens: list[int], start: int, end: int, texts: TokenTexts, opener: int | None) -> ContextMessage:
    text = texts.text(tokens[start:end])
    role = ""
    if tokens[start] == opener:
        header, _, text = text[len(MESSAGE_START) :].partition("\n")
        role = header.strip()
    body = text.removesuffix("\n").removesuffix(MESSAGE_END)
    if role == "user" and body.lstrip().startswith(TOOL_RESPONSE):
        role = "tool"
    return ContextMessage(role, start, end, body)


def _parts(tokens: list[int], start: int, end: int, texts: TokenTexts) -> list[ReplyPart]:
    markers = {i: MARKERS[name] for name in MARKERS if (i := texts.token_id(name)) is not None}
    first = next((markers[t] for t in tokens[start:end] if t in markers), None)
    kind: PartKind = "thinking" if first == ("thinking", False) else "text"
    parts: list[ReplyPart] = []
    begun = start
    for position in range(start, end):
        marker = markers.get(tokens[position])
        if marker is None:
            continue
        marked, opens = marker
        if opens:
            if position > begun:
                parts.append(ReplyPart(kind, begun, position))
            kind, begun = marked, position
        elif kind == marked:
            parts.append(ReplyPart(kind, begun, position + 1))
            kind, begun = "text", position + 1
    if end > begun:
        parts.append(ReplyPart(kind, begun, end))
    return parts
