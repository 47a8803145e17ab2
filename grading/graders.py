"""Grade a patch in a fresh sandbox booted from the task image (never the agent's).

Invariants:

* The grading container is booted with purpose "grading" (same image, same
  ``before_repo_set_cmd`` and pre-commands, no ``PROBLEM_STATEMENT.md``) and
  is always destroyed, whatever happens.
* After the diff applied and before any grader runs, the task's tests
  (``grading.task_tests``: the row's ``test_files`` or the default test
  paths, test-runner configuration, a ``swepro`` row's
  ``selected_test_files``) are put back to the image's baseline, added files
  removed; ``reset_paths`` lists what the diff had changed there. Every
  grader kind runs exactly the task's tests (a SWE-bench eval script then
  also resets its test files to ``base_commit`` and applies ``test_patch``).
* Apply ladder, first success wins: ``git apply --3way``, ``git apply``,
  ``patch -p1 --fuzz=3``. A conflicted three-way merge is rolled back to the
  workspace baseline before the next rung. An empty diff is graded as is; a
  diff no rung applies is a result (reward 0, ``applied_cleanly=False``),
  not an error.
* Graders, in priority order: ``swepro`` (run script + parser → result.json;
  solved iff the non-empty ``fail_to_pass ∪ pass_to_pass`` all passed), then
  ``eval_cmd`` (a shell script, run from a file; exit 0 = solved), then
  ``swebench`` (the ``swebench`` package's eval script, its log parser and
  report: solved iff RESOLVED_FULL). Graders run as root, detached, bounded by
  ``timeout_s`` and by the sandbox's disk budget (the tests run the agent's
  code; usage is watched as in the agent sandbox, ``disk_watch``); past either
  they are killed and the result is reward 0 with a note in ``log_tail``.
* ``reward`` is 1.0 iff ``solved``. A task without a grader is a
  ``NoGrader`` (the activity reports it non-retryable); a SWE-bench row this
  worker cannot grade (no ``swebench`` package, no test spec for the row) is
  a non-retryable ``NotEvaluable``, raised before any container boots; so is
  a ``swepro`` task that names a script by host path: the worker never reads
  a host file a row names (the dataset reader inlines scripts from the
  operator's dataset root).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from contracts.rollout import (
    EvalRequest,
    EvalResult,
    GraderKind,
    SandboxHandle,
    SandboxRequest,
    SweProSpec,
    TaskSpec,
)
from docker_sandbox import git_workspace
from docker_sandbox.disk_watch import DiskWatch
from docker_sandbox.files import SandboxFile
from docker_sandbox.sandboxes import DockerSandboxes
from docker_sandbox.shell_scripts import ShellScript
from grading import swebench, task_tests

LOG_TAIL_BYTES = 4096
APPLY_TIMEOUT_S = 120.0
GRADING_LIFETIME_SLACK_S = 1800
GRADE_JOB = "grade"
PATCH_FILE = git_workspace.harness_file("agent.patch")
SWEPRO_DIR = "/tmp/swepro_eval"
SWEBENCH_SCRIPT = git_workspace.harness_file("swebench_eval.sh")
SWEBENCH_LOG_BYTES = 32 << 20

_THREE_WAY = "git apply --3way"
_APPLY = ShellScript("grading", "evaluate_apply.sh")
APPLY_LADDER = (
    (_THREE_WAY, _APPLY.invocation("3way", PATCH_FILE)),
    ("git apply", _APPLY.invocation("apply", PATCH_FILE)),
    ("patch --fuzz=3", _APPLY.invocation("patch", PATCH_FILE)),
)
# Run in the same exec before the three-way rung; RESTORE_BASELINE undoes a conflicted three-way apply.
PREPARE_APPLY = git_workspace.BACKUP_SCRIPT.invocation(*git_workspace.backup_args())
RESTORE_BASELINE = git_workspace.RESTORE_SCRIPT.invocation(*git_workspace.restore_args())
# Run detached as root with SWEPRO_TEST_FILES in its environment.
SWEPRO_COMMAND = ShellScript("grading", "evaluate_swepro.sh").invocation(SWEPRO_DIR)

_PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b")


def _ignore_phase(phase: str) -> None:
    """Default progress callback."""


def _last(text: str, limit: int) -> str:
    return text[-limit:] if limit > 0 else ""


def _result(grader: GraderKind, solved: bool, applied: bool, method: str, log: str, note: str = "", **counts: int) -> EvalResult:
    """The result; ``log_tail`` is the end of ``log`` followed by the whole of ``note``, within ``LOG_TAIL_BYTES``."""
    return EvalResult(
        reward=1.0 if solved else 0.0,
        solved=solved,
        applied_cleanly=applied,
        grader=grader,
        apply_method=method,
        log_tail=_last(log, LOG_TAIL_BYTES - len(note)) + note,
        **counts,
    )


class NoGrader(Exception):
    """The task names no grader."""


class GraderScriptMissing(Exception):
    """A ``swepro`` task lacks its run or parser script."""


class ScriptPathRefused(swebench.NotEvaluable):
    """A ``swepro`` task names a host path for a script: the worker reads no host file a row names."""


def _swepro_scripts(task: TaskSpec) -> tuple[str, str]:
    """The inline run and parser scripts; a task naming a host path for either is refused, nothing is read."""
    spec = task.swepro
    for field, path in (("run_script_path", spec.run_script_path), ("parser_script_path", spec.parser_script_path)):
        if path:
            raise ScriptPathRefused(
                f"task {task.instance_id}: swepro.{field}: a worker reads no host path a row names;"
                " read the row with task_sources.dataset_rows (it inlines the script from the dataset root)",
            )
    for field, script in (("run_script", spec.run_script), ("parser_script", spec.parser_script)):
        if not script:
            raise GraderScriptMissing(f"task {task.instance_id}: swepro.{field} is missing")
    return spec.run_script, spec.parser_script


async def _apply(sandboxes: DockerSandboxes, handle: SandboxHandle, diff: str) -> tuple[str | None, str]:
    """Walk the apply ladder; returns (the rung that applied or None, the failed rungs' output)."""
    if not diff.strip():
        return "empty", ""
    await sandboxes.write_file(handle, PATCH_FILE, diff if diff.endswith("\n") else diff + "\n")
    failures = []
    for rung, (method, command) in enumerate(APPLY_LADDER):
        script = PREPARE_APPLY + command if rung == 0 else command
        result = await sandboxes.exec(handle, script, user="root", timeout_s=APPLY_TIMEOUT_S)
        if result.exit_code == 0:
            return method, ""
        failures.append(f"$ {method}\n{result.output.strip()}")
        if method == _THREE_WAY:
            restore = await sandboxes.exec(handle, RESTORE_BASELINE, user="root", timeout_s=APPLY_TIMEOUT_S)
            if restore.exit_code != 0:
                failures.append(f"$ restore baseline\n{restore.output.strip()}")
                break
    return None, "\n".join(failures)


@dataclass(frozen=True)
class GraderBounds:
    """What one grading run may spend: wall-clock seconds, and bytes written to the sandbox since boot (0 = unbounded)."""

    timeout_s: float
    disk_bytes: int = 0


async def _run_grader(
    sandboxes: DockerSandboxes, handle: SandboxHandle, command: str, env: dict[str, str], bounds: GraderBounds
) -> tuple[int | None, str]:
    """Run the grading command detached as root: its exit code and "", or None and why it was killed (its timeout,
    or the sandbox's disk budget: the task's tests run the agent's code, which may fill the disk)."""
    await sandboxes.start_detached(handle, GRADE_JOB, command, user="root", env=env)
    async with DiskWatch(sandboxes, handle, bounds.disk_bytes) as disk:
        code = await disk.first(sandboxes.wait_detached(handle, GRADE_JOB, bounds.timeout_s))
    if code is not None:
        return code, ""
    await sandboxes.kill_detached(handle, GRADE_JOB)
    if disk.exceeded:
        return None, f"\n[grader stopped: the sandbox wrote {disk.used:,} bytes, over its disk budget of {bounds.disk_bytes:,}]"
    return None, f"\n[grader timed out after {bounds.timeout_s:g} s and was killed]"


async def _text(sandboxes: DockerSandboxes, handle: SandboxHandle, path: str, limit: int = LOG_TAIL_BYTES) -> str:
    try:
        return (await sandboxes.read_file(handle, path, limit, tail=True)).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""


def _pytest_counts(output: str) -> dict[str, int]:
    """Best-effort test counts from the last pytest summary line ("2 failed, 6 passed in 0.6s")."""
    summaries = [m.group(1) for line in output.splitlines() if (m := _PYTEST_SUMMARY.match(line.strip()))]
    if not summaries:
        return {}
    counts = {word: int(number) for number, word in re.findall(r"(\d+) (\w+)", summaries[-1])}
    failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
    return {"tests_passed": counts.get("passed", 0), "tests_failed": failed}


async def _grade_eval_cmd(sandboxes: DockerSandboxes, handle: SandboxHandle, task: TaskSpec, bounds: GraderBounds, method: str) -> EvalResult:
    code, killed = await _run_grader(sandboxes, handle, "exec 2>&1\n" + (task.eval_cmd or ""), {}, bounds)
    output = await _text(sandboxes, handle, git_workspace.detached_output(GRADE_JOB))
    if code is None:
        return _result("eval_cmd", False, True, method, output, killed)
    return _result("eval_cmd", code == 0, True, method, output, **_pytest_counts(output))


def _swepro_outcome(raw: str, spec: SweProSpec) -> tuple[bool, int, int, str]:
    """(solved, passed, failed, problem) from result.json text; problem is "" when it parsed."""
    try:
        tests = json.loads(raw)["tests"]
        statuses = {str(test["name"]): str(test["status"]) for test in tests}
    except (ValueError, KeyError, TypeError) as error:
        return False, 0, 0, f"result.json unusable: {error!r}"
    passed = {name for name, status in statuses.items() if status == "PASSED"}
    failed = sum(status in ("FAILED", "ERROR") for status in statuses.values())
    required = set(spec.fail_to_pass) | set(spec.pass_to_pass)
    missing = sorted(required - passed)
    problem = f"required tests not passed: {missing[:20]}" if missing else ""
    return bool(required) and not missing, len(passed), failed, problem


async def _grade_swepro(
    sandboxes: DockerSandboxes, handle: SandboxHandle, spec: SweProSpec, scripts: tuple[str, str], bounds: GraderBounds, method: str
) -> EvalResult:
    run_script, parser_script = scripts
    await sandboxes.write_files(
        handle,
        [
            SandboxFile(f"{SWEPRO_DIR}/run_script.sh", run_script, mode=0o755),
            SandboxFile(f"{SWEPRO_DIR}/parser.py", parser_script),
        ],
    )
    env = {"SWEPRO_TEST_FILES": ",".join(spec.selected_test_files)}
    code, killed = await _run_grader(sandboxes, handle, SWEPRO_COMMAND, env, bounds)
    stdout = await _text(sandboxes, handle, f"{SWEPRO_DIR}/stdout.log")
    stderr = await _text(sandboxes, handle, f"{SWEPRO_DIR}/stderr.log", LOG_TAIL_BYTES // 4)
    log = stdout + (f"\n[stderr]\n{stderr}" if stderr.strip() else "")
    if code is None:
        return _result("swepro", False, True, method, log, killed)
    try:
        raw = (await sandboxes.read_file(handle, f"{SWEPRO_DIR}/result.json", 64 << 20)).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raw = ""
    solved, passed, failed, problem = _swepro_outcome(raw, spec)
    note = ""
    if problem:
        parser_err = await _text(sandboxes, handle, git_workspace.detached_errors(GRADE_JOB), LOG_TAIL_BYTES // 4)
        note = f"\n[{problem}]" + (f"\n[parser]\n{parser_err}" if parser_err.strip() else "")
    return _result("swepro", solved, True, method, log, note, tests_passed=passed, tests_failed=failed)


async def _grade_swebench(
    sandboxes: DockerSandboxes, handle: SandboxHandle, task: TaskSpec, script: str, bounds: GraderBounds, method: str
) -> EvalResult:
    await sandboxes.write_file(handle, SWEBENCH_SCRIPT, script, mode=0o755)
    code, killed = await _run_grader(sandboxes, handle, f"exec 2>&1\nbash {SWEBENCH_SCRIPT}", {}, bounds)
    log = await _text(sandboxes, handle, git_workspace.detached_output(GRADE_JOB), SWEBENCH_LOG_BYTES)
    if code is None:
        return _result("swebench", False, True, method, log, killed)
    verdict = await asyncio.to_thread(swebench.verdict, task, log)
    note = f"\n[{verdict.note}]" if verdict.note else ""
    return _result("swebench", verdict.solved, True, method, log, note, tests_passed=verdict.tests_passed, tests_failed=verdict.tests_failed)


async def evaluate(sandboxes: DockerSandboxes, request: EvalRequest, *, report: Callable[[str], None] = _ignore_phase) -> EvalResult:
    """Grade ``request.diff`` in a fresh grading sandbox booted with ``sandboxes``' settings; ``report``
    hears each phase (boot, apply, reset, test)."""
    task = request.task
    grader = task.grader
    if grader is None:
        raise NoGrader(f"task {task.instance_id} has no grader")
    scripts = _swepro_scripts(task) if grader == "swepro" else None
    protected = task_tests.pathspecs(task)
    swebench_script = await swebench.require_eval_script(task) if grader == "swebench" else None
    report("boot")
    handle = await sandboxes.boot(
        SandboxRequest(task=task, workflow_id=request.workflow_id, attempt=0, purpose="grading"),
        lifetime_s=request.timeout_s + GRADING_LIFETIME_SLACK_S,
    )
    try:
        report("apply")
        if request.diff.strip():
            await task_tests.record(sandboxes, handle, protected)
        method, apply_log = await _apply(sandboxes, handle, request.diff)
        if method is None:
            return _result(grader, False, False, "", apply_log)
        report("reset")
        reset = await task_tests.reset(sandboxes, handle, protected) if method != "empty" else []
        report("test")
        bounds = GraderBounds(timeout_s=request.timeout_s, disk_bytes=sandboxes.settings.limits.disk_bytes)
        if scripts is not None:
            result = await _grade_swepro(sandboxes, handle, task.swepro, scripts, bounds, method)
        elif swebench_script is not None:
            result = await _grade_swebench(sandboxes, handle, task, swebench_script, bounds, method)
        else:
            result = await _grade_eval_cmd(sandboxes, handle, task, bounds, method)
        return result.model_copy(update={"reset_paths": reset})
    finally:
        await sandboxes.destroy(handle)
