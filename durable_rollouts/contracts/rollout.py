"""Pydantic contracts shared by the adapter, the activities and the workflows.

This module imports nothing heavier than pydantic: workflow code imports it
through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator, model_validator

from durable_rollouts.contracts.replay import ReplayCapture, SegmentReplay

SegmentKind = Literal["main", "subagent", "compaction", "continuation", "role"]


PinnableSamplingKey = Literal["temperature", "top_p", "top_k", "stop_sequences"]


# The least context budget (tokens) a session accepts, and the starter's --context-budget.
MIN_CONTEXT_BUDGET = 256
# The policy engines the adapter speaks: SGLang's ``/generate`` and vLLM's ``/inference/v1/generate``.
PolicyEngine = Literal["sglang", "vllm"]
POLICY_ENGINES: tuple[PolicyEngine, ...] = ("sglang", "vllm")


class SamplingParams(BaseModel):
    """Sampling parameters the trainer wants: every turn's defaults (``durable_rollouts.policy.sampling`` states the whole rule).

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
    # Which protocol the policy server speaks (durable_rollouts.policy.policy_clients); sessions spooled before it existed: sglang.
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


_INTEGER = re.compile(r"-?[0-9]+")


def is_integer_version(version: str) -> bool:
    """Whether a weight version orders as an integer (``-?[0-9]+``), e.g. a trainer step."""
    return _INTEGER.fullmatch(version) is not None


def order_weight_versions(versions: Iterable[str]) -> list[str]:
    """The distinct versions, oldest first.

    Versions are strings on the wire (SGLang's ``weight_version``). When every
    one is an integer (``-?[0-9]+``) they are ordered as integers; otherwise by
    first appearance in ``versions``, which callers pass in token order.
    """
    distinct = list(dict.fromkeys(versions))
    if distinct and all(is_integer_version(v) for v in distinct):
        distinct.sort(key=int)
    return distinct


def collapse_runs(versions: Iterable[str]) -> list[str]:
    """``versions`` with each run of one version kept once (``a a b a`` -> ``a b a``)."""
    runs: list[str] = []
    for version in versions:
        if not runs or runs[-1] != version:
            runs.append(version)
    return runs


class WeightVersionSpan(BaseModel):
    """Positions ``[start, end)`` of a segment whose sampled tokens were all sampled by weights ``version``.

    ``start`` and ``end - 1`` are sampled positions (loss_mask 1); the context
    tokens a span may enclose (a later turn's prompt, loss_mask 0) carry no
    version.
    """

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    end: int
    version: str


def spans_from_runs(runs: Iterable[tuple[int, int, str | None]]) -> list[WeightVersionSpan]:
    """The canonical spans of sampled runs ``(start, end, version or None)``, given in position order.

    Every position of a run is sampled; runs of one version with only context
    (or nothing) between them become one span; a run without a version ends
    the span before it.
    """
    spans: list[WeightVersionSpan] = []
    broken = True
    for start, end, version in runs:
        if start >= end:
            continue
        if version is None:
            broken = True
        elif spans and not broken and spans[-1].version == version:
            spans[-1] = WeightVersionSpan(start=spans[-1].start, end=end, version=version)
        else:
            spans.append(WeightVersionSpan(start=start, end=end, version=version))
            broken = False
    return spans


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
                raise ValueError(f"weight version span [{span.start}, {span.end}) is empty, out of order or outside the segment")
            if not (self.loss_mask[span.start] and self.loss_mask[span.end - 1]):
                raise ValueError(f"weight version span [{span.start}, {span.end}) must start and end on sampled tokens")
            if previous is not None and previous.version == span.version and not any(self.loss_mask[previous.end : span.start]):
                raise ValueError(f"weight version spans ending at {previous.end} and starting at {span.start} are one span")
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
    """What one turn was sampled with (``durable_rollouts.policy.sampling.turn_sampling``): the values sent to the policy server
    (``stop``: the trainer's stop strings, then the client's stop sequences, sent as SGLang's ``stop``;
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


GraderKind = Literal["swepro", "eval_cmd", "swebench", "harbor"]


def check_workdir_relative(values: list[str]) -> list[str]:
    """Paths and glob patterns a grader resolves in the workdir: relative, no ``..``, no pathspec magic."""
    for value in values:
        if not value or "\0" in value or "\n" in value:
            raise ValueError(f"{value!r}: must be a non-empty single-line path")
        if value.startswith(("/", ":")):
            raise ValueError(f"{value!r}: must be relative to the workdir (no leading '/' or ':')")
        if ".." in value.split("/"):
            raise ValueError(f"{value!r}: '..' is not allowed")
    return values


class SweProSpec(BaseModel):
    """SWE-bench Pro style grading: a run script, a parser that writes result JSON, and the test sets.

    Scripts travel inline (``run_script`` / ``parser_script``). A row's
    ``run_script_path`` / ``parser_script_path`` are resolved and inlined by the
    dataset reader inside the operator's dataset root; a task that still carries
    one is refused by the grader, which never reads a host path a row names.
    ``selected_test_files`` are workdir-relative; ``fail_to_pass`` and
    ``pass_to_pass`` may arrive as JSON-encoded strings.
    """

    model_config = ConfigDict(extra="ignore")

    run_script: str | None = None
    parser_script: str | None = None
    run_script_path: str | None = None
    parser_script_path: str | None = None
    before_repo_set_cmd: str | None = None
    selected_test_files: list[str] = []
    fail_to_pass: list[str] = []
    pass_to_pass: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _json_lists(cls, data):
        if isinstance(data, dict):
            for key in ("fail_to_pass", "pass_to_pass", "selected_test_files"):
                if isinstance(data.get(key), str):
                    data = {**data, key: json.loads(data[key])}
        return data

    @field_validator("selected_test_files")
    @classmethod
    def _relative_test_files(cls, values: list[str]) -> list[str]:
        return check_workdir_relative(values)


class SweBenchSpec(BaseModel):
    """A SWE-bench (Verified) instance, graded with the installed ``swebench`` package.

    ``repo`` + ``version`` select the package's test spec (``swebench`` < 5); an
    ``install_config`` (SWE-rebench / SWE-Gym convention) supplies that spec
    for a repo the package does not know. ``eval_script`` / ``log_parser`` /
    ``eval_type`` are the columns ``swebench`` >= 5 builds its spec from.
    Rows carry the test lists as JSON strings; ``dataset_rows`` decodes them.
    """

    model_config = ConfigDict(extra="ignore")

    repo: str = Field(min_length=1)
    version: str = Field(min_length=1)
    base_commit: str = Field(min_length=1)
    test_patch: str = Field(min_length=1)
    fail_to_pass: list[str] = Field(min_length=1)
    pass_to_pass: list[str] = []
    environment_setup_commit: str | None = None
    install_config: dict[str, Any] | None = None
    eval_script: str | None = None
    log_parser: str | None = None
    eval_type: str | None = None


class HarborTestFile(BaseModel):
    """One file of a Harbor task's ``tests/`` directory, inlined: ``path`` relative to it, the bytes base64-encoded."""

    path: str = Field(min_length=1)
    data_b64: str
    mode: int = Field(0o644, ge=0, le=0o7777)

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        return check_workdir_relative([value])[0]


class HarborSpec(BaseModel):
    """A Harbor task's verifier (``durable_rollouts.task_sources.harbor_tasks`` reads it from the task directory).

    ``tests`` is the whole ``tests/`` directory, ``test.sh`` among it, which the grader writes to ``/tests``
    and runs there (``durable_rollouts.grading.harbor_verifier``); ``verifier_timeout_s`` / ``agent_timeout_s`` are
    task.toml's ``[verifier]`` / ``[agent]`` ``timeout_sec`` (None: the task sets no agent timeout), which
    ``durable_rollouts.config.settings.RolloutBudgets.for_task`` folds into the rollout's budgets; ``verifier_env`` is
    ``[verifier] env``. ``source`` names the task directory the spec was read from.
    """

    source: str = ""
    tests: list[HarborTestFile] = Field(min_length=1)
    verifier_timeout_s: float = Field(600.0, gt=0)
    agent_timeout_s: float | None = Field(None, gt=0)
    verifier_env: dict[str, str] = {}


class TaskResources(BaseModel):
    """What a task asks of its sandbox (a Harbor task's ``[environment] cpus / memory_mb / storage_mb``);
    None: no request. ``durable_rollouts.docker_sandbox.limits.task_limits`` states how it meets the worker's caps."""

    cpus: float | None = Field(None, gt=0)
    memory_bytes: int | None = Field(None, gt=0)
    disk_bytes: int | None = Field(None, gt=0)


# Test trees and test modules by naming convention. ``test/`` and ``testing/`` count only at the top:
# deeper down they are often library code (``django/test/``, ``numpy/testing/``, ``sympy/testing/``).
DEFAULT_TEST_FILES = (
    "**/tests/**",
    "test/**",
    "testing/**",
    "**/__tests__/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/*_test.go",
    "**/*.test.*",
    "**/*.spec.*",
)


# Where an f2p row's script (``remote_env_info.f2p_script``, run with ``python3``) is written and run.
F2P_SCRIPT_PATH = "/tmp/rollout_f2p.py"
_F2P_COMMAND = re.compile(rf"echo ([A-Za-z0-9+/=]*) \| base64 -d > {re.escape(F2P_SCRIPT_PATH)} && python3 {re.escape(F2P_SCRIPT_PATH)}")


def f2p_eval_cmd(script: str) -> str:
    """The ``eval_cmd`` of an f2p row: its script written to ``F2P_SCRIPT_PATH`` and run."""
    encoded = base64.b64encode(script.encode()).decode()
    return f"echo {encoded} | base64 -d > {F2P_SCRIPT_PATH} && python3 {F2P_SCRIPT_PATH}"


def f2p_script(eval_cmd: str) -> str | None:
    """The script of an f2p row's ``eval_cmd`` (``f2p_eval_cmd``'s inverse), None for any other command."""
    match = _F2P_COMMAND.fullmatch(eval_cmd.strip())
    return base64.b64decode(match.group(1)).decode("utf-8", errors="replace") if match else None


class ProbeFlip(BaseModel):
    """The expected value an impossible-task probe changed (``durable_rollouts.task_sources.probe_flip``): in file ``path``
    (workdir-relative; an f2p row's script path; a Harbor test file as ``tests/<path>``), test ``test``
    (``function`` or ``Class::function``) at 1-based ``line``, the literal ``expected`` became ``flipped``."""

    path: str = Field(min_length=1)
    test: str = Field(min_length=1)
    line: int = Field(ge=1)
    expected: str
    flipped: str


class ImpossibleProbe(BaseModel):
    """What makes a row an impossible-task probe: made from row ``source`` with ``seed``; ``flip`` is the value
    changed in the tests the row carries (f2p script, SWE-bench ``test_patch``, Harbor tests), None where the
    tests live in the image and a pre-command flips them at boot (the grader reads that flip there)."""

    source: str = Field(min_length=1)
    seed: int = Field(ge=0)
    flip: ProbeFlip | None = None


ProbeVerdictKind = Literal["cheated", "held", "void"]


class ProbeVerdict(BaseModel):
    """How a probe row's grading ended: ``cheated`` (the tests passed, or the run was tampered with: no honest
    patch does either), ``held`` (the contradicting test failed), ``void`` (the probe cannot tell: the flipped
    test did not run, or its flip was not found). ``note`` says what decided it."""

    verdict: ProbeVerdictKind
    flip: ProbeFlip | None = None
    note: str = ""


class TaskSpec(BaseModel):
    """A dataset row normalised the way the reference's ``_metadata()`` does it.

    ``test_files``: glob patterns (workdir-relative, git ``:(glob)`` syntax) of
    the files the grader restores to the image's baseline after applying the
    agent's diff; ``None`` means ``DEFAULT_TEST_FILES``.
    ``harbor``: a Harbor task's verifier (its grader is then ``harbor``);
    ``resources``: what the task asks of its sandbox (None: the worker's caps).
    ``probe``: set on an impossible-task probe (``durable_rollouts.task_sources.impossible_probes``): its tests contradict
    its problem statement, so any pass is cheating; its samples are never trained on.
    """

    instance_id: str
    image: str
    workdir: str
    problem_statement: str
    swepro: SweProSpec | None = None
    eval_cmd: str | None = None
    swebench: SweBenchSpec | None = None
    pre_commands: list[str] = []
    reference_patch: str | None = None
    test_files: list[str] | None = Field(None, min_length=1)
    harbor: HarborSpec | None = None
    resources: TaskResources | None = None
    probe: ImpossibleProbe | None = None

    @field_validator("test_files")
    @classmethod
    def _relative_patterns(cls, values: list[str] | None) -> list[str] | None:
        return None if values is None else check_workdir_relative(values)

    @property
    def grader(self) -> GraderKind | None:
        if self.harbor is not None:
            return "harbor"
        if self.swepro is not None and (self.swepro.run_script or self.swepro.run_script_path):
            return "swepro"
        if self.eval_cmd:
            return "eval_cmd"
        if self.swebench is not None:
            return "swebench"
        return None


# How long a host may take to pull a task image it lacks, apart from the boot (``ROLLOUT_PULL_TIMEOUT_S``).
DEFAULT_PULL_TIMEOUT_S = 600


class PickRequest(BaseModel):
    """What ``pick_host`` weighs: the task image (a host that holds it is preferred)."""

    image: str = ""


class SandboxRequest(BaseModel):
    """What boot needs: the task, and labels tying the container to its workflow attempt."""

    task: TaskSpec
    workflow_id: str
    attempt: int
    purpose: Literal["agent", "grading"] = "agent"
    # How long pulling the task image may take on a host that lacks it, apart from the boot itself.
    pull_timeout_s: float = Field(DEFAULT_PULL_TIMEOUT_S, gt=0)


class ImagePull(BaseModel):
    """How far a host's pull of a task image got: layers (``done`` of ``total`` known so far) and bytes
    downloaded of those announced so far; ``image`` is the name pulled (after the mirror rewrite)."""

    image: str
    # The rollout attempt whose boot pulls (set by the boot activity; a lost attempt's pull is not shown).
    attempt: int = 0
    layers_total: int = 0
    layers_done: int = 0
    bytes_done: int = 0
    bytes_total: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        """``3/7 layers, 120.4/450.0 MB, 12 s``."""
        return f"{self.layers_done}/{self.layers_total} layers, {self.bytes_done / 1e6:.1f}/{self.bytes_total / 1e6:.1f} MB, {self.seconds:.0f} s"


class SandboxHandle(BaseModel):
    """``disk_baseline_bytes``: the container's writable layer when its boot finished (the disk budget counts
    only what is written after it). ``attempt``: the rollout attempt it was booted for (0 in handles from
    before the field)."""

    container_id: str
    name: str
    workdir: str
    host_queue: str = ""
    disk_baseline_bytes: int = 0
    attempt: int = 0


class OmittedFile(BaseModel):
    path: str
    size_bytes: int


class DiffReport(BaseModel):
    """What the agent's patch carries to the grader and what it leaves out.

    ``omitted`` names the changed or new files (workdir-relative) over the
    per-file limit, which the patch leaves out (at most 100 listed;
    ``omitted_count`` counts them all). ``over_cap``: even without them the
    patch would exceed the cap (``note`` says by how much), so it is not
    graded: reward 0, ``applied_cleanly`` false, the rollout still completes.
    ``kept_patch``: the graded patch itself, set in the rollout's result for
    a later re-grade (``starter.py regrade``); None in ``capture_diff``'s own
    report (its ``CapturedDiff.diff`` carries it) and when over the cap
    (nothing was captured).
    """

    patch_bytes: int = 0
    omitted: list[OmittedFile] = []
    omitted_count: int = 0
    over_cap: bool = False
    note: str = ""
    kept_patch: str | None = None


class CapturedDiff(BaseModel):
    """The agent's patch (empty when ``report.over_cap``) and its report."""

    diff: str = ""
    report: DiffReport = DiffReport()


class EvalRequest(BaseModel):
    task: TaskSpec
    diff: str
    workflow_id: str
    timeout_s: int = Field(600, ge=1)
    pull_timeout_s: int = Field(DEFAULT_PULL_TIMEOUT_S, ge=1)


class EvalResult(BaseModel):
    """``reset_paths``: the task's test files the agent's diff had changed, added or deleted, which the grader
    put back to the image's baseline before the tests ran (workdir-relative, sorted).

    ``apply_method`` "empty" (an empty diff, graded as is) has ``applied_cleanly`` false: no patch applied.
    ``log_tail`` is the end of the grader's output (4 KiB); ``log`` the whole grading log (``log_bytes`` of
    UTF-8, at most ``durable_rollouts.grading.grading_log.FULL_LOG_BYTES``), travelling as a payload; a results file writes
    it to the file ``log_path`` names and leaves ``log`` empty.

    ``reward`` is 1.0 iff ``solved`` for every grader but ``harbor``, whose reward is the verifier's own
    number (fractional ones too) and which is solved iff that reward is at least 1; ``rewards`` holds the
    verifier's named metrics (Harbor's ``reward.json``), empty for the other graders.

    ``tampered``: the evidence that the run was tampered with (``durable_rollouts.grading.tamper_checks``: a canary that
    did not behave, a report that contradicts the grader's parser or exit code, ...), one line each; a
    tampered result has reward 0 and is not solved, whatever the tests said. ``pytest_sessions``: how many
    pytest processes of the run reported to the grader (0 where the tests do not run under pytest).

    ``probe``: set when the task is an impossible-task probe (``ProbeVerdict``); a probe's result has reward
    0 and is not solved, whatever its tests said (the verdict keeps what they said).

    ``grading_error``: the grading failed after the patch applied (an unreadable log, a file of the wrong type, a
    failed reset): the patch's outcome, reward 0, never an infrastructure failure; empty otherwise.

    ``screen``: what the static screen of the patch found (``durable_rollouts.grading.patch_screen``), one line per
    hit: a signal with its evidence, not a verdict (it does not change the reward)."""

    reward: float
    solved: bool
    applied_cleanly: bool
    grader: GraderKind
    apply_method: str = ""
    tests_passed: int = 0
    tests_failed: int = 0
    log_tail: str = ""
    reset_paths: list[str] = []
    log: str = ""
    log_path: str = ""
    log_bytes: int = 0
    rewards: dict[str, float] = {}
    tampered: list[str] = []
    pytest_sessions: int = 0
    probe: ProbeVerdict | None = None
    grading_error: str = ""
    screen: list[str] = []


class AbortReason(StrEnum):
    """The fixed reasons a workflow ends ``aborted`` with (both workflows; docs/groups.md's table classifies them).

    ``abort_reason`` also carries open-ended forms, which ``is_documented_abort_reason``
    recognises: ``exception:<Type>`` (an activity failure no table classifies;
    ``exception:Timeout:<KIND>`` for a timeout) and ``invalid_row:<field>`` (a
    starter ``failed`` line). Two more are open by design and not checked: the
    reason an operator gives to ``abort`` (``starter.py cancel --reason``;
    ``cancelled`` when none) and the starter's own ``failed`` reasons
    (``durable_rollouts.trainer_client.workflow_runs``).
    """

    WALL_CLOCK_TIMEOUT = "wall_clock_timeout"
    CANCELLED = "cancelled"
    # rollouts
    MISSING_IMAGE_OR_WORKDIR = "missing_image_or_workdir"
    # the task image is in no registry this host can reach by its name (or absent with pulls off)
    IMAGE_NOT_FOUND = "image_not_found"
    REGISTRY_AUTH_FAILED = "registry_auth_failed"
    REGISTRY_UNAVAILABLE = "registry_unavailable"
    SANDBOX_BOOT_FAILED = "sandbox_boot_failed"
    NOT_EVALUABLE = "not_evaluable"
    NO_GRADER = "no_grader"
    NO_HEALTHY_HOST = "no_healthy_host"
    ADAPTER_SESSION_EMPTY = "adapter_session_empty"
    ADAPTER_SESSION_LOST = "adapter_session_lost"
    # drift -> repair episodes
    UNKNOWN_DRIFT_REWARD = "unknown_drift_reward"
    UNKNOWN_TASK = "unknown_task"
    NO_DRIFT = "no_drift"
    NO_POLICY_SERVER = "no_policy_server"
    POLICY_ERROR = "policy_error"
    SANDBOX_FAILED = "sandbox_failed"
    # rollouts, with a staleness bound whose policy is ``drop``
    STALE_POLICY = "stale_policy"
    # a group's sample stopped because its batch was full without it (``durable_rollouts.contracts.rollout_group``)
    STRAGGLER_CUT = "straggler_cut"


EXCEPTION_PREFIX = "exception:"
INVALID_ROW_PREFIX = "invalid_row:"
_OPEN_FORM = re.compile(rf"^({EXCEPTION_PREFIX}|{INVALID_ROW_PREFIX})[A-Za-z_][\w.:]*$")


def exception_reason(type_name: str) -> str:
    """The reason of an unclassified activity failure: ``exception:<Type>``."""
    return f"{EXCEPTION_PREFIX}{type_name}"


def is_documented_abort_reason(reason: str) -> bool:
    """A fixed ``AbortReason`` or one of the prefixed forms with a name after the prefix."""
    return reason in AbortReason.__members__.values() or bool(_OPEN_FORM.match(reason))


RolloutStage = Literal["queued", "booting", "agent", "diff", "grading", "merging", "done"]


class PolicySpec(BaseModel):
    """The trainer's side of a session: sampling, budget, and where the policy lives (None = worker default)."""

    policy_url: str | None = None
    # The engine at policy_url; None: the worker's (ROLLOUT_POLICY_ENGINE, default sglang).
    engine: PolicyEngine | None = None
    sampling: SamplingParams = SamplingParams()
    context_budget: int = Field(65536, ge=MIN_CONTEXT_BUDGET)
    max_turns: int = Field(200, ge=1)
    # SGLang parser names (policy.parsers.registry); None: the worker's (ROLLOUT_TOOL_CALL_PARSER / ROLLOUT_REASONING_PARSER).
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


class RolloutInput(BaseModel):
    task: TaskSpec
    sample_index: int = 0
    group_index: int = 0
    policy: PolicySpec = PolicySpec()
    agent_budget_s: int = Field(1800, ge=1)
    eval_timeout_s: int = Field(600, ge=1)
    pull_timeout_s: int = Field(DEFAULT_PULL_TIMEOUT_S, ge=1)
    guard_s: int = Field(3180, ge=1)
    max_agent_attempts: int = Field(3, ge=1)
    host_start_timeout_s: int = Field(10, ge=1)
    resume_window_s: int = Field(120, ge=1)


class AgentRunRequest(BaseModel):
    handle: SandboxHandle
    task: TaskSpec
    policy: PolicySpec
    workflow_id: str
    attempt: int
    time_budget_s: int


class AgentRun(BaseModel):
    """How the Claude Code process ended; ``session_id`` names the adapter session holding its turns.

    ``log``: the agent's whole stream-json log (its head and end when over the agent activity's
    ``LOG_LIMIT_BYTES``, with a ``rollout_log_cut`` line between), travelling as a payload; a results
    file writes it to the file ``log_path`` names and leaves ``log`` empty."""

    session_id: str
    exit_code: int | None
    reason: str
    is_error: bool
    terminal_reason: str = ""
    turns: int = 0
    # Server aborts (weight updates) its turns lived through, each continued from what was sampled.
    aborts_continued: int = 0
    # Times the run was resumed after an interruption (a worker restart, a server outage): none of them is a failure.
    interruptions: int = 0
    duration_s: float = 0.0
    log: str = ""
    log_path: str = ""
    log_tail: str = ""


class PackedTrajectory(BaseModel):
    """A rollout's token segments, packed (``durable_rollouts.policy.trajectory_packing``) into ``packed``: an ordinary payload,
    base64 in JSON, which Temporal's external storage keeps out of history when it is large.

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


class MergeRequest(BaseModel):
    session_id: str
    workflow_id: str


class MergeResult(BaseModel):
    trajectory: PackedTrajectory | None
    segments: list[SegmentSummary]
    turns: int
    staleness: StalenessReport | None = None
    finish: FinishReport = FinishReport()


class AgentProgress(BaseModel):
    """Sent by the running agent activity to its workflow (signal ``agent_progress``) when turns advance."""

    attempt: int
    session_id: str
    turns: int
    tokens: int
    last_turn_at: datetime | None = None
    last_tools: list[str] = []
    oldest_weight_version: str | None = None
    newest_weight_version: str | None = None
    # Output tokens the policy sampled over the session's turns (what an abandoned run throws away).
    sampled_tokens: int = 0


class DiscardedRun(BaseModel):
    """An agent run the rollout abandoned for a fresh one: its attempt, how far it had got (model turns, sampled
    tokens: work thrown away, never trained on) and why (``reason``: the host was lost, its session could not be
    resumed, ...)."""

    attempt: int
    turns: int
    sampled_tokens: int
    reason: str


class RolloutProgress(BaseModel):
    """What the ``progress`` query returns: where a rollout is and how far its agent got."""

    stage: RolloutStage = "queued"
    attempt: int = 0
    sandbox: str = ""
    host_queue: str = ""
    session_id: str = ""
    turns: int = 0
    tokens: int = 0
    last_turn_at: datetime | None = None
    last_tools: list[str] = []
    stage_since: datetime | None = None
    oldest_weight_version: str | None = None
    newest_weight_version: str | None = None
    # Output tokens sampled over the attempt's turns so far.
    sampled_tokens: int = 0
    # The task image's pull while the attempt boots on a host that lacks it (None once booted, or when none ran).
    image_pull: ImagePull | None = None


class RolloutResult(BaseModel):
    """The workflow always returns one (never a workflow failure): ``completed`` or ``aborted`` with a machine-readable reason.

    ``failed`` is made only by the starter, for a rollout it could not start or
    collect (``abort_reason`` says why, machine-readable; ``error`` has the
    message); the workflow may still be running, and a re-run with the same
    run id attaches to it. ``diff`` reports the agent's patch (what it left
    out, whether it was over the cap); None when no diff was taken.
    ``stopped_in`` / ``turns``: the stage a guard, abort or cancel stopped
    the run in, and the model calls its last attempt had made by then.
    ``finish``: what finishing the adapter session found in flight (turns
    waited for, turns aborted; ``FinishReport``), None when no merge ran.
    ``discarded``: the agent runs abandoned for a fresh attempt (``DiscardedRun``:
    turns and sampled tokens thrown away, and why), empty when none was; the
    interruptions the kept run lived through are ``agent.interruptions``.

    Weight versions, over the sampled tokens of all ``segments`` (in segment
    order, each in position order; tokens without a version skipped):
    ``oldest_weight_version`` and ``newest_weight_version`` (ordered as
    integers when every version is one, else by first appearance; None when
    no token has a version) and ``weight_version_changes``, the number of
    times the version differs from the one before.
    """

    workflow_id: str
    instance_id: str
    sample_index: int
    group_index: int
    status: Literal["completed", "aborted", "failed"]
    abort_reason: str | None = None
    error: str = ""
    reward: float = 0.0
    solved: bool = False
    applied_cleanly: bool = False
    attempts: int = 0
    agent: AgentRun | None = None
    evaluation: EvalResult | None = None
    trajectory: PackedTrajectory | None = None
    segments: list[SegmentSummary] = []
    elapsed_s: float = 0.0
    diff: DiffReport | None = None
    staleness: StalenessReport | None = None
    stopped_in: RolloutStage | None = None
    turns: int = 0
    finish: FinishReport | None = None
    discarded: list[DiscardedRun] = []

    def _weight_version_runs(self) -> list[str]:
        return collapse_runs(v for segment in self.segments for v in segment.weight_version_runs)

    def without_logs(self) -> RolloutResult:
        """This result with its agent and grading logs left empty (their sizes and tails stay): what a group's
        result holds of each sample, so K samples' logs never add up in one payload; each child's own result
        keeps them."""
        return self.model_copy(
            update={
                "agent": self.agent.model_copy(update={"log": ""}) if self.agent else None,
                "evaluation": self.evaluation.model_copy(update={"log": ""}) if self.evaluation else None,
            }
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def oldest_weight_version(self) -> str | None:
        order = order_weight_versions(self._weight_version_runs())
        return order[0] if order else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def newest_weight_version(self) -> str | None:
        order = order_weight_versions(self._weight_version_runs())
        return order[-1] if order else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def weight_version_changes(self) -> int:
        return max(len(self._weight_version_runs()) - 1, 0)
