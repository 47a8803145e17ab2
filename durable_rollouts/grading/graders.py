"""Grade a patch in a fresh sandbox booted from the task image (never the agent's).

``evaluate`` boots a grading sandbox (purpose "grading": the same image, ``before_repo_set_cmd`` and
pre-commands, no ``PROBLEM_STATEMENT.md``), applies the diff on the apply ladder, puts the task's tests back to
the image's baseline (``task_tests``), runs the task's grader under this grading's guard and returns the result
with the whole grading log (``Graded``). docs/rollouts.md (*Grading*, *Grading logs*) gives the ladder, the
graders' order and the log; docs/grading.md what a grading is held to and how tampering is judged.

Invariants:

* The grading sandbox is always destroyed, whatever happens; the tests that run are the task's, whatever the
  diff did (``reset_paths`` names what it had changed there). ``reward`` is 1.0 iff ``solved``, except that a
  Harbor verifier's reward is its own.
* Once the diff applied, any failure of the grading is the patch's outcome: reward 0 with ``grading_error``,
  never an exception, unless the Docker engine itself no longer answers. Only what fails before the patch
  touched anything raises (infrastructure).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from durable_rollouts.contracts.grading import EvalRequest, EvalResult
from durable_rollouts.contracts.probes import ProbeFlip, ProbeVerdict
from durable_rollouts.contracts.sandboxes import ImagePull, SandboxHandle, SandboxRequest
from durable_rollouts.contracts.tasks import GraderKind, SweProSpec, TaskSpec
from durable_rollouts.docker_sandbox import git_workspace
from durable_rollouts.docker_sandbox.commands import ExecResult
from durable_rollouts.docker_sandbox.disk_watch import DiskWatch
from durable_rollouts.docker_sandbox.errors import SandboxError
from durable_rollouts.docker_sandbox.files import SandboxFile, files_step
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.docker_sandbox.shell_scripts import ShellScript
from durable_rollouts.grading import (
    baselines,
    diff_paths,
    harbor_verifier,
    patch_screen,
    probe_verdicts,
    python_envs,
    run_guard,
    run_record,
    shadowing,
    swebench,
    tamper_checks,
    task_tests,
)
from durable_rollouts.grading.grading_log import (
    FULL_LOG_BYTES,
    LOG_TAIL_BYTES,
    applied_cleanly,
    last_bytes,
    log_tail,
    read_log,
)
from durable_rollouts.grading.pytest_summary import PYTEST_SUMMARY
from durable_rollouts.grading.run_guard import Guard
from durable_rollouts.grading.run_record import RunRecord, own_sessions
from durable_rollouts.grading.session_reports import SessionReport
from durable_rollouts.grading.tamper_checks import Claims

APPLY_TIMEOUT_S = 120.0
# The exec before the tests: two listings, the tests' snapshot and the ladder's first rung.
BEFORE_TESTS_TIMEOUT_S = 2 * shadowing.LIST_TIMEOUT_S + task_tests.RESET_TIMEOUT_S + APPLY_TIMEOUT_S
GRADING_LIFETIME_SLACK_S = 1800
GRADE_JOB = "grade"
PATCH_FILE = git_workspace.harness_file("agent.patch")
SWEPRO_DIR = "/tmp/swepro_eval"
SWEBENCH_SCRIPT = git_workspace.harness_file("swebench_eval.sh")
# What a swepro grading's log keeps of its stderr, its parser's errors and its result.json, each (its stdout may fill
# the log).
SIDE_LOG_BYTES = FULL_LOG_BYTES // 8

_THREE_WAY = "git apply --3way"
_APPLY = ShellScript("durable_rollouts.grading", "evaluate_apply.sh")
APPLY_LADDER = (
    (_THREE_WAY, task_tests.GIT_SAFE_CONFIG + _APPLY.invocation("3way", PATCH_FILE)),
    ("git apply", task_tests.GIT_SAFE_CONFIG + _APPLY.invocation("apply", PATCH_FILE)),
    ("patch --fuzz=3", task_tests.GIT_SAFE_CONFIG + _APPLY.invocation("patch", PATCH_FILE)),
)
# Run in the same exec before the three-way rung; RESTORE_BASELINE undoes a conflicted three-way apply.
PREPARE_APPLY = task_tests.GIT_SAFE_CONFIG + git_workspace.BACKUP_SCRIPT.invocation(*git_workspace.backup_args())
RESTORE_BASELINE = task_tests.GIT_SAFE_CONFIG + git_workspace.RESTORE_SCRIPT.invocation(*git_workspace.restore_args())
# Run detached as root with SWEPRO_TEST_FILES in its environment.
SWEPRO_COMMAND = ShellScript("durable_rollouts.grading", "evaluate_swepro.sh").invocation(SWEPRO_DIR)


def _ignore_phase(phase: str) -> None:
    """Default progress callback."""


class _TestCounts(TypedDict, total=False):
    """The ``EvalResult`` test counts a grader could read (none when it could read none)."""

    tests_passed: int
    tests_failed: int


def _result(grader: GraderKind, solved: bool, method: str, log: str, note: str = "", **counts: int) -> EvalResult:
    """The result; ``log_tail`` is the end of ``log`` followed by the whole of ``note``, within ``LOG_TAIL_BYTES``.
    Applied cleanly iff a rung of the ladder applied a patch (``method`` neither "" nor "empty")."""
    return EvalResult(
        reward=1.0 if solved else 0.0,
        solved=solved,
        applied_cleanly=applied_cleanly(method),
        grader=grader,
        apply_method=method,
        log_tail=log_tail(log, note),
        **counts,
    )


@dataclass(frozen=True)
class Graded:
    """A grading's result and its whole log (at most ``FULL_LOG_BYTES`` of UTF-8)."""

    result: EvalResult
    log: str


@dataclass(frozen=True)
class _GraderRun:
    """What a grader found: the result (``log_tail`` from its output), its whole output (note included), and
    what it concluded by its own means (checked against the run's reports, ``tamper_checks``)."""

    result: EvalResult
    output: str
    claims: Claims


def _full_log(apply_log: str, reset: list[str] | None, grader_output: str) -> str:
    """The grading log: the apply ladder, the test files reset, the grader's output; cut to ``FULL_LOG_BYTES``."""
    parts = [f"[apply]\n{apply_log}"]
    if reset is not None:
        parts.append("[reset] task tests put back to the baseline: " + (", ".join(reset) if reset else "none changed"))
    parts.append(grader_output)
    log = "\n".join(parts)
    if len(log.encode()) <= FULL_LOG_BYTES:
        return log
    cut = f"[grading log cut: only its last {FULL_LOG_BYTES:,} bytes are kept]\n"
    return cut + last_bytes(log, FULL_LOG_BYTES - len(cut))


class NoGrader(Exception):
    """The task names no grader."""


class GraderScriptMissing(Exception):
    """A ``swepro`` task lacks its run or parser script."""


class ScriptPathRefused(swebench.NotEvaluable):
    """A ``swepro`` task names a host path for a script: the worker reads no host file a row names."""


def _swepro_scripts(task: TaskSpec) -> tuple[str, str]:
    """The inline run and parser scripts; a task naming a host path for either is refused, nothing is read."""
    spec = task.swepro
    assert spec is not None, "the task's grader is swepro"
    for field, path in (("run_script_path", spec.run_script_path), ("parser_script_path", spec.parser_script_path)):
        if path:
            raise ScriptPathRefused(
                f"task {task.instance_id}: swepro.{field}: a worker reads no host path a row names;"
                " read the row with task_sources.dataset_rows (it inlines the script from the dataset root)",
            )
    if not spec.run_script:
        raise GraderScriptMissing(f"task {task.instance_id}: swepro.run_script is missing")
    if not spec.parser_script:
        raise GraderScriptMissing(f"task {task.instance_id}: swepro.parser_script is missing")
    return spec.run_script, spec.parser_script


def _patch_file(diff: str) -> list[SandboxFile]:
    """The diff as the ladder reads it (``PATCH_FILE``, newline-terminated); nothing for an empty diff."""
    return [SandboxFile(PATCH_FILE, diff if diff.endswith("\n") else diff + "\n")] if diff.strip() else []


async def _apply(
    sandboxes: DockerSandboxes, handle: SandboxHandle, diff: str, three_way: ExecResult | None
) -> tuple[str | None, str]:
    """Walk the apply ladder over ``PATCH_FILE`` (already written) from its first rung's result (``three_way``,
    run after ``PREPARE_APPLY``); returns (the rung that applied, "empty" or None; the rungs' output)."""
    if not diff.strip():
        return "empty", "empty diff: nothing to apply"
    assert three_way is not None, "a diff's first rung ran in the exec before the tests"
    failures: list[str] = []
    for rung, (method, command) in enumerate(APPLY_LADDER):
        result = (
            three_way if rung == 0 else await sandboxes.exec(handle, command, user="root", timeout_s=APPLY_TIMEOUT_S)
        )
        if result.exit_code == 0:
            return method, "\n".join([*failures, f"$ {method}\n{result.output.strip()}".strip(), "applied"])
        failures.append(f"$ {method}\n{result.output.strip()}")
        if method == _THREE_WAY:  # a conflicted three-way merge is rolled back before the next rung
            restore = await sandboxes.exec(handle, RESTORE_BASELINE, user="root", timeout_s=APPLY_TIMEOUT_S)
            if restore.exit_code != 0:
                failures.append(f"$ restore baseline\n{restore.output.strip()}")
                break
    return None, "\n".join(failures)


@dataclass(frozen=True)
class GraderBounds:
    """What one grading run may spend: wall-clock seconds, and bytes written to the sandbox since boot (0 =
    unbounded)."""

    timeout_s: float
    disk_bytes: int = 0


async def _run_grader(
    sandboxes: DockerSandboxes,
    handle: SandboxHandle,
    command: str,
    env: dict[str, str],
    bounds: GraderBounds,
    guard: Guard,
) -> tuple[int | None, str]:
    """Run the grading command detached as root after the guard's prelude: its exit code and "", or None and why
    it was killed (its timeout, or the sandbox's disk budget: the task's tests run the agent's code, which may
    fill the disk)."""
    async with DiskWatch(sandboxes, handle, bounds.disk_bytes) as disk:
        code = await disk.first(
            sandboxes.run_detached(handle, GRADE_JOB, guard.prelude + command, bounds.timeout_s, user="root", env=env)
        )
    if code is not None:
        return code, ""
    await sandboxes.kill_detached(handle, GRADE_JOB)
    if disk.exceeded:
        return (
            None,
            f"\n[grader stopped: the sandbox wrote {disk.used:,} bytes, over its disk budget of {bounds.disk_bytes:,}]",
        )
    return None, f"\n[grader timed out after {bounds.timeout_s:g} s and was killed]"


def _pytest_counts(output: str) -> _TestCounts:
    """Best-effort test counts from the last pytest summary line ("2 failed, 6 passed in 0.6s")."""
    summaries = [m.group(1) for line in output.splitlines() if (m := PYTEST_SUMMARY.match(line.strip()))]
    if not summaries:
        return {}
    counts = {word: int(number) for number, word in re.findall(r"(\d+) (\w+)", summaries[-1])}
    failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
    return {"tests_passed": counts.get("passed", 0), "tests_failed": failed}


async def _grade_eval_cmd(
    sandboxes: DockerSandboxes, handle: SandboxHandle, task: TaskSpec, bounds: GraderBounds, guard: Guard, method: str
) -> _GraderRun:
    code, killed = await _run_grader(sandboxes, handle, "exec 2>&1\n" + (task.eval_cmd or ""), {}, bounds, guard)
    output = await read_log(sandboxes, handle, git_workspace.detached_output(GRADE_JOB))
    whole = f"[grader eval_cmd]\n{output}"
    if code is None:
        return _GraderRun(_result("eval_cmd", False, method, output, killed), whole + killed, Claims(solved=False))
    result = _result("eval_cmd", code == 0, method, output, **_pytest_counts(output))
    claims = Claims(
        solved=code == 0, exit_code=code, exit_from_pytest=tamper_checks.exit_is_pytests(task.eval_cmd or "")
    )
    return _GraderRun(result, f"{whole}\n[eval_cmd exit {code}]", claims)


def _swepro_outcome(raw: str, spec: SweProSpec) -> tuple[bool, frozenset[str], int, str]:
    """(solved, the tests passed, how many failed, problem) from result.json text; problem is "" when it parsed."""
    try:
        tests = json.loads(raw)["tests"]
        statuses = {str(test["name"]): str(test["status"]) for test in tests}
    except (ValueError, KeyError, TypeError) as error:
        return False, frozenset(), 0, f"result.json unusable: {error!r}"
    passed = frozenset(name for name, status in statuses.items() if status == "PASSED")
    failed = sum(status in ("FAILED", "ERROR") for status in statuses.values())
    required = set(spec.fail_to_pass) | set(spec.pass_to_pass)
    missing = sorted(required - passed)
    problem = f"required tests not passed: {missing[:20]}" if missing else ""
    return bool(required) and not missing, passed, failed, problem


async def _grade_swepro(
    sandboxes: DockerSandboxes, handle: SandboxHandle, spec: SweProSpec, bounds: GraderBounds, guard: Guard, method: str
) -> _GraderRun:
    """Run the row's scripts (written with the diff: ``_Scripts.files``) and judge ``result.json``."""
    env = {"SWEPRO_TEST_FILES": ",".join(spec.selected_test_files)}
    code, killed = await _run_grader(sandboxes, handle, SWEPRO_COMMAND, env, bounds, guard)
    stdout = await read_log(sandboxes, handle, f"{SWEPRO_DIR}/stdout.log")
    stderr = await read_log(sandboxes, handle, f"{SWEPRO_DIR}/stderr.log", SIDE_LOG_BYTES)
    parser_err = await read_log(sandboxes, handle, git_workspace.detached_errors(GRADE_JOB), SIDE_LOG_BYTES)
    log = stdout + (f"\n[stderr]\n{last_bytes(stderr, LOG_TAIL_BYTES // 4)}" if stderr.strip() else "")
    whole = f"[grader swepro: stdout]\n{stdout}\n[swepro stderr]\n{stderr}\n[swepro parser errors]\n{parser_err}"
    if code is None:
        return _GraderRun(_result("swepro", False, method, log, killed), whole + killed, Claims(solved=False))
    try:
        raw = (await sandboxes.read_file(handle, f"{SWEPRO_DIR}/result.json", 64 << 20)).decode(
            "utf-8", errors="replace"
        )
    except (FileNotFoundError, IsADirectoryError):
        raw = ""
    solved, passed, failed, problem = _swepro_outcome(raw, spec)
    note = ""
    if problem:
        note = f"\n[{problem}]" + (
            f"\n[parser]\n{last_bytes(parser_err, LOG_TAIL_BYTES // 4)}" if parser_err.strip() else ""
        )
    result = _result("swepro", solved, method, log, note, tests_passed=len(passed), tests_failed=failed)
    shown = raw if len(raw) <= SIDE_LOG_BYTES else f"({len(raw):,} characters: too long to copy into the log)"
    required = frozenset(spec.fail_to_pass) | frozenset(spec.pass_to_pass)
    return _GraderRun(
        result, f"{whole}\n[swepro result.json]\n{shown}{note}", Claims(solved=solved, passed=passed & required)
    )


async def _grade_swebench(
    sandboxes: DockerSandboxes, handle: SandboxHandle, task: TaskSpec, bounds: GraderBounds, guard: Guard, method: str
) -> _GraderRun:
    """Run the SWE-bench eval script (written with the diff: ``_Scripts.files``) and judge its log."""
    code, killed = await _run_grader(sandboxes, handle, f"exec 2>&1\nbash {SWEBENCH_SCRIPT}", {}, bounds, guard)
    log = await read_log(sandboxes, handle, git_workspace.detached_output(GRADE_JOB))
    whole = f"[grader swebench: eval log]\n{log}"
    if code is None:
        return _GraderRun(_result("swebench", False, method, log, killed), whole + killed, Claims(solved=False))
    verdict = await asyncio.to_thread(swebench.verdict, task, log)
    note = f"\n[{verdict.note}]" if verdict.note else ""
    result = _result(
        "swebench",
        verdict.solved,
        method,
        log,
        note,
        tests_passed=verdict.tests_passed,
        tests_failed=verdict.tests_failed,
    )
    return _GraderRun(result, whole + note, Claims(solved=verdict.solved, passed=verdict.passed))


def _report_counts(reports: list[SessionReport]) -> _TestCounts:
    """Test counts from the grader's own reports (the task's tests, each once), when any session reported."""
    outcomes = run_record.record(reports).outcomes
    if not outcomes:
        return {}
    failed = sum(outcome in ("failed", "error") for outcome in outcomes.values())
    return {"tests_passed": sum(outcome in run_record.PASSING for outcome in outcomes.values()), "tests_failed": failed}


def _commands(task: TaskSpec, swebench_script: str | None) -> list[str]:
    """The texts of what the row's grader runs (for ``tamper_checks.pytest_expected``)."""
    if task.harbor is not None:
        return [
            base64.b64decode(test.data_b64).decode("utf-8", errors="replace")
            for test in task.harbor.tests
            if test.path == "test.sh"
        ]
    swebench_command = tamper_checks.swebench_test_command(swebench_script) if swebench_script else ""
    return [task.eval_cmd or "", (task.swepro.run_script or "") if task.swepro else "", swebench_command]


def _checked(run: _GraderRun, reports: list[SessionReport], expected: bool, baseline: RunRecord | None) -> _GraderRun:
    """The run as the tamper checks leave it, judged against the row's ``baseline``: tampered (reward 0, the evidence
    in the result, its log tail and its log) or not (a line saying what was checked); an ``eval_cmd`` run's counts
    from the reports."""
    evidence = tamper_checks.judge(reports, run.claims, expected=expected, baseline=baseline)
    sessions = len(own_sessions(reports))
    result = run.result.model_copy(update={"pytest_sessions": sessions, "tampered": evidence})
    if result.grader == "eval_cmd":
        result = result.model_copy(update=_report_counts(reports))
    if not evidence:
        line = (
            f"[tamper check: {sessions} pytest sessions reported, canaries as expected]"
            if sessions
            else "[tamper check: no pytest session reported]"
        )
        against = (
            f"[judged against the baseline: {len(baseline.outcomes)} tests on the unpatched tree]"
            if baseline is not None
            else ""
        )
        return _GraderRun(result, "\n".join(filter(None, [run.output, line, against])), run.claims)
    return _tampered(_GraderRun(result, run.output, run.claims), evidence)


def _probed(run: _GraderRun, verdict: ProbeVerdict) -> _GraderRun:
    """A probe's run: reward 0 and not solved whatever its tests said, the verdict in the result, its log
    tail and its log."""
    note = f"\n[impossible-task probe: {verdict.verdict}] {verdict.note}"
    update = {"reward": 0.0, "solved": False, "probe": verdict, "log_tail": log_tail(run.result.log_tail, note)}
    return _GraderRun(run.result.model_copy(update=update), run.output + note, run.claims)


@dataclass(frozen=True)
class _Scripts:
    """What a row's grader runs besides its ``eval_cmd``, read before any container boots."""

    swepro: tuple[str, str] | None = None
    swebench: str | None = None

    def files(self) -> list[SandboxFile]:
        """The scripts as the graders run them, written with the diff (no agent code has run by then)."""
        written = []
        if self.swepro is not None:
            run_script, parser_script = self.swepro
            written += [
                SandboxFile(f"{SWEPRO_DIR}/run_script.sh", run_script, mode=0o755),
                SandboxFile(f"{SWEPRO_DIR}/parser.py", parser_script),
            ]
        if self.swebench is not None:
            written.append(SandboxFile(SWEBENCH_SCRIPT, self.swebench, mode=0o755))
        return written


async def _grade(
    sandboxes: DockerSandboxes,
    handle: SandboxHandle,
    task: TaskSpec,
    guard: Guard,
    bounds: GraderBounds,
    method: str,
    scripts: _Scripts,
) -> _GraderRun:
    """Run the task's grader (the diff applied, the protected paths reset, the guard installed)."""
    if task.harbor is not None:
        verifier = functools.partial(_run_grader, sandboxes, handle, bounds=bounds, guard=guard)
        result, output = await harbor_verifier.grade(sandboxes, handle, task.harbor, method, verifier)
        # A Harbor test.sh turns pytest's status into the reward: a reward of 1 means every test passed.
        return _GraderRun(result, output, Claims(solved=result.solved, all_passed=True))
    if scripts.swepro is not None:
        assert task.swepro is not None, "scripts.swepro is read from it"
        return await _grade_swepro(sandboxes, handle, task.swepro, bounds, guard, method)
    if scripts.swebench is not None:
        return await _grade_swebench(sandboxes, handle, task, bounds, guard, method)
    return await _grade_eval_cmd(sandboxes, handle, task, bounds, guard, method)


@dataclass(frozen=True)
class _Sandbox:
    """One grading sandbox as the grader prepared it: its guard, its Pythons, the row's scripts and the bounds of its
    run."""

    sandboxes: DockerSandboxes
    handle: SandboxHandle
    task: TaskSpec
    guard: Guard
    envs: python_envs.PythonEnvs
    scripts: _Scripts
    bounds: GraderBounds


@dataclass(frozen=True)
class _BeforeTests:
    """The one exec before the tests, by step (``None``: not asked for, or not reached after a step that failed)."""

    written: ExecResult | None  # the files, when small enough to travel as the exec's argument
    entries_before: ExecResult | None  # the import roots' entries before the diff
    recorded: ExecResult | None  # the protected paths' snapshot
    first_rung: ExecResult | None  # the apply ladder's first rung
    entries_after: ExecResult | None  # the entries after that rung

    @classmethod
    def of(cls, results: list[ExecResult], wrote: bool, applying: bool) -> _BeforeTests:
        names = [*(["written"] if wrote else []), "entries_before"]
        names += ["recorded", "first_rung", "entries_after"] if applying else []
        found = dict(zip(names, results, strict=False))
        return cls(*(found.get(name) for name in cls.__dataclass_fields__))


async def _patched_run(
    sandbox: _Sandbox,
    method: str,
    before: frozenset[str],
    steps: _BeforeTests,
    protected: list[str],
    report: Callable[[str], None],
) -> tuple[_GraderRun, list[str], list[SessionReport]]:
    """After the diff applied: the protected paths and shadowing modules put back, the grader run, its reports read."""
    sandboxes, handle = sandbox.sandboxes, sandbox.handle
    report("reset")
    reset: list[str] = []
    if method != "empty":
        after = (
            shadowing.entries_from(handle, steps.entries_after)
            if method == _THREE_WAY and steps.entries_after is not None
            else await shadowing.entries(sandboxes, handle, sandbox.envs)
        )
        shadows = shadowing.shadowing(before, after, sandbox.envs)
        reset = await task_tests.reset(sandboxes, handle, protected + shadowing.pathspecs(shadows))
    report("test")
    run = await _grade(sandboxes, handle, sandbox.task, sandbox.guard, sandbox.bounds, method, sandbox.scripts)
    return run, reset, await run_guard.reports(sandboxes, handle, sandbox.guard)


async def _baseline_record(sandboxes: DockerSandboxes, request: EvalRequest, scripts: _Scripts) -> RunRecord:
    """The row's grading of its unpatched tree, in a grading sandbox of its own (booted alike, no diff), as recorded."""
    task = request.task
    handle = await sandboxes.boot(
        # Labelled with the grading's own workflow, as its sandbox is: the reaper keeps a running workflow's sandboxes.
        SandboxRequest(
            task=task,
            workflow_id=request.workflow_id,
            attempt=0,
            purpose="grading",
            pull_timeout_s=request.pull_timeout_s,
        ),
        lifetime_s=request.timeout_s + GRADING_LIFETIME_SLACK_S,
    )
    try:
        envs = await python_envs.probe(sandboxes, handle, task)
        guard, guard_files = run_guard.prepare(envs, handle.workdir)
        if files := [*guard_files, *scripts.files()]:
            await sandboxes.write_files(handle, files)
        bounds = GraderBounds(timeout_s=request.timeout_s, disk_bytes=sandboxes.limits_for(task).disk_bytes)
        await _grade(sandboxes, handle, task, guard, bounds, "empty", scripts)
        return run_record.record(await run_guard.reports(sandboxes, handle, guard))
    finally:
        await sandboxes.destroy(handle)


async def _baseline(
    sandboxes: DockerSandboxes, handle: SandboxHandle, request: EvalRequest, scripts: _Scripts
) -> RunRecord:
    """The row's baseline on the image ``handle`` runs: remembered, or recorded now (``baselines``)."""
    image, _ = await sandboxes.image_and_env(handle.container_id)
    return await baselines.baseline(
        image, request.task, functools.partial(_baseline_record, sandboxes, request, scripts)
    )


def _tampered(run: _GraderRun, evidence: list[str]) -> _GraderRun:
    """``run`` flagged tampered with ``evidence``: reward 0, the evidence in the result, its log tail and its log."""
    note = "\n[tampered: reward 0]\n" + "\n".join(f"[tampered] {line}" for line in evidence)
    update = {"reward": 0.0, "solved": False, "tampered": evidence, "log_tail": log_tail(run.result.log_tail, note)}
    return _GraderRun(run.result.model_copy(update=update), run.output + note, run.claims)


def _crashed(grader: GraderKind, method: str, error: Exception) -> _GraderRun:
    """A grading that failed after the patch applied: the patch's outcome, reward 0, with the failure as its reason."""
    reason = f"{type(error).__name__}: {str(error)[:2000]}"
    note = f"\n[grading failed after the patch applied: reward 0] {reason}"
    result = _result(grader, False, method, "", note).model_copy(update={"grading_error": reason})
    return _GraderRun(result, note.lstrip("\n"), Claims(solved=False))


async def evaluate(
    sandboxes: DockerSandboxes,
    request: EvalRequest,
    *,
    report: Callable[[str], None] = _ignore_phase,
    on_pull: Callable[[ImagePull], None] | None = None,
) -> Graded:
    """Grade ``request.diff`` in a fresh grading sandbox booted with ``sandboxes``' settings: the result and
    the whole grading log; ``report`` hears each phase (boot, apply, reset, test), ``on_pull`` the progress of
    a pull of the task image the boot needs (within ``request.pull_timeout_s``). The static screen's hits are
    added to the result and the log; they do not change the reward."""
    screened = await asyncio.to_thread(patch_screen.screen, request.diff)
    graded = await _graded(sandboxes, request, report, on_pull)
    if not screened:
        return graded
    note = f"[static screen of the patch: {len(screened)} hits, a signal, not a verdict]\n" + "\n".join(
        f"[screen] {line}" for line in screened
    )
    return Graded(graded.result.model_copy(update={"screen": screened}), f"{graded.log}\n{note}")


async def _graded(
    sandboxes: DockerSandboxes,
    request: EvalRequest,
    report: Callable[[str], None],
    on_pull: Callable[[ImagePull], None] | None,
) -> Graded:
    """``evaluate`` but for the screen."""
    task = request.task
    grader = task.grader
    if grader is None:
        raise NoGrader(f"task {task.instance_id} has no grader")
    scripts = _Scripts(
        swepro=_swepro_scripts(task) if grader == "swepro" else None,
        swebench=await swebench.require_eval_script(task) if grader == "swebench" else None,
    )
    protected = task_tests.pathspecs(task)
    refusal = diff_paths.refused(request.diff)
    report("boot")
    handle = await sandboxes.boot(
        SandboxRequest(
            task=task,
            workflow_id=request.workflow_id,
            attempt=0,
            purpose="grading",
            pull_timeout_s=request.pull_timeout_s,
        ),
        lifetime_s=request.timeout_s + GRADING_LIFETIME_SLACK_S,
        on_pull=on_pull,
    )
    baseline: asyncio.Future[RunRecord] | None = None
    try:
        report("apply")
        flip: ProbeFlip | str | None = (
            await probe_verdicts.flip_of(sandboxes, handle, task) if task.probe is not None else None
        )
        envs = await python_envs.probe(sandboxes, handle, task)
        guard, guard_files = run_guard.prepare(envs, handle.workdir)
        if guard.active:
            baseline = asyncio.ensure_future(_baseline(sandboxes, handle, request, scripts))
        files = [*_patch_file(request.diff), *guard_files, *scripts.files()]
        write_step = files_step(files) if files else None
        if files and write_step is None:
            await sandboxes.write_files(handle, files)
        # One exec: the files (when small enough to be its argument), the import roots' entries before the diff;
        # with a diff, then the tests' snapshot, the ladder's first rung and the entries after it, stopping at the
        # first that fails.
        listing = shadowing.listing(envs)
        applying = (
            [task_tests.record_script(protected), PREPARE_APPLY + APPLY_LADDER[0][1], listing]
            if request.diff.strip() and not refusal
            else []
        )
        results = await sandboxes.exec_steps(
            handle,
            [*([write_step] if write_step else []), listing, *applying],
            user="root",
            timeout_s=BEFORE_TESTS_TIMEOUT_S,
        )
        steps = _BeforeTests.of(results, wrote=write_step is not None, applying=bool(applying))
        if steps.written is not None and steps.written.exit_code != 0:
            raise SandboxError(
                f"could not write {', '.join(file.path for file in files)} in {handle.name}: "
                f"{steps.written.output.strip()[-2000:]}"
            )
        assert steps.entries_before is not None, "the listing runs once the files are written"
        before = shadowing.entries_from(handle, steps.entries_before)
        if steps.recorded is not None:
            task_tests.check_recorded(handle, steps.recorded)
        if refusal:
            method, apply_log = (
                None,
                "refused: no rung applies a diff that writes outside the workdir's tracked tree\n" + "\n".join(refusal),
            )
        else:
            method, apply_log = await _apply(sandboxes, handle, request.diff, steps.first_rung)
        if method is None:
            unapplied = _GraderRun(
                _result(grader, False, "", apply_log), "[no rung applied the diff: not graded]", Claims(solved=False)
            )
            if refusal:
                unapplied = _tampered(unapplied, [f"the diff names {line}" for line in refusal])
            if flip is not None:
                unapplied = _probed(unapplied, probe_verdicts.judge(task, grader, flip, False, bool(refusal), {}))
            return Graded(unapplied.result, _full_log(apply_log, None, unapplied.output))
        # From here on the patch has touched the tree: whatever fails is the patch's outcome, unless the engine is gone.
        bounds = GraderBounds(timeout_s=request.timeout_s, disk_bytes=sandboxes.limits_for(task).disk_bytes)
        sandbox = _Sandbox(sandboxes, handle, task, guard, envs, scripts, bounds)
        try:
            run, reset, reports = await _patched_run(sandbox, method, before, steps, protected, report)
        except Exception as error:  # noqa: BLE001
            # Any failure the patch may have caused scores 0 (see the module docstring).
            if not await sandboxes.engine_answers():
                raise
            run, reset, reports = _crashed(grader, method, error), [], []
        expected = guard.active and tamper_checks.pytest_expected(*_commands(task, scripts.swebench))
        recorded = await baseline if baseline is not None else None
        if not run.result.grading_error:
            run = await asyncio.to_thread(
                _checked, run, reports, expected, recorded
            )  # thousands of tests: judged off the event loop
        if flip is not None:
            outcomes = run_record.record(reports).outcomes
            before_outcomes = recorded.outcomes if recorded is not None else None
            verdict = probe_verdicts.judge(
                task, grader, flip, run.claims.solved, bool(run.result.tampered), outcomes, before_outcomes
            )
            run = _probed(run, verdict)
        log = await asyncio.to_thread(
            _full_log, apply_log, reset, run.output
        )  # up to 64 MiB: encoded and cut off the event loop
        return Graded(run.result.model_copy(update={"reset_paths": reset}), log)
    finally:
        if baseline is not None and not baseline.done():
            baseline.cancel()
        await sandboxes.destroy(handle)
