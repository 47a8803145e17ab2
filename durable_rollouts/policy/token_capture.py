"""Token capture: turn a session's model calls into trainable token segments.

Every turn is (prompt ids sent, output ids sampled, their log-probs). A *segment* is one growing token sequence;
a turn joins a segment only when its prompt starts with the segment's tokens exactly, so every token with
``loss_mask == 1`` was sampled by the server at that very position given exactly the tokens before it. This is
checked on every append (``TokenProofError``), not assumed. ``plan`` makes it hold as often as it can:
**extend** (the segment's *sampled* ids, then only the new messages rendered and tokenised), **retry** (the
request of the segment's last turn again, whose reply the client never saw: that turn is rolled back) or
**fresh** (rendered whole: a new segment whose prompt has loss_mask 0, unless it happens to extend one
token-for-token). docs/adapter.md (*Token capture*, *Life of a sampled token*) tells the rest.

``plan`` is pure CPU work, safe in an executor; ``record`` mutates state and runs on the owning event loop, one
call per lane at a time (the adapter holds a per-lane lock from plan to record). Message dicts handed to ``plan``
and ``record`` are kept by reference and must not be mutated afterwards.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from durable_rollouts.contracts.replay import SegmentReplay
from durable_rollouts.contracts.tokens import SampledTurn, SegmentKind, TokenSegment, TurnLog
from durable_rollouts.contracts.weight_versions import VersionSpan, spans_from_runs
from durable_rollouts.policy.replay_capture import RoutedRows, TopPSpans
from durable_rollouts.policy.segment_replay import ReplayStore, routed_payload


class Renderer(Protocol):
    end_of_turn: str
    end_of_turn_id: int

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, add_generation_prompt: bool
    ) -> str: ...

    def encode(self, text: str) -> list[int]: ...


class TokenProofError(AssertionError):
    """A turn would put tokens into a segment whose sampled origin is not proven."""


def _keys(messages: list[dict[str, Any]], known: Segment | None) -> tuple[str, ...]:
    """``message_key`` of each message, reusing ``known``'s keys for the messages it starts with (when it has
    them all: a segment restored from a spool written before keys existed has none)."""
    if known is None or len(known.message_keys) != len(known.messages):
        return tuple(message_key(m) for m in messages)
    return (*known.message_keys, *(message_key(m) for m in messages[len(known.messages) :]))


def message_key(message: dict[str, Any]) -> str:
    """``<role>:<digest>`` of a chat message: equal for equal messages (key order does not matter), and
    for two different messages of a session equal only by a 128-bit digest collision."""
    canonical = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return f"{message.get('role')}:{hashlib.blake2b(canonical.encode(), digest_size=16).hexdigest()}"


@dataclass
class _Turn:
    """Positions ``[start, prompt_end)`` are the turn's new context, ``[prompt_end, end)`` its sampled tokens;
    ``versions``: ``(start, end, version)`` spans over those, in segment positions; ``called_tool``: its reply
    carries tool calls; ``ill_formed``: the tool-call parser reported errors for its completion."""

    start: int
    prompt_end: int
    end: int
    finish_reason: str
    versions: list[VersionSpan] = field(default_factory=list)
    called_tool: bool = False
    ill_formed: bool = False
    prompt_keys: tuple[str, ...] = ()
    reply_key: str = ""


@dataclass
class Segment:
    kind: SegmentKind
    lane: str
    tools: list[dict[str, Any]]
    # Typed buffers, 4, 1 and 8 bytes per token: a 100k-token session costs about 1.3 MB instead of 5-7 MB of Python
    # ints and floats, and the garbage collector has nothing to walk. Lists appear only at the JSON boundaries.
    tokens: array = field(default_factory=lambda: array("i"))
    loss_mask: array = field(default_factory=lambda: array("B"))
    log_probs: array = field(default_factory=lambda: array("d"))
    prompt_length: int = 0
    turns: list[_Turn] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    message_keys: list[str] = field(default_factory=list)
    ended_with_end_of_turn: bool = False
    anchor_text: str | None = None
    replay: ReplayStore | None = None

    def truncate(self, length: int) -> None:
        del self.tokens[length:], self.loss_mask[length:], self.log_probs[length:]
        if self.replay is not None:
            self.replay.truncate(length)

    def to_contract(self) -> TokenSegment:
        return TokenSegment(
            kind=self.kind,
            lane=self.lane,
            tokens=self.tokens.tolist(),
            loss_mask=self.loss_mask.tolist(),
            rollout_log_probs=self.log_probs.tolist(),
            prompt_length=self.prompt_length,
            turns=len(self.turns),
            finish_reason=self.turns[-1].finish_reason if self.turns else "none",
            weight_version_spans=spans_from_runs(self._version_runs()),
            tool_call_turns=sum(turn.called_tool for turn in self.turns),
            ill_formed_turns=sum(turn.ill_formed for turn in self.turns),
        )

    def _version_runs(self) -> Iterator[tuple[int, int, str | None]]:
        """Every sampled run of the segment in order, with its version (None: the server reported none)."""
        for turn in self.turns:
            cursor = turn.prompt_end
            for start, end, version in turn.versions:
                yield cursor, start, None
                yield start, end, version
                cursor = end
            yield cursor, turn.end, None


@dataclass(frozen=True)
class PromptPlan:
    lane: str
    kind: SegmentKind
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    prompt_ids: array
    mode: Literal["extend", "retry", "fresh"]
    base: Segment | None
    rendered_tokens: int
    message_keys: tuple[str, ...] = ()

    @property
    def prompt_length(self) -> int:
        return len(self.prompt_ids)

    @property
    def kept_tokens(self) -> int:
        """How many of the base segment's tokens the turn keeps (a retry drops its last turn)."""
        if self.base is None:
            return 0
        return self.base.turns[-1].start if self.mode == "retry" else len(self.base.tokens)


@dataclass(frozen=True)
class LedgerDelta:
    """Exactly what one recorded turn changed in the ledger; JSON-serialisable for the crash spool.

    ``segment`` is the index of the segment the turn joins (``len(segments)``
    opens a new one, with ``tools``); on a retry the segment's last turn is
    rolled back (``rollback``); the segment keeps its first ``keep_tokens``
    tokens and ``keep_messages`` messages, then gains ``prompt_tail``
    (loss_mask 0), ``output_ids`` (loss_mask 1, with ``log_probs``, and the
    weight versions ``weight_versions``: ``(start, end, version)`` over
    ``output_ids``, ordered, non-overlapping; ids outside them have none) and
    ``new_messages`` (the new request messages and the reply). ``ill_formed``: the
    tool-call parser reported errors for the turn's completion. ``prompt_keys`` /
    ``reply_key``: the turn's ``message_key``s for the turn log. Replay data, when the
    session captures it: ``top_p_ids`` / ``top_p_offsets`` over ``output_ids``, and
    ``routed`` (base64 uint16 rows of ``routed_width``) for the positions from
    ``routed_start`` on.
    """

    segment: int
    kind: SegmentKind
    lane: str
    tools: list[dict[str, Any]] | None
    rollback: bool
    keep_tokens: int
    prompt_tail: list[int]
    output_ids: list[int]
    log_probs: list[float]
    finish_reason: str
    keep_messages: int
    new_messages: list[dict[str, Any]]
    weight_versions: list[VersionSpan] = field(default_factory=list)
    ill_formed: bool = False
    prompt_keys: list[str] = field(default_factory=list)
    reply_key: str = ""
    top_p_ids: list[int] | None = None
    top_p_offsets: list[int] | None = None
    routed_width: int = 0
    routed_start: int = 0
    routed: str | None = None

    def __post_init__(self) -> None:
        """Spans read back from JSON arrive as lists; keep them the tuples they were."""
        object.__setattr__(self, "weight_versions", [(int(a), int(b), v) for a, b, v in self.weight_versions])


class TokenLedger:
    """All segments of one adapter session."""

    def __init__(self, renderer: Renderer):
        self._renderer = renderer
        self.segments: list[Segment] = []
        # The turn log: each turn in record order, with the keys of the messages it was prompted with and of its
        # reply, so a trainer can route turns by their messages as slime's ``TrajectoryManager`` does; a rolled-back
        # turn leaves it.
        self._log: list[tuple[Segment, _Turn]] = []
        self._replies_by_call_id: dict[str, dict[str, Any]] = {}

    def plan(
        self, lane: str, kind: SegmentKind, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> PromptPlan:
        # Clients rewrite replies they echo (Claude Code strips ``cd <cwd> &&``); the model's context is what it
        # sampled, so a reply carrying tool-call ids this ledger minted (unguessable) is put back as recorded.
        messages = [self._recorded_reply(m) for m in messages]
        candidates = [
            s for s in reversed(list(self.segments)) if s.lane == lane and s.kind == kind and s.tools == tools
        ]
        full_text: str | None = None
        known: Segment | None = None  # a segment whose messages start ``messages``: their keys are reused
        for segment in candidates:
            n = len(segment.messages)
            if messages == segment.messages[:-1]:
                prompt = segment.tokens[: segment.turns[-1].prompt_end]
                return PromptPlan(
                    lane, kind, messages, tools, prompt, "retry", segment, 0, tuple(segment.message_keys[:-1])
                )
            if len(messages) > n and messages[:n] == segment.messages:
                known = known or segment
                anchor = self._anchor(segment)
                full_text = full_text or self._renderer.render(messages, tools, True)
                if full_text.startswith(anchor):
                    tail = full_text[len(anchor) :]
                    # A reply cut at its length or a stop string sampled no end-of-turn: the marker the echo renders
                    # joins the new tail as context (loss_mask 0), the sampled ids stay as they are.
                    if not segment.ended_with_end_of_turn:
                        tail = self._renderer.end_of_turn + tail
                    tail_ids = self._renderer.encode(tail)
                    prompt = segment.tokens + array("i", tail_ids)
                    return PromptPlan(
                        lane, kind, messages, tools, prompt, "extend", segment, len(tail_ids), _keys(messages, segment)
                    )
        keys = _keys(messages, known)
        full_text = full_text or self._renderer.render(messages, tools, True)
        prompt = array("i", self._renderer.encode(full_text))
        for segment in candidates:
            if len(prompt) > len(segment.tokens) and prompt[: len(segment.tokens)] == segment.tokens:
                return PromptPlan(lane, kind, messages, tools, prompt, "extend", segment, len(prompt), keys)
        return PromptPlan(lane, kind, messages, tools, prompt, "fresh", None, len(prompt), keys)

    def record(
        self,
        plan: PromptPlan,
        reply_message: dict[str, Any],
        output_ids: list[int],
        output_log_probs: list[float],
        finish_reason: str,
        weight_versions: Sequence[VersionSpan] = (),
        ill_formed: bool = False,
        replay: dict[str, Any] | None = None,
    ) -> LedgerDelta:
        """Apply the turn and return the delta that reproduces it (for the crash spool); ``replay``: the call's
        replay data as ``replay_fields`` made it."""
        if len(output_ids) != len(output_log_probs):
            raise TokenProofError("output ids and log-probs differ in length")
        base = plan.base
        if base is None:
            index, keep_tokens, keep_messages, tools = len(self.segments), 0, 0, plan.tools
        else:
            index, tools = self.segments.index(base), None
            keep_tokens = plan.kept_tokens
            keep_messages = len(base.messages) - 1 if plan.mode == "retry" else len(base.messages)
        delta = LedgerDelta(
            segment=index,
            kind=plan.kind,
            lane=plan.lane,
            tools=tools,
            rollback=plan.mode == "retry",
            keep_tokens=keep_tokens,
            prompt_tail=plan.prompt_ids[keep_tokens:].tolist(),
            output_ids=list(output_ids),
            log_probs=[float(x) for x in output_log_probs],
            finish_reason=finish_reason,
            keep_messages=keep_messages,
            new_messages=[*plan.messages[keep_messages:], reply_message],
            weight_versions=list(weight_versions),
            ill_formed=ill_formed,
            prompt_keys=list(plan.message_keys),
            reply_key=message_key(reply_message),
            **(replay or {}),
        )
        if base is not None and plan.prompt_ids[:keep_tokens] != base.tokens[:keep_tokens]:
            raise TokenProofError(f"prompt does not extend segment {index} exactly")
        self.apply(delta)
        return delta

    @staticmethod
    def replay_fields(plan: PromptPlan, top_p: TopPSpans | None, routed: RoutedRows | None) -> dict[str, Any]:
        """A delta's replay fields for ``record``: the nuclei as lists, the routing rows only for positions the
        segment does not hold yet. CPU work (an executor, under the lane's lock, as ``plan``)."""
        fields: dict[str, Any] = {}
        if top_p is not None:
            fields |= {"top_p_ids": top_p.ids.tolist(), "top_p_offsets": top_p.offsets.tolist()}
        if routed is not None:
            base = plan.base
            held = min(base.replay.routed_rows, plan.kept_tokens) if base is not None and base.replay is not None else 0
            first = max(held, routed.start)
            fields |= {
                "routed_width": routed.rows.shape[1],
                "routed_start": first,
                "routed": routed_payload(routed.rows, first, routed.start),
            }
        return fields

    def apply(self, delta: LedgerDelta) -> Segment:
        """Apply one recorded turn; ``record`` uses it live, a restarted worker replays spooled deltas."""
        cursor = 0
        for a, b, version in delta.weight_versions:
            if not (cursor <= a < b <= len(delta.output_ids) and isinstance(version, str)):
                raise TokenProofError(
                    f"weight version span [{a}, {b}) of {len(delta.output_ids)} output ids is out of order or range"
                )
            cursor = b
        if delta.segment == len(self.segments):
            store = (
                ReplayStore(delta.top_p_offsets is not None, delta.routed_width)
                if delta.top_p_offsets is not None or delta.routed
                else None
            )
            self.segments.append(
                Segment(
                    kind=delta.kind,
                    lane=delta.lane,
                    tools=delta.tools or [],
                    prompt_length=len(delta.prompt_tail),
                    replay=store,
                )
            )
        segment = self.segments[delta.segment]
        if delta.rollback:
            undone = segment.turns.pop()
            self._log = [entry for entry in self._log if entry[1] is not undone]
        if len(segment.tokens) < delta.keep_tokens:
            raise TokenProofError(f"delta keeps {delta.keep_tokens} tokens of a {len(segment.tokens)}-token segment")
        segment.truncate(delta.keep_tokens)
        start = len(segment.tokens)
        segment.tokens.extend(delta.prompt_tail)
        segment.loss_mask.frombytes(bytes(len(delta.prompt_tail)))
        segment.log_probs.frombytes(
            bytes(segment.log_probs.itemsize * len(delta.prompt_tail))
        )  # 0.0 per context token, as one copy, not a list
        prompt_end = len(segment.tokens)
        segment.tokens.extend(delta.output_ids)
        segment.loss_mask.frombytes(b"\x01" * len(delta.output_ids))
        segment.log_probs.extend(delta.log_probs)
        if segment.replay is not None:
            segment.replay.extend(
                len(delta.prompt_tail), delta.top_p_ids, delta.top_p_offsets, delta.routed_start, delta.routed
            )
            segment.replay.check(len(segment.tokens))
        versions = [(prompt_end + a, prompt_end + b, version) for a, b, version in delta.weight_versions]
        segment.messages = [*segment.messages[: delta.keep_messages], *delta.new_messages]
        segment.message_keys = [
            *segment.message_keys[: delta.keep_messages],
            *delta.prompt_keys[delta.keep_messages :],
            delta.reply_key,
        ]
        called_tool = bool(segment.messages[-1].get("tool_calls"))
        turn = _Turn(
            start,
            prompt_end,
            len(segment.tokens),
            delta.finish_reason,
            versions,
            called_tool,
            delta.ill_formed,
            tuple(delta.prompt_keys),
            delta.reply_key,
        )
        segment.turns.append(turn)
        self._log.append((segment, turn))
        segment.ended_with_end_of_turn = (
            bool(delta.output_ids) and delta.output_ids[-1] == self._renderer.end_of_turn_id
        )
        segment.anchor_text = None
        reply = segment.messages[-1]
        for call in reply.get("tool_calls") or []:
            self._replies_by_call_id[call["id"]] = reply
        return segment

    def finish(self) -> list[TokenSegment]:
        return [s.to_contract() for s in self.segments if s.turns]

    def replay(self) -> list[SegmentReplay]:
        """The replay data of ``finish()``'s segments, aligned with them; empty when the session captured none."""
        stores = [s.replay for s in self.segments if s.turns]
        return (
            [store.contract() for store in stores if store is not None]
            if all(store is not None for store in stores)
            else []
        )

    def turn_log(self) -> TurnLog:
        """The turns in record order, their segments numbered as in ``finish()``."""
        numbers = {id(s): n for n, s in enumerate(s for s in self.segments if s.turns)}
        keys: dict[str, int] = {}
        turns = []
        for segment, turn in self._log:
            prompt = [keys.setdefault(key, len(keys)) for key in turn.prompt_keys]
            turns.append(
                SampledTurn(
                    segment=numbers[id(segment)],
                    prompt_end=turn.prompt_end,
                    end=turn.end,
                    finish_reason=turn.finish_reason,
                    called_tool=turn.called_tool,
                    ill_formed=turn.ill_formed,
                    prompt_messages=prompt,
                    reply_message=keys.setdefault(turn.reply_key, len(keys)),
                )
            )
        return TurnLog(turns=turns, message_keys=list(keys))

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
