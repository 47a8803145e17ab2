"""The agent run and the merge: the activities' inputs and outputs between the sandbox and the training sample.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

from pydantic import BaseModel

from durable_rollouts.contracts.sandboxes import SandboxHandle
from durable_rollouts.contracts.session import FinishReport, PolicySpec, StalenessReport
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.contracts.tokens import PackedTrajectory, SegmentSummary


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


class MergeRequest(BaseModel):
    session_id: str
    workflow_id: str


class MergeResult(BaseModel):
    trajectory: PackedTrajectory | None
    segments: list[SegmentSummary]
    turns: int
    staleness: StalenessReport | None = None
    finish: FinishReport = FinishReport()
