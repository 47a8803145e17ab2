"""Graders run the task's tests, not the agent's: a test-editing agent earns 0 on every grader kind.

Each attack is a real ``git diff`` of an edited checkout of the example repository, and each is
first shown to pass the task's own grading command when nothing resets the tests; then the real
grader (fresh Docker sandbox) scores it 0 and names what it reset.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from durable_rollouts.contracts.grading import EvalRequest
from durable_rollouts.contracts.tasks import SweProSpec, TaskSpec
from durable_rollouts.docker_sandbox.limits import SandboxSettings
from durable_rollouts.docker_sandbox.sandboxes import DockerSandboxes
from durable_rollouts.grading import graders, task_tests
from durable_rollouts.paths import PROJECT_ROOT
from tests.grading.tampering_attacks import diff_of, unprotected

TASKS = PROJECT_ROOT / "examples" / "tasks"
SANDBOXES = DockerSandboxes(SandboxSettings(lifetime_s=600))

FORCE_PASS_CONFTEST = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""
PASSING_TEST = "def test_nothing():\n    pass\n"


def diff_after(name: str, edit: Callable[[Path], None]) -> str:
    """The binary ``git diff`` an agent would hand in after ``edit`` on a checkout of task ``name``'s repository."""
    return diff_of(TASKS / name / "repo", edit)


def write(files: dict[str, str]) -> Callable[[Path], None]:
    def edit(tree: Path) -> None:
        for path, text in files.items():
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(text)

    return edit


def swap_tests_dir_for_a_symlink(tree: Path) -> None:
    shutil.rmtree(tree / "tests")
    write({"fake/test_evaluator.py": PASSING_TEST})(tree)
    (tree / "tests").symlink_to("fake")


def reference_fix_plus(name: str, files: dict[str, str]) -> Callable[[Path], None]:
    def edit(tree: Path) -> None:
        patch = (TASKS / name / "reference.patch").read_text()
        subprocess.run(["git", "apply"], input=patch, text=True, cwd=tree, check=True)
        write(files)(tree)

    return edit


# calc-eval-cmd grades with `python3 -m pytest -q -p no:cacheprovider tests/test_evaluator.py`.
EVAL_CMD_ATTACKS = {
    "overwrite_the_test_file": (write({"tests/test_evaluator.py": PASSING_TEST}), ["tests/test_evaluator.py"]),
    "conftest_forcing_passes": (write({"conftest.py": FORCE_PASS_CONFTEST}), ["conftest.py"]),
    "gitignored_conftest": (
        write({".gitignore": "conftest.py\n", "tests/conftest.py": FORCE_PASS_CONFTEST}),
        ["tests/conftest.py"],
    ),
    "pytest_ini_collect_only": (write({"pytest.ini": "[pytest]\naddopts = --collect-only\n"}), ["pytest.ini"]),
    "pyproject_collect_only": (
        write({"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '--collect-only'\n"}),
        ["pyproject.toml"],
    ),
    "shadow_pytest_module": (write({"pytest.py": "raise SystemExit(0)\n"}), ["pytest.py"]),
    "symlink_in_place_of_tests": (
        swap_tests_dir_for_a_symlink,
        ["fake/test_evaluator.py", "tests", "tests/test_evaluator.py"],
    ),
}

# A pytest plugin registered through a *.dist-info on sys.path (python -m, and f2p scripts, put the workdir there).
DIST_INFO_PLUGIN = {
    "gamer-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: gamer\nVersion: 1.0\n",
    "gamer-1.0.dist-info/entry_points.txt": "[pytest11]\ngamer = gamer_plugin\n",
    "gamer_plugin.py": FORCE_PASS_CONFTEST,
    "tests/test_textutil.py": PASSING_TEST,
}


async def grade(prefix: str, task: TaskSpec, diff: str):
    return (
        await graders.evaluate(
            SANDBOXES, EvalRequest(task=task, diff=diff, workflow_id=f"{prefix}-{task.instance_id}", timeout_s=120)
        )
    ).result


async def grade_unprotected(prefix: str, task: TaskSpec, diff: str, monkeypatch):
    """The control: the same real grader with the protection switched off, so an attack must win there."""
    with monkeypatch.context() as patched:
        unprotected(patched)
        return (
            await graders.evaluate(
                SANDBOXES,
                EvalRequest(task=task, diff=diff, workflow_id=f"{prefix}-control-{task.instance_id}", timeout_s=120),
            )
        ).result


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("attack", list(EVAL_CMD_ATTACKS))
async def test_a_test_editing_agent_earns_0_on_an_eval_cmd_row(prefix, tasks, attack, monkeypatch):
    edit, reset = EVAL_CMD_ATTACKS[attack]
    diff = diff_after("calc-eval-cmd", edit)
    control = await grade_unprotected(prefix, tasks["calc-eval-cmd"], diff, monkeypatch)
    assert control.solved, f"{attack} is not an attack on this grader:\n{control.log_tail}"
    result = await grade(prefix, tasks["calc-eval-cmd"], diff)
    assert (result.reward, result.solved, result.applied_cleanly) == (0.0, False, True), result.log_tail
    assert (result.tests_passed, result.tests_failed) == (6, 2), "the task's own tests ran"
    assert result.reset_paths == reset


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_test_editing_agent_earns_0_on_an_f2p_row(prefix, tasks, monkeypatch):
    task = tasks["textutil-f2p"]
    diff = diff_after("textutil-f2p", write(DIST_INFO_PLUGIN))
    control = await grade_unprotected(prefix, task, diff, monkeypatch)
    assert control.solved, f"the plugin does not game the f2p script:\n{control.log_tail}"
    result = await grade(prefix, task, diff)
    assert (result.reward, result.applied_cleanly, result.grader) == (0.0, True, "eval_cmd"), result.log_tail
    assert (result.tests_passed, result.tests_failed) == (1, 3), "the row's f2p tests ran"
    assert result.reset_paths == [
        "gamer-1.0.dist-info/METADATA",
        "gamer-1.0.dist-info/entry_points.txt",
        "tests/test_textutil.py",
    ]


SWEPRO_TESTS = [
    "test_add_accumulates",
    "test_total_value",
    "test_remove_within_stock",
    "test_remove_more_than_stock_raises",
    "test_remove_unknown_sku_raises",
]
REWRITTEN_STORE_TESTS = (
    "import pytest\n\n\n"
    + "".join(f"def {name}():\n    pass\n\n\n" for name in SWEPRO_TESTS)
    + '@pytest.mark.parametrize("quantity", [0, -1])\ndef test_rejects_non_positive_quantities(quantity):\n    pass\n'
)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_test_editing_agent_earns_0_on_a_swepro_row(prefix, tasks, monkeypatch):
    task = tasks["inventory-swepro"]
    diff = diff_after("inventory-swepro", write({"tests/test_store.py": REWRITTEN_STORE_TESTS}))
    control = await grade_unprotected(prefix, task, diff, monkeypatch)
    assert control.solved, f"the rewrite does not game swepro:\n{control.log_tail}"
    result = await grade(prefix, task, diff)
    assert (result.reward, result.applied_cleanly, result.grader) == (0.0, True, "swepro"), result.log_tail
    assert (result.tests_passed, result.tests_failed) == (5, 2)
    assert result.reset_paths == ["tests/test_store.py"]


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_conftest_beats_the_swebench_packages_own_reset_but_not_the_graders(prefix, tasks, monkeypatch):
    """The package's eval script resets only the files its test patch touches: a new conftest.py survives it."""
    task = tasks["slugify-swebench"]
    diff = diff_after("slugify-swebench", write({"conftest.py": FORCE_PASS_CONFTEST}))
    control = await grade_unprotected(prefix, task, diff, monkeypatch)
    assert control.solved, f"the conftest does not game the package's eval script:\n{control.log_tail}"
    result = await grade(prefix, task, diff)
    assert (result.reward, result.applied_cleanly, result.grader) == (0.0, True, "swebench"), result.log_tail
    assert (result.tests_passed, result.tests_failed) == (3, 3)
    assert result.reset_paths == ["conftest.py"]


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(
    ("name", "new_test"),
    [
        ("calc-eval-cmd", "tests/test_chains.py"),
        ("inventory-swepro", "tests/test_more_stock.py"),
        ("textutil-f2p", "tests/test_more_slugs.py"),
        ("slugify-swebench", "tests/test_more_slugify.py"),
    ],
)
async def test_a_real_fix_that_also_adds_a_test_still_earns_1(prefix, tasks, name, new_test):
    """The new test is removed before the task's tests run (so it can neither help nor hurt), and reported."""
    result = await grade(prefix, tasks[name], diff_after(name, reference_fix_plus(name, {new_test: PASSING_TEST})))
    assert (result.reward, result.solved, result.tests_failed) == (1.0, True, 0), result.log_tail
    assert result.reset_paths == [new_test]


def test_protected_paths_default_to_the_test_paths_plus_the_runner_configuration():
    task = TaskSpec(instance_id="t", image="i", workdir="/w", problem_statement="p", eval_cmd="true")
    specs = task_tests.pathspecs(task)
    assert ":(glob)**/tests/**" in specs and ":(glob)**/tests" in specs, (
        "a directory pattern also matches what replaces the directory"
    )
    assert {":(glob)**/conftest.py", ":(glob)**/pytest.ini", ":(glob)pytest.py"} <= set(specs)
    metadata = {
        ":(glob,icase)**/*.dist-info/**",
        ":(glob,icase)**/*.dist-info",
        ":(glob,icase)**/*.egg-info/**",
        ":(glob,icase)**/*.pth",
    }
    assert metadata <= set(specs), "package metadata and .pth files are matched whatever their case"
    own = task.model_copy(update={"test_files": ["checks/**", "*.check"]})
    assert {":(glob)checks/**", ":(glob)checks", ":(glob)*.check", ":(glob)**/conftest.py"} <= set(
        task_tests.pathspecs(own)
    )
    assert ":(glob)**/tests/**" not in task_tests.pathspecs(own), "a row's own list replaces the default test paths"
    swepro = task.model_copy(
        update={"swepro": SweProSpec(run_script="x", parser_script="y", selected_test_files=["pages/[id].test.ts"])}
    )
    assert ":(literal)pages/[id].test.ts" in task_tests.pathspecs(swepro)


def test_default_protected_paths_in_a_real_repository_spare_library_code_named_like_tests(tmp_path):
    """git itself matches the pathspecs: test trees, test modules and runner hooks are protected; library
    packages called ``test`` or ``testing`` below the top (django/test, numpy/testing) are not."""
    files = {
        "tests/test_api.py": True,
        "test/run.py": True,
        "testing/helpers.py": True,
        "pkg/tests/test_core.py": True,
        "pkg/test_util.py": True,
        "web/app.spec.ts": True,
        "conftest.py": True,
        "pkg/sitecustomize.py": True,
        "setup.cfg": True,
        "vite.config.ts": True,
        "django/test/client.py": False,
        "numpy/testing/utils.py": False,
        "pkg/core.py": False,
        "README.md": False,
    }
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    task = TaskSpec(instance_id="t", image="i", workdir="/w", problem_statement="p", eval_cmd="true")
    listed = subprocess.run(
        ["git", "ls-files", "--", *task_tests.pathspecs(task)], cwd=tmp_path, check=True, capture_output=True, text=True
    )
    assert sorted(listed.stdout.split()) == sorted(name for name, protected in files.items() if protected)


@pytest.mark.parametrize(
    "bad", [[], ["/etc/passwd"], ["../outside/**"], ["tests/../../x"], [":(top)x"], [""], ["a\nb"]]
)
def test_test_file_patterns_must_stay_in_the_workdir(bad):
    with pytest.raises(ValueError, match="test_files"):
        TaskSpec(instance_id="t", image="i", workdir="/w", problem_statement="p", eval_cmd="true", test_files=bad)


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_a_row_command_that_checks_out_the_index_does_not_bring_the_agents_edits_back(prefix, tasks):
    """``git apply --3way`` stages the agent's edits; the reset puts the index entries back too."""
    task = tasks["calc-eval-cmd"]
    task = task.model_copy(update={"eval_cmd": f"git checkout -q -- . && {task.eval_cmd}"})
    edit, reset = EVAL_CMD_ATTACKS["overwrite_the_test_file"]
    result = await grade(prefix, task, diff_after("calc-eval-cmd", edit))
    assert (result.reward, result.apply_method, result.tests_failed) == (0.0, "git apply --3way", 2), result.log_tail
    assert result.reset_paths == reset
