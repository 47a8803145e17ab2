"""The diff an agent leaves and its grading: what is captured, what the grader is asked and what it returns.

Imports nothing heavier than pydantic: workflow code imports it through ``workflow.unsafe.imports_passed_through()``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from durable_rollouts.contracts.probes import ProbeVerdict
from durable_rollouts.contracts.sandboxes import DEFAULT_PULL_TIMEOUT_S
from durable_rollouts.contracts.tasks import GraderKind, TaskSpec


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
    UTF-8, at most ``durable_rollouts.grading.grading_log.FULL_LOG_BYTES``), travelling as a payload; a results file
    writes it to the file ``log_path`` names and leaves ``log`` empty.

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
