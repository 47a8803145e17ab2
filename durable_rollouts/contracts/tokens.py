"""A trajectory's tokens: segments, the turn log, and the packed form and summaries the trainer and the pages read.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from durable_rollouts.contracts.weight_versions import WeightVersionSpan, collapse_runs, order_weight_versions

SegmentKind = Literal["main", "subagent", "compaction", "continuation", "role"]


class TokenSegment(BaseModel):
    """One trainable token sequence.

    Invariants: ``tokens``, ``loss_mask`` and ``rollout_log_probs`` have equal
    length; ``loss_mask[i] == 1`` only if ``tokens[i]`` was sampled by the
    policy server at position ``i`` given exactly ``tokens[:i]`` (then
    ``rollout_log_probs[i]`` is its log-prob; elsewhere it is 0.0), and every
    sampled token has it unless a staleness bound masked its turn
    (``durable_rollouts.policy.staleness``: kept as context, its versions dropped with it);
    ``loss_mask[:prompt_length]`` is all zero.

    ``weight_version_spans``: which weights sampled which tokens, as run-length
    spans over positions (``WeightVersionSpan``), ordered and non-overlapping;
    each starts and ends on a sampled token, and two consecutive spans of one
    version are separated by a sampled token without a version, so the spans
    are the fewest that say it. A sampled token outside every span has no
    version (the server reported none); context tokens never have one.
    ``token_weight_versions()`` gives the per-token view.

    ``tool_call_turns`` / ``ill_formed_turns``: how many of its ``turns`` replied
    with a parsed tool call / had a completion the tool-call parser reported
    errors for (slime's ``use_tool`` and ``ill_formed``).
    """

    kind: SegmentKind
    lane: str = "main"
    tokens: list[int]
    loss_mask: list[int]
    rollout_log_probs: list[float]
    prompt_length: int
    turns: int
    finish_reason: str
    weight_version_spans: list[WeightVersionSpan] = []
    tool_call_turns: int = Field(0, ge=0)
    ill_formed_turns: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _aligned(self) -> TokenSegment:
        n = len(self.tokens)
        if len(self.loss_mask) != n or len(self.rollout_log_probs) != n:
            raise ValueError("tokens, loss_mask and rollout_log_probs must have equal length")
        if any(self.loss_mask[: self.prompt_length]):
            raise ValueError("the initial prompt must carry loss_mask 0")
        previous: WeightVersionSpan | None = None
        for span in self.weight_version_spans:
            if not (previous.end if previous else 0) <= span.start < span.end <= n:
                raise ValueError(
                    f"weight version span [{span.start}, {span.end}) is empty, out of order or outside the segment"
                )
            if not (self.loss_mask[span.start] and self.loss_mask[span.end - 1]):
                raise ValueError(f"weight version span [{span.start}, {span.end}) must start and end on sampled tokens")
            if (
                previous is not None
                and previous.version == span.version
                and not any(self.loss_mask[previous.end : span.start])
            ):
                raise ValueError(
                    f"weight version spans ending at {previous.end} and starting at {span.start} are one span"
                )
            previous = span
        return self

    @property
    def response_length(self) -> int:
        return len(self.tokens) - self.prompt_length

    def token_weight_versions(self) -> list[str | None]:
        """One entry per position: the version that sampled it, None for context tokens and unversioned samples."""
        versions: list[str | None] = [None] * len(self.tokens)
        for span in self.weight_version_spans:
            for i in range(span.start, span.end):
                if self.loss_mask[i]:
                    versions[i] = span.version
        return versions

    def sampled_runs(self) -> list[tuple[int, int]]:
        """The maximal runs ``[start, end)`` of sampled (loss_mask 1) positions: one per model call of the segment."""
        runs: list[tuple[int, int]] = []
        start: int | None = None
        for position, mask in enumerate([*self.loss_mask, 0]):
            if mask and start is None:
                start = position
            elif not mask and start is not None:
                runs.append((start, position))
                start = None
        return runs

    def weight_version_runs(self) -> list[str]:
        """The versions of the sampled tokens in position order, each run once (unversioned tokens skipped)."""
        return collapse_runs(span.version for span in self.weight_version_spans)


class SampledTurn(BaseModel):
    """One model call of a session, in the order the ledger recorded it (a retried call's rolled-back turn is
    gone). Its prompt was exactly ``tokens[:prompt_end]`` of the trajectory's segment ``segment``, its
    sampled output is ``tokens[prompt_end:end]`` there (with that segment's loss_mask, log-probs and
    versions). ``prompt_messages`` / ``reply_message`` index ``TurnLog.message_keys``; ``called_tool``: the
    reply carries tool calls; ``ill_formed``: the tool-call parser reported errors for its completion."""

    segment: int = Field(ge=0)
    prompt_end: int = Field(ge=0)
    end: int = Field(ge=0)
    finish_reason: str
    called_tool: bool = False
    ill_formed: bool = False
    prompt_messages: list[int]
    reply_message: int = Field(ge=0)


class TurnLog(BaseModel):
    """A session's turns in record order and the chat messages they were routed by: ``message_keys`` holds
    one ``<role>:<digest>`` per distinct message (equal keys: equal messages), what slime's
    ``TrajectoryManager`` needs to route turns by their messages without the messages themselves."""

    turns: list[SampledTurn] = []
    message_keys: list[str] = []

    @model_validator(mode="after")
    def _indexed(self) -> TurnLog:
        n = len(self.message_keys)
        for position, turn in enumerate(self.turns):
            if turn.reply_message >= n or any(not 0 <= m < n for m in turn.prompt_messages):
                raise ValueError(f"turns[{position}] names a message outside message_keys ({n})")
            if not turn.prompt_end <= turn.end:
                raise ValueError(f"turns[{position}]: prompt_end {turn.prompt_end} after end {turn.end}")
        return self

    def check_against(self, segments: list[TokenSegment]) -> None:
        """``ValueError`` unless every turn lies inside the segment it names."""
        for position, turn in enumerate(self.turns):
            if turn.segment >= len(segments) or turn.end > len(segments[turn.segment].tokens):
                raise ValueError(f"turns[{position}] lies outside segment {turn.segment} of {len(segments)}")


class TurnSampling(BaseModel):
    """What one turn was sampled with (``durable_rollouts.policy.sampling.turn_sampling``): the values sent to the
    policy server (``stop``: the trainer's stop strings, then the client's stop sequences, sent as SGLang's ``stop``;
    ``stop_token_ids``: the trainer's, sent beside the end-of-turn id), the keys whose value came from the client
    (``from_client``) and the keys the client set but the trainer pinned (``ignored``)."""

    temperature: float
    top_p: float
    top_k: int
    max_new_tokens: int
    stop: list[str] = []
    stop_token_ids: list[int] = []
    from_client: list[str] = []
    ignored: list[str] = []


class TurnSummary(BaseModel):
    """What the adapter remembers about each model call, for progress and logs."""

    index: int
    lane: str
    kind: SegmentKind
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    stop_reason: str
    tool_names: list[str] = []
    parse_errors: list[str] = []
    # Server aborts the turn's generation lived through (it was continued from what was sampled).
    aborts_continued: int = 0
    # The weight versions that sampled the turn's tokens, in token order, each run once.
    weight_versions: list[str] = []
    # The client's stop sequence that ended the turn (finish_reason "stop"), None otherwise.
    stop_sequence: str | None = None
    # What the turn was sampled with (None: nothing was sampled, or a summary from before this field).
    sampling: TurnSampling | None = None


class PackedTrajectory(BaseModel):
    """A rollout's token segments, packed (``durable_rollouts.policy.trajectory_packing``) into ``packed``: an ordinary
    payload, base64 in JSON, which Temporal's external storage keeps out of history when it is large.

    ``sha256`` is the digest of ``packed`` (``nbytes`` long), checked when unpacked. ``packed`` is empty
    only in a result recorded by a worker that kept segments in a folder (its ``uri``, not read);
    unpacking one is an error."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    packed: bytes = b""
    sha256: str
    n_segments: int
    n_tokens: int
    nbytes: int


class SegmentSummary(BaseModel):
    """A segment's sizes and its weight versions.

    ``weight_version_runs``: the versions of its sampled tokens in position
    order, each run of one version once (unversioned tokens skipped); the
    oldest and newest version (``order_weight_versions``) and the number of
    changes follow from it.
    """

    kind: SegmentKind
    lane: str
    n_tokens: int
    prompt_length: int
    n_sampled: int
    turns: int
    weight_version_runs: list[str] = []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def oldest_weight_version(self) -> str | None:
        order = order_weight_versions(self.weight_version_runs)
        return order[0] if order else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def newest_weight_version(self) -> str | None:
        order = order_weight_versions(self.weight_version_runs)
        return order[-1] if order else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def weight_version_changes(self) -> int:
        return max(len(self.weight_version_runs) - 1, 0)

    @classmethod
    def of(cls, segment: TokenSegment) -> SegmentSummary:
        return cls(
            kind=segment.kind,
            lane=segment.lane,
            n_tokens=len(segment.tokens),
            prompt_length=segment.prompt_length,
            n_sampled=sum(segment.loss_mask),
            turns=segment.turns,
            weight_version_runs=segment.weight_version_runs(),
        )
