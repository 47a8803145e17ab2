"""The policy session's contracts: sampling, staleness, the session's configuration and what finishing it returns.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from durable_rollouts.contracts.replay import ReplayCapture, SegmentReplay
from durable_rollouts.contracts.tokens import TokenSegment, TurnLog, TurnSummary

PinnableSamplingKey = Literal["temperature", "top_p", "top_k", "stop_sequences"]


# The least context budget (tokens) a session accepts, and the starter's --context-budget.
MIN_CONTEXT_BUDGET = 256


# The policy engines the adapter speaks: SGLang's ``/generate`` and vLLM's ``/inference/v1/generate``.
PolicyEngine = Literal["sglang", "vllm"]


POLICY_ENGINES: tuple[PolicyEngine, ...] = ("sglang", "vllm")


class SamplingParams(BaseModel):
    """Sampling parameters the trainer wants: every turn's defaults (``durable_rollouts.policy.sampling`` states the
    whole rule).

    A client's ``temperature``, ``top_p`` and ``top_k`` override these and its
    ``stop_sequences`` are added, except for the keys in ``pinned``: there the
    client's value is ignored (pin ``temperature`` to keep on-policy sampling
    at exactly this temperature, whatever Claude Code sends).
    ``max_new_tokens`` is a cap the client's ``max_tokens`` can only lower.
    ``stop`` / ``stop_token_ids``: the trainer's own stop strings and ids (slime's ``--rollout-stop`` /
    ``--rollout-stop-token-ids``), sent on every turn besides the client's stop sequences and the
    template's end-of-turn id.
    """

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(-1, ge=-1)
    max_new_tokens: int = Field(8192, ge=1)
    stop: list[str] = []
    stop_token_ids: list[Annotated[int, Field(ge=0)]] = []
    pinned: list[PinnableSamplingKey] = []


StalenessPolicy = Literal["mask", "drop"]


class StalenessBound(BaseModel):
    """How stale a rollout's tokens may be when its segments are merged (``durable_rollouts.policy.staleness``).

    A sampled token is stale when its weight version lies more than
    ``max_staleness`` versions behind the policy server's current one, in
    ``order``: ``"integer"`` (versions are integers, e.g. the trainer step) or
    the trainer's own list of versions, oldest first. ``mask`` keeps the
    stale turns as context (``loss_mask`` 0); ``drop`` ends the rollout
    ``aborted: stale_policy``.
    """

    model_config = ConfigDict(extra="forbid")

    max_staleness: int = Field(ge=0)
    policy: StalenessPolicy = "mask"
    order: Literal["integer"] | list[str] = "integer"


class StalenessReport(BaseModel):
    """What the merge found: the server's version then, the oldest judged token's version and how far behind it
    was, how many turns were over the bound, how many tokens ``mask`` masked, how many tokens could not be judged
    (no version, or one ``order`` does not know), and whether ``drop`` drops the sample. ``current_version`` is
    None when the server could not say (``note`` has why): then nothing is judged, every sampled token counts as
    unjudged, and the sample is kept as sampled."""

    bound: StalenessBound
    current_version: str | None
    note: str = ""
    oldest_version: str | None = None
    staleness: int | None = None
    stale_turns: int = 0
    masked_tokens: int = 0
    unjudged_tokens: int = 0
    dropped: bool = False


class SessionConfig(BaseModel):
    """What one rollout attempt's adapter session needs to know.

    ``context_budget`` bounds prompt + completion tokens of every turn;
    ``max_turns`` bounds the number of model calls and
    ``max_concurrent_requests`` the requests in flight, ``/v1/messages`` and
    ``count_tokens`` together (past either cap the adapter answers 429, before
    reading the request's body). ``continue_after_abort``: a generation the
    server aborts (a weight update) is continued from the tokens it sampled,
    for at most ``abort_resume_budget_s`` after the first abort
    (``durable_rollouts.policy.continuation``); off, an abort fails the turn with a retryable
    error to the client. ``staleness`` bounds how stale its tokens may be when
    they are merged (``durable_rollouts.policy.staleness``). ``tool_parser`` / ``reasoning_parser``
    are SGLang parser names (``durable_rollouts.policy.parsers.registry``, which checks them and
    whose defaults these are; a session spooled before ``reasoning_parser``
    existed split reasoning as ``qwen3`` does). ``replay``: what every call asks
    the server for besides log-probs (``durable_rollouts.contracts.replay``).
    """

    model_config = ConfigDict(extra="forbid")

    policy_url: str
    # Which protocol the policy server speaks (durable_rollouts.policy.policy_clients); sessions spooled before it
    # existed: sglang.
    engine: PolicyEngine = "sglang"
    sampling: SamplingParams = SamplingParams()
    context_budget: int = Field(65536, ge=MIN_CONTEXT_BUDGET)
    max_turns: int = Field(200, ge=1)
    max_concurrent_requests: int = Field(8, ge=1)
    tool_parser: str = "auto"
    reasoning_parser: str = "qwen3"
    model_name: str = "slime-actor"
    label: str = ""
    continue_after_abort: bool = True
    abort_resume_budget_s: float = Field(900.0, gt=0)
    staleness: StalenessBound | None = None
    replay: ReplayCapture = ReplayCapture()


class SessionTicket(BaseModel):
    """Returned by ``open_session``: the id for bookkeeping and the bearer secret for the client."""

    session_id: str
    secret: str


FINISH_GRACE_S = 5.0  # seconds finishing a session waits for its turns in flight before aborting them


MAX_FINISH_GRACE_S = 60.0  # merge_segments, which finishes with the bound, has two minutes in all


class FinishReport(BaseModel):
    """What finishing an adapter session found in flight (``SessionRegistry.finish_session``).

    ``waited``: turns in flight when the session was finished that ended within the finish bound
    (``ROLLOUT_FINISH_GRACE_S``); those that succeeded are in the segments. ``aborted``: turns still
    in flight at the bound, cancelled with their upstream requests aborted (``/abort_request``, never
    continued); none of their tokens is in the segments, and their clients got an error.
    ``aborted_rids``: the policy-server request ids that were in flight for those turns.
    """

    waited: int = Field(0, ge=0)
    aborted: int = Field(0, ge=0)
    aborted_rids: list[str] = []


class SessionResult(BaseModel):
    """Everything ``finish_session`` hands back; idempotent per session."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    session_id: str
    segments: list[TokenSegment]
    turns: list[TurnSummary]
    turn_log: TurnLog = TurnLog()
    # One per segment when the session captured replay data (contracts.replay), else empty.
    replay: list[SegmentReplay] = []
    config: SessionConfig | None = None
    finish: FinishReport = FinishReport()


class PolicySpec(BaseModel):
    """The trainer's side of a session: sampling, budget, and where the policy lives (None = worker default)."""

    policy_url: str | None = None
    # The engine at policy_url; None: the worker's (ROLLOUT_POLICY_ENGINE, default sglang).
    engine: PolicyEngine | None = None
    sampling: SamplingParams = SamplingParams()
    context_budget: int = Field(65536, ge=MIN_CONTEXT_BUDGET)
    max_turns: int = Field(200, ge=1)
    # SGLang parser names (policy.parsers.registry); None: the worker's (ROLLOUT_TOOL_CALL_PARSER /
    # ROLLOUT_REASONING_PARSER).
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    policy_tag: str = ""
    # None: no bound; the trainer still gets every token's version.
    staleness: StalenessBound | None = None
    # A generation the server aborts is continued (SessionConfig has the details).
    continue_after_abort: bool = True
    abort_resume_budget_s: float = Field(900.0, gt=0)
    # Top-p nuclei and routed experts to capture for the trainer (contracts.replay).
    replay: ReplayCapture = ReplayCapture()
