"""Grading in a fresh sandbox against a real engine, for every example task and grader kind."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities import evaluate as evaluate_face
from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.contracts.sandboxes import SandboxRequest
from durable_rollouts.contracts.tasks import TaskSpec
from durable_rollouts.docker_sandbox.limits import SandboxLimits, SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import graders, swebench
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

TASKS = PROJECT_ROOT / "examples" / "tasks"
GARBAGE = "this is not a diff\n--- nor is this\n"
# Sandboxes as a worker without a network boots them, default limits.
SANDBOXES = DockerSandboxes(SandboxSettings(lifetime_s=600))


def request(prefix: str, task: TaskSpec, diff: str, timeout_s: int = 120) -> EvalRequest:
    return EvalRequest(task=task, diff=diff, workflow_id=f"{prefix}-{task.instance_id}", timeout_s=timeout_s)


@pytest.mark.parametrize(
    ("instance_id", "grader", "tests_passed"),
    [
        ("calc-eval-cmd", "eval_cmd", 8),
        ("textutil-f2p", "eval_cmd", 4),
        ("inventory-swepro", "swepro", 7),
        ("slugify-swebench", "swebench", 6),
    ],
)
async def test_reference_empty_and_garbage_diffs(prefix, tasks, instance_id, grader, tests_passed):
    task = tasks[instance_id]
    solved, empty, garbage = [
        graded.result
        for graded in await asyncio.gather(
            *(graders.evaluate(SANDBOXES, request(prefix, task, diff)) for diff in (task.reference_patch, "", GARBAGE))
        )
    ]
    assert (solved.reward, solved.solved, solved.applied_cleanly) == (1.0, True, True), solved.log_tail
    assert (solved.grader, solved.apply_method, solved.tests_passed) == (grader, "git apply --3way", tests_passed)
    assert solved.tests_failed == 0
    assert (empty.reward, empty.solved, empty.applied_cleanly, empty.apply_method) == (0.0, False, False, "empty"), (
        "an empty diff applies no patch"
    )
    assert (garbage.reward, garbage.applied_cleanly, garbage.apply_method) == (0.0, False, "")
    assert "patch --fuzz=3" in garbage.log_tail


async def test_swepro_scripts_named_by_path_in_the_dataset_root_are_graded_inline(prefix, tmp_path):
    """The row names its scripts by paths inside the dataset root; the reader inlines them and grading uses that
    text."""
    for name in ("run_script.sh", "parser.py"):
        (tmp_path / "harness").mkdir(exist_ok=True)
        (tmp_path / "harness" / name).write_text((TASKS / "inventory-swepro" / name).read_text())
    row = next(
        json.loads(line) for line in (TASKS / "dataset.jsonl").read_text().splitlines() if "inventory-swepro" in line
    )
    swepro = row["metadata"]["swepro"]
    del swepro["run_script"], swepro["parser_script"]
    swepro.update(run_script_path="harness/run_script.sh", parser_script_path=str(tmp_path / "harness" / "parser.py"))
    (tmp_path / "dataset.jsonl").write_text(json.dumps(row) + "\n")
    (item,) = read_dataset(tmp_path / "dataset.jsonl", root=tmp_path)
    assert isinstance(item, DatasetRow), item
    task = item.task
    assert (task.swepro.run_script_path, task.swepro.parser_script_path) == (None, None)
    solved, unsolved = [
        graded.result
        for graded in await asyncio.gather(
            graders.evaluate(SANDBOXES, request(prefix, task, task.reference_patch)),
            graders.evaluate(SANDBOXES, request(prefix, task, "")),
        )
    ]
    assert (solved.reward, solved.tests_passed, solved.tests_failed) == (1.0, 7, 0), solved.log_tail
    assert (unsolved.reward, unsolved.tests_passed, unsolved.tests_failed) == (0.0, 5, 2)
    assert "test_remove_more_than_stock_raises" in unsolved.log_tail


@pytest.mark.parametrize("field", ["run_script_path", "parser_script_path"])
async def test_a_task_naming_a_host_script_path_is_refused_without_reading_it(prefix, tasks, field, reap_prefix):
    """A row handed to the workflow directly, not through the reader: the worker reads no host path it names."""
    task = tasks["inventory-swepro"]
    swepro = task.swepro.model_copy(update={field: "/etc/shadow", field.removesuffix("_path"): None})
    with pytest.raises(graders.ScriptPathRefused) as caught:
        await graders.evaluate(
            SANDBOXES, request(prefix, task.model_copy(update={"swepro": swepro}), task.reference_patch)
        )
    reported = evaluate_face.GRADING_FAILURES(caught.value)
    assert reported.type == "NotEvaluable" and reported.non_retryable
    assert f"swepro.{field}" in str(caught.value)
    shadow = [line for line in Path("/etc/shadow").read_text().splitlines() if line.strip()]
    assert not any(line in str(caught.value) for line in shadow)
    assert await reap_prefix(prefix) == [], "refused before any container booted"


async def test_swebench_grades_the_rows_tests_not_the_agents_edits_of_them(prefix, tasks):
    """Rewriting the tests does not pass: the grader puts them back (and names them), then the package's eval
    script resets the test files and applies the row's test patch."""
    task = tasks["slugify-swebench"]
    rewritten_tests = (
        "diff --git a/tests/test_slugify.py b/tests/test_slugify.py\n--- a/tests/test_slugify.py\n+++ "
        "b/tests/test_slugify.py\n"
        "@@ -1,3 +1,5 @@\n+import pytest\n+pytestmark = pytest.mark.skip\n from slugify import slugify\n \n \n"
    )
    result = (await graders.evaluate(SANDBOXES, request(prefix, task, rewritten_tests))).result
    assert (result.reward, result.applied_cleanly, result.grader, result.tests_passed, result.tests_failed) == (
        0.0,
        True,
        "swebench",
        3,
        3,
    ), result.log_tail
    assert "test_folds_accents_to_ascii" in result.log_tail
    assert result.reset_paths == ["tests/test_slugify.py"]


async def test_the_swebench_rows_base_commit_is_the_images_baseline(prefix, tasks):
    task = tasks["slugify-swebench"]
    head = subprocess.run(
        ["docker", "run", "--rm", task.image, "git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    assert head.stdout.strip() == task.swebench.base_commit, "run examples/tasks/make_dataset.py after editing a task"


async def test_a_swebench_row_without_a_test_spec_fails_before_booting(prefix, tasks, reap_prefix):
    task = tasks["slugify-swebench"]
    unknown = task.model_copy(update={"swebench": task.swebench.model_copy(update={"install_config": None})})
    with pytest.raises(swebench.NotEvaluable) as caught:
        await graders.evaluate(SANDBOXES, request(prefix, unknown, task.reference_patch))
    reported = evaluate_face.GRADING_FAILURES(caught.value)
    assert reported.type == "NotEvaluable" and reported.non_retryable
    assert "no test spec for rollouts-examples/slugify 0.1" in str(caught.value)
    assert await reap_prefix(prefix) == []


async def test_conflicted_three_way_is_rolled_back_before_fuzz(prefix, tasks):
    """A staged local edit next to the hunk: --3way conflicts, the tree is restored, patch --fuzz=3 applies."""
    task = tasks["calc-eval-cmd"]
    edit = "sed -i 's/^        left = self.term()$/        left = self.term()  # first operand/' calc/evaluator.py"
    drifted = task.model_copy(update={"pre_commands": [f"{edit} && git add calc/evaluator.py"]})
    phases: list[str] = []
    result = (
        await graders.evaluate(SANDBOXES, request(prefix, drifted, task.reference_patch), report=phases.append)
    ).result
    assert (result.reward, result.apply_method) == (1.0, "patch --fuzz=3"), result.log_tail
    assert phases == ["boot", "apply", "reset", "test"], "the activity's heartbeat shows each phase in order"


async def test_restore_leaves_the_baseline_after_a_conflict(prefix, tasks):
    task = tasks["calc-eval-cmd"]
    edit = "sed -i 's/^        left = self.term()$/        left = self.term()  # first operand/' calc/evaluator.py"
    drifted = task.model_copy(update={"pre_commands": [f"{edit} && git add calc/evaluator.py"]})
    handle = await SANDBOXES.boot(
        SandboxRequest(task=drifted, workflow_id=f"{prefix}-restore", attempt=0, purpose="grading"), lifetime_s=600
    )
    try:
        before = await SANDBOXES.exec(handle, "git status --porcelain; git diff --cached | sha1sum", user="root")
        await SANDBOXES.write_file(handle, graders.PATCH_FILE, task.reference_patch)
        await SANDBOXES.exec(handle, graders.PREPARE_APPLY, user="root")
        three_way = await SANDBOXES.exec(handle, graders.APPLY_LADDER[0][1], user="root")
        assert three_way.exit_code != 0 and "conflict" in three_way.output.lower(), three_way.output
        restore = await SANDBOXES.exec(handle, graders.RESTORE_BASELINE, user="root")
        assert restore.exit_code == 0, restore.output
        after = await SANDBOXES.exec(handle, "git status --porcelain; git diff --cached | sha1sum", user="root")
        assert after.output == before.output
    finally:
        await SANDBOXES.destroy(handle)


async def test_hanging_grader_times_out(prefix, tasks):
    task = tasks["calc-eval-cmd"].model_copy(update={"eval_cmd": "echo starting tests\nsleep 60"})
    result = (await graders.evaluate(SANDBOXES, request(prefix, task, "", timeout_s=3))).result
    assert (result.reward, result.solved, result.apply_method) == (0.0, False, "empty")
    assert "starting tests" in result.log_tail and "timed out after 3 s" in result.log_tail


async def test_tests_that_fill_the_disk_are_stopped_at_the_budget_and_score_0(prefix, tasks):
    """The grading sandbox runs the agent's code through the tests: a grader writing past the disk budget is
    killed (long before its timeout) and the result says why."""
    task = tasks["calc-eval-cmd"].model_copy(
        update={"eval_cmd": "echo starting tests\nhead -c 64000000 /dev/zero > fill.bin\nsleep 600"}
    )
    small_disk = DockerSandboxes(SandboxSettings(limits=SandboxLimits(disk_bytes=16 << 20)))
    result = (await graders.evaluate(small_disk, request(prefix, task, "", timeout_s=900))).result
    assert (result.reward, result.solved, result.apply_method) == (0.0, False, "empty")
    assert "starting tests" in result.log_tail and "over its disk budget of 16,777,216" in result.log_tail, (
        result.log_tail
    )
    unbounded = (
        await graders.evaluate(
            SANDBOXES,
            request(prefix, task.model_copy(update={"eval_cmd": "head -c 64000000 /dev/zero > fill.bin"}), ""),
        )
    ).result
    assert unbounded.solved, "the default budget (10 GiB) lets a normal test run write what it needs"


async def test_multiline_eval_cmd_runs_from_a_file(prefix, tasks):
    script = "set -e\nmsg='it'\"'\"'s \"fine\" $HOME'\necho \"$msg\"\ncat <<'EOF'\nliteral $x\nEOF\n"
    task = tasks["calc-eval-cmd"].model_copy(update={"eval_cmd": script})
    result = (await graders.evaluate(SANDBOXES, request(prefix, task, ""))).result
    assert result.solved and result.log_tail == 'it\'s "fine" $HOME\nliteral $x\n', result.log_tail


async def test_no_grader_is_non_retryable(prefix, tasks):
    task = tasks["calc-eval-cmd"].model_copy(update={"eval_cmd": None})
    with pytest.raises(graders.NoGrader) as caught:
        await graders.evaluate(SANDBOXES, request(prefix, task, ""))
    reported = evaluate_face.GRADING_FAILURES(caught.value)
    assert reported.type == "NoGrader" and reported.non_retryable


async def test_activity_heartbeats_its_phase(prefix, tasks):
    beats: list = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details[0])
    task = tasks["textutil-f2p"]
    result = await env.run(
        evaluate_face.GradingActivities(SANDBOXES).evaluate, request(prefix, task, task.reference_patch)
    )
    assert result.solved and result.log_bytes == len(result.log.encode()) > 0 and "[apply]" in result.log, (
        "the whole log is in the result"
    )
    assert beats and all(set(beat) == {"phase"} for beat in beats)


def reinstall_task() -> TaskSpec:
    (row,) = read_dataset(TASKS / "reinstall_dataset.jsonl")
    assert isinstance(row, DatasetRow), row
    return row.task


async def test_a_row_that_reinstalls_its_package_grades_offline_from_the_images_wheels(prefix):
    """The eval script's editable reinstall (an isolated build: setuptools and wheel from /opt/wheels) works in a
    grading sandbox without a network, and the whole log shows it; the buggy tree still fails its tests."""
    task = reinstall_task()
    solved, unsolved = await asyncio.gather(
        graders.evaluate(SANDBOXES, request(prefix, task, task.reference_patch)),
        graders.evaluate(SANDBOXES, request(f"{prefix}-unsolved", task, "")),
    )
    result = solved.result
    assert (result.solved, result.applied_cleanly, result.apply_method, result.tests_passed, result.tests_failed) == (
        True,
        True,
        "git apply --3way",
        5,
        0,
    ), solved.log
    assert "Successfully installed tempconv-0.1.0" in solved.log, solved.log
    assert (
        "[apply]\n$ git apply --3way" in solved.log
        and "[reset] task tests put back to the baseline: none changed" in solved.log
    )
    assert "[eval_cmd exit 0]" in solved.log
    assert (unsolved.result.solved, unsolved.result.tests_failed, unsolved.result.applied_cleanly) == (False, 2, False)
    assert "Successfully installed tempconv-0.1.0" in unsolved.log and "empty diff: nothing to apply" in unsolved.log


async def test_the_whole_log_keeps_what_the_tail_leaves_out(prefix, tasks):
    """An eval script printing ~300 KB: ``log_tail`` keeps its last 4 KiB, the whole log every line."""
    script = "echo FIRST-LINE-MARKER\nseq 1 50000\necho LAST-LINE-MARKER\n"
    task = tasks["calc-eval-cmd"].model_copy(update={"eval_cmd": script})
    graded = await graders.evaluate(SANDBOXES, request(prefix, task, task.reference_patch))
    assert graded.result.solved
    assert (
        len(graded.result.log_tail.encode()) <= graders.LOG_TAIL_BYTES and "LAST-LINE-MARKER" in graded.result.log_tail
    )
    assert "FIRST-LINE-MARKER" not in graded.result.log_tail
    assert len(graded.log.encode()) > 250_000
    assert "FIRST-LINE-MARKER\n1\n2\n" in graded.log and "\n50000\nLAST-LINE-MARKER" in graded.log


async def test_a_swepro_grading_log_holds_stdout_stderr_and_the_parsers_errors(prefix, tasks):
    task = tasks["inventory-swepro"]
    parser = "import sys\nprint('PARSER-STDERR-MARKER', file=sys.stderr)\nsys.exit(3)\n"
    broken = task.model_copy(update={"swepro": task.swepro.model_copy(update={"parser_script": parser})})
    graded = await graders.evaluate(SANDBOXES, request(prefix, broken, task.reference_patch))
    assert not graded.result.solved and "result.json unusable" in graded.result.log_tail
    for section in (
        "[grader swepro: stdout]",
        "[swepro stderr]",
        "[swepro parser errors]\nPARSER-STDERR-MARKER",
        "[swepro result.json]",
    ):
        assert section in graded.log, graded.log
    assert "test_remove_more_than_stock_raises" in graded.log, "the run script's pytest output"
