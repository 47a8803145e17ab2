"""slime's trajectory rule, on the project's turn log: turns routed into a message tree, each root-to-leaf path
cut into training sequences by token drift.

This is the rule of today's slime (``slime/agent/trajectory.py``, ``TrajectoryManager``), written for turns whose
messages are known by key (``TurnLog.message_keys``) and whose token ids are views into the trajectory's segments.
In slime's terms (each step's details are at its code):

* **Routing** (``MessageTree.record``): turns, in record order, are matched into the tree by their prompt messages,
  the reply hanging below as a *generated* node; a short generated leaf that an assistant message rewrites is merged
  into that message (``_merge_rewrite``);
* **Sequences** (``MessageTree._builders``): every leaf's path of generated nodes is cut by token drift into builders
  (extend, *realign* over a short reply, or *fork*); a generated node shared by several leaves is trained once;
* **Samples** (``MessageTree.sequences``): every builder that trains gives one sequence, cut to ``max_tokens``.

Beyond slime: a reply token the staleness bound masked (loss_mask 0 in its segment) stays context, and every
position keeps the weight version that sampled it (None for context).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from durable_rollouts.contracts.tokens import TokenSegment, TurnLog

DEFAULT_FORK_THRESHOLD = 1024


@dataclass(frozen=True)
class Turn:
    """One model call: ``prompt_ids`` sent, ``output_ids`` sampled (``output_mask`` 1 where trainable,
    ``output_log_probs`` and ``output_versions`` per token), routed by ``prompt_keys`` and ``reply_key``;
    ``segment`` / ``end``: where its last token sits in the trajectory (``end`` = its prompt and output length)."""

    prompt_keys: Sequence[str]
    reply_key: str
    prompt_ids: np.ndarray
    output_ids: np.ndarray
    output_mask: np.ndarray
    output_log_probs: np.ndarray
    output_versions: Sequence[str | None]
    finish_reason: str
    called_tool: bool = False
    ill_formed: bool = False
    segment: int = 0


@dataclass(frozen=True)
class Origin:
    """Positions ``[start, start + length)`` of a sequence hold a reply sampled at ``[at, at + length)`` of
    segment ``segment``."""

    start: int
    segment: int
    at: int
    length: int


@dataclass(frozen=True)
class TrainingSequence:
    """One training sequence: ``tokens`` with per-position ``loss_mask``, ``log_probs`` and ``versions``
    (cut to the cap), ``response_start`` where the response begins (the first prompt's length, which can
    exceed ``len(tokens)`` after a cut, as in slime); ``last_turn`` the turn that ended it (its tokens are
    that turn's prompt and output); ``truncated`` / ``use_tool`` / ``ill_formed`` over the path's
    generated turns, as slime's metadata; ``segments``: the segments its turns came from, in order;
    ``origins``: where its trained replies were sampled (their top-p nuclei live there)."""

    tokens: list[int]
    loss_mask: list[int]
    log_probs: list[float]
    versions: list[str | None]
    response_start: int
    last_turn: Turn
    truncated: bool
    use_tool: bool
    ill_formed: bool
    segments: list[int]
    origins: list[Origin] = field(default_factory=list)


class _Node:
    __slots__ = ("key", "role", "parent", "children", "turn", "trained")

    def __init__(self, key: str | None, parent: _Node | None = None):
        self.key = key
        self.role = key.split(":", 1)[0] if key is not None else None
        self.parent = parent
        self.children: list[_Node] = []
        self.turn: Turn | None = None
        self.trained = False

    def add(self, key: str) -> _Node:
        child = _Node(key, self)
        self.children.append(child)
        return child

    def path(self) -> list[_Node]:
        nodes = []
        node: _Node | None = self
        while node is not None and node.parent is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]


class MessageTree:
    """One session's routing tree (module docstring); ``record`` turns in order, then ``sequences``."""

    def __init__(self, fork_threshold: int = DEFAULT_FORK_THRESHOLD):
        self.fork_threshold = fork_threshold
        self._root = _Node(None)

    def record(self, turn: Turn) -> None:
        # The prompt's messages are matched from the root down, by key (role and content); where they stop matching,
        # the rest are added as routing-only nodes and the reply hangs below as a generated node. A turn with no
        # prompt messages is not recorded.
        keys = list(turn.prompt_keys)
        if not keys:
            return
        node, depth = self._root, 0
        while depth < len(keys):
            match = next((child for child in node.children if child.key == keys[depth]), None)
            if match is None:
                break
            node, depth = match, depth + 1
        node, depth = self._merge_rewrite(node, keys, depth)
        for key in keys[depth:]:
            node = node.add(key)
        node.add(turn.reply_key).turn = turn

    def _merge_rewrite(self, node: _Node, keys: list[str], depth: int) -> tuple[_Node, int]:
        # The rewrite merge: when the first unmatched message is an assistant message and the node reached has
        # exactly one assistant child, a generated leaf whose reply is shorter than ``fork_threshold`` tokens, that
        # child takes the message's key and stops being generated (its reply is not trained), and routing goes on
        # below it. A threshold of 0 turns the merge off.
        if self.fork_threshold <= 0 or depth >= len(keys) or not keys[depth].startswith("assistant:"):
            return node, depth
        assistants = [child for child in node.children if child.role == "assistant"]
        if len(assistants) != 1:
            return node, depth
        child = assistants[0]
        if child.children or child.turn is None or len(child.turn.output_ids) >= self.fork_threshold:
            return node, depth
        child.turn = None
        child.key, child.role = keys[depth], "assistant"
        return child, depth + 1

    def sequences(self, max_tokens: int = 0) -> list[TrainingSequence]:
        # Every leaf, in depth-first order of the tree, gives its path's generated nodes in order. A builder with no
        # trained token after its first prompt gives no sequence; the others give one each, its first prompt
        # stripped from the response and the whole cut to ``max_tokens`` when that is set (> 0).
        out: list[TrainingSequence] = []
        for leaf in self._leaves():
            generated = [node for node in leaf.path() if node.turn is not None]
            if not generated:
                continue
            last = generated[-1].turn
            assert last is not None
            flags = (
                last.finish_reason == "length",
                any(node.turn.called_tool for node in generated if node.turn is not None),
                any(node.turn.ill_formed for node in generated if node.turn is not None),
            )
            out += [builder.sequence(max_tokens, *flags) for builder in self._builders(generated) if builder.trains()]
        return out

    def _leaves(self) -> Iterator[_Node]:
        stack = [self._root]
        while stack:
            node = stack.pop()
            if not node.children:
                if node is not self._root:
                    yield node
                continue
            stack.extend(reversed(node.children))

    def _builders(self, generated: list[_Node]) -> list[_Builder]:
        # Each generated node goes into the current builder (``_Builder.drift`` decides how); a node shared by
        # several leaves is trained on the first leaf only and is context on the others.
        builders: list[_Builder] = []
        for node in generated:
            turn = node.turn
            assert turn is not None
            trained, node.trained = not node.trained, True
            realign = builders[-1].drift(turn, self.fork_threshold) if builders else None
            if realign is None:
                builders.append(_Builder())
                realign = False
            builders[-1].append(turn, realign, trained)
        return builders


@dataclass
class _Builder:
    tokens: array = field(default_factory=lambda: array("i"))
    loss_mask: array = field(default_factory=lambda: array("B"))
    log_probs: array = field(default_factory=lambda: array("d"))
    versions: list[str | None] = field(default_factory=list)
    last_response_start: int | None = None
    leading_prompt: int = 0
    turns: list[Turn] = field(default_factory=list)
    origins: list[Origin] = field(default_factory=list)

    def drift(self, turn: Turn, fork_threshold: int) -> bool | None:
        """False: the prompt extends the tokens held; True: realign; None: fork."""
        # No drift (the tokens held are a prefix of the prompt): the prompt's tail is appended as context and the
        # reply as trained tokens. Drift that starts inside the last reply span, with a reply shorter than
        # ``fork_threshold``: that span is overwritten by the prompt's tokens from its start, as context (realign).
        # Any other drift closes the builder and opens a new one (fork).
        held = np.frombuffer(self.tokens, dtype=np.int32) if self.tokens else np.empty(0, dtype=np.int32)
        shared = common_prefix(held, turn.prompt_ids)
        if shared == len(held):
            return False
        start = self.last_response_start
        if start is not None and shared >= start and len(turn.output_ids) < fork_threshold:
            return True
        return None

    def append(self, turn: Turn, realign: bool, trained: bool) -> None:
        first = self.last_response_start is None
        cut = self.last_response_start if realign else len(self.tokens)
        assert cut is not None
        self._truncate(cut)
        self._extend(turn.prompt_ids[cut:], np.zeros(len(turn.prompt_ids) - cut, dtype=np.uint8), None, None)
        self.last_response_start = len(self.tokens)
        mask = turn.output_mask if trained else np.zeros(len(turn.output_ids), dtype=np.uint8)
        if trained and len(turn.output_ids):
            self.origins.append(Origin(len(self.tokens), turn.segment, len(turn.prompt_ids), len(turn.output_ids)))
        self._extend(turn.output_ids, mask, turn.output_log_probs, turn.output_versions)
        if first:
            self.leading_prompt = len(turn.prompt_ids)
        self.turns.append(turn)

    def trains(self) -> bool:
        return any(self.loss_mask[self.leading_prompt :])

    def sequence(self, max_tokens: int, truncated: bool, use_tool: bool, ill_formed: bool) -> TrainingSequence:
        end = max_tokens if 0 < max_tokens < len(self.tokens) else len(self.tokens)
        segments = list(dict.fromkeys(turn.segment for turn in self.turns))
        return TrainingSequence(
            tokens=self.tokens[:end].tolist(),
            loss_mask=self.loss_mask[:end].tolist(),
            log_probs=self.log_probs[:end].tolist(),
            versions=self.versions[:end],
            response_start=self.leading_prompt,
            last_turn=self.turns[-1],
            truncated=truncated,
            use_tool=use_tool,
            ill_formed=ill_formed,
            segments=segments,
            origins=_cut_origins(self.origins, end),
        )

    def _truncate(self, length: int) -> None:
        del self.tokens[length:], self.loss_mask[length:], self.log_probs[length:], self.versions[length:]
        self.origins = _cut_origins(self.origins, length)

    def _extend(
        self, ids: np.ndarray, mask: np.ndarray, log_probs: np.ndarray | None, versions: Sequence[str | None] | None
    ) -> None:
        n = len(ids)
        self.tokens.frombytes(np.ascontiguousarray(ids, dtype=np.int32).tobytes())
        self.loss_mask.frombytes(np.ascontiguousarray(mask, dtype=np.uint8).tobytes())
        if log_probs is None:
            self.log_probs.frombytes(bytes(8 * n))
        else:
            self.log_probs.frombytes(np.where(mask.astype(bool), log_probs, 0.0).astype(np.float64).tobytes())
        if versions is None:
            self.versions += [None] * n
        else:
            self.versions += [version if keep else None for version, keep in zip(versions, mask.tolist(), strict=True)]


def _cut_origins(origins: list[Origin], end: int) -> list[Origin]:
    """``origins`` within the first ``end`` positions."""
    return [Origin(o.start, o.segment, o.at, min(o.length, end - o.start)) for o in origins if o.start < end]


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two id arrays."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if differ.size else n


def turns_of(turn_log: TurnLog, segments: list[TokenSegment]) -> list[Turn]:
    """The log's turns as views into ``segments`` (their loss_mask, log-probs and versions as the segments
    hold them, so staleness masks carry over)."""
    columns = [_columns(segment) for segment in segments]
    turns = []
    for record in turn_log.turns:
        tokens, mask, log_probs, versions = columns[record.segment]
        a, b = record.prompt_end, record.end
        turns.append(
            Turn(
                prompt_keys=[turn_log.message_keys[m] for m in record.prompt_messages],
                reply_key=turn_log.message_keys[record.reply_message],
                prompt_ids=tokens[:a],
                output_ids=tokens[a:b],
                output_mask=mask[a:b],
                output_log_probs=log_probs[a:b],
                output_versions=versions[a:b],
                finish_reason=record.finish_reason,
                called_tool=record.called_tool,
                ill_formed=record.ill_formed,
                segment=record.segment,
            )
        )
    return turns


def _columns(segment: TokenSegment) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str | None]]:
    return (
        np.asarray(segment.tokens, dtype=np.int32),
        np.asarray(segment.loss_mask, dtype=np.uint8),
        np.asarray(segment.rollout_log_probs, dtype=np.float64),
        segment.token_weight_versions(),
    )


def sequences_of(
    segments: list[TokenSegment],
    turn_log: TurnLog | None,
    fork_threshold: int = DEFAULT_FORK_THRESHOLD,
    max_tokens: int = 0,
) -> list[TrainingSequence]:
    """The training sequences of a trajectory; without a turn log (a drift -> repair role, a result recorded
    before turn logs) each segment is one path of its own turns, i.e. one sequence."""
    tree = MessageTree(fork_threshold)
    turns = turns_of(turn_log, segments) if turn_log is not None else _segment_turns(segments)
    for turn in turns:
        tree.record(turn)
    return tree.sequences(max_tokens)


def _segment_turns(segments: list[TokenSegment]) -> Iterator[Turn]:
    """One turn per segment: its whole history as one prompt-and-reply, keyed so segments never share a node."""
    for index, segment in enumerate(segments):
        tokens, mask, log_probs, versions = _columns(segment)
        start = segment.prompt_length
        yield Turn(
            prompt_keys=[f"segment:{index}"],
            reply_key=f"assistant:segment-{index}",
            prompt_ids=tokens[:start],
            output_ids=tokens[start:],
            output_mask=mask[start:],
            output_log_probs=log_probs[start:],
            output_versions=versions[start:],
            finish_reason=segment.finish_reason,
            called_tool=segment.tool_call_turns > 0,
            ill_formed=segment.ill_formed_turns > 0,
            segment=index,
        )
