"""The SWE-smith verdict script, run as the grading sandbox runs it: exit 0 iff every required test passed."""

import json
import subprocess
import sys

import pytest

from durable_rollouts.task_sources.row_shapes import swe_smith_verdict

REQUIRED = {
    "FAIL_TO_PASS": ["tests/test_a.py::test_fix"],
    "PASS_TO_PASS": ["tests/test_a.py::test_kept", "tests/test_b.py::test_not_run"],
    "files": ["tests/test_a.py"],
}


def verdict(tmp_path, log: str) -> subprocess.CompletedProcess:
    (tmp_path / "log").write_text(log)
    (tmp_path / "required.json").write_text(json.dumps(REQUIRED))
    return subprocess.run(
        [sys.executable, swe_smith_verdict.__file__, str(tmp_path / "log"), str(tmp_path / "required.json")],
        capture_output=True,
        text=True,
    )


def log(*lines: str) -> str:
    return "\n".join(["+ : '>>>>> Start Test Output'", *lines, "+ : '>>>>> End Test Output'", ""])


@pytest.mark.parametrize(
    ("lines", "solved"),
    [
        (("tests/test_a.py::test_fix PASSED  [ 50%]", "tests/test_a.py::test_kept PASSED  [100%]"), True),
        (("PASSED tests/test_a.py::test_fix", "XFAIL tests/test_a.py::test_kept - reason"), True),
        (("tests/test_a.py::test_fix FAILED  [ 50%]", "tests/test_a.py::test_kept PASSED  [100%]"), False),
        (("tests/test_a.py::test_fix PASSED  [ 50%]",), False),
        (("ERROR tests/test_a.py - ImportError",), False),
    ],
)
def test_solved_iff_every_required_test_in_the_files_that_ran_passed(tmp_path, lines, solved):
    run = verdict(tmp_path, log(*lines))
    assert run.returncode == (0 if solved else 1), run.stdout


def test_a_log_without_the_markers_is_not_solved(tmp_path):
    run = verdict(tmp_path, "tests/test_a.py::test_fix PASSED\ntests/test_a.py::test_kept PASSED\n")
    assert run.returncode == 1 and "markers are missing" in run.stdout
