"""The tamper checks' pure parts: folding the probe's answers, finding shadowing modules, reading reports,
and judging them."""

from __future__ import annotations

import json

from grading import python_envs, session_reports, shadowing, tamper_checks
from grading.python_envs import PytestPlugin, PythonEnvs
from grading.run_guard import Guard
from grading.session_reports import SessionReport
from grading.tamper_checks import Claims

GUARD = Guard(directory="/tmp/g", module="mabc", must_fail="test_f1", must_pass="test_p1")


def _answer(version, names, plugins=(), workdir_paths=(), site_dirs=()) -> str:
    return json.dumps({"version": version, "names": names, "plugins": plugins, "workdir_paths": workdir_paths, "site_dirs": site_dirs})


def test_fold_unions_the_interpreters_and_skips_answers_that_do_not_parse():
    lines = [
        _answer([3, 11], ["argparse", "pluggy"], [["pytest-asyncio", "asyncio", "pytest_asyncio.plugin"]], ["."], ["/usr/lib/site"]),
        _answer([3, 8], ["asyncio", "six"], [], ["src"], ["/opt/venv/site", "relative/site"]),
        "Welcome to the login shell",
        '{"version": [3, 12]}',
    ]
    envs = python_envs.fold(lines)
    assert envs.found and envs.names == {"argparse", "pluggy", "asyncio", "six"}
    assert envs.plugins == (PytestPlugin("pytest-asyncio", "asyncio", "pytest_asyncio.plugin"),)
    assert envs.import_roots == (".", "src")
    assert envs.site_dirs == ("/usr/lib/site", "/opt/venv/site"), "only absolute site directories"
    assert envs.safe_path, "the only 3.11+ interpreter reaches the workdir through its own sys.path"


def test_safe_path_needs_every_modern_interpreter_to_reach_the_workdir_and_no_python_is_found_false():
    assert not python_envs.fold([_answer([3, 11], []), _answer([3, 12], [], workdir_paths=["."])]).safe_path
    assert not python_envs.fold([_answer([3, 10], [], workdir_paths=["."])]).safe_path, "PYTHONSAFEPATH is 3.11+"
    assert python_envs.fold([]) == PythonEnvs() and not PythonEnvs().found


def test_shadowing_names_new_entries_with_an_installed_modules_name_only():
    envs = PythonEnvs(found=True, names=frozenset({"argparse", "pluggy", "json"}), import_roots=(".", "src"))
    before = frozenset({"json.py", "calc", "src/app"})
    after = before | {"argparse.py", "pluggy", "src/argparse.cpython-311-x86_64-linux-gnu.so", "calc2", "lib/argparse.py"}
    assert shadowing.shadowing(before, after, envs) == ["argparse.py", "pluggy", "src/argparse.cpython-311-x86_64-linux-gnu.so"]
    assert shadowing.pathspecs(["argparse.py", "pluggy"]) == [":(literal)argparse.py", ":(literal)pluggy"]


def _report(
    stage="exited",
    tests=(("t.py::test_a", ""),),
    canaries=(("must_fail", "t.py::test_f1", "failed"), ("must_pass", "t.py::test_p1", "passed")),
    **properties,
) -> bytes:
    props = {"session": stage, "exitstatus": "0", "collected": "1", "collectonly": "0", "worker": "0", **properties}
    cases = "".join(f'<testcase nodeid="{nodeid}" name="x">{child}</testcase>' for nodeid, child in tests)
    canary_cases = "".join(f'<testcase name="{role}" nodeid="{nodeid}" outcome="{outcome}"/>' for role, nodeid, outcome in canaries)
    prop_xml = "".join(f'<property name="{name}" value="{value}"/>' for name, value in props.items())
    return (
        f'<testsuites><testsuite name="pytest"><properties>{prop_xml}</properties>{cases}</testsuite>'
        f'<testsuite name="rollout-canaries">{canary_cases}</testsuite></testsuites>'
    ).encode()


def test_parse_reads_outcomes_stages_and_only_this_gradings_canaries():
    data = _report(
        tests=(("t.py::test_a", ""), ("t.py::test_b", '<failure message="x"/>'), ("t.py::test_c", "<skipped/>"), ("t.py::test_d", "<error/>")),
        canaries=(("must_fail", "t.py::test_f1", "failed"), ("must_pass", "t.py::test_p1", "passed"), ("must_fail", "t.py::test_guessed", "failed")),
    )
    report = session_reports.parse("1.xml", data, GUARD)
    assert report.tests == {"t.py::test_a": "passed", "t.py::test_b": "failed", "t.py::test_c": "skipped", "t.py::test_d": "error"}
    assert report.canaries == {"must_fail": [("t.py::test_f1", "failed")], "must_pass": [("t.py::test_p1", "passed")]}
    assert (report.finished, report.exited, report.exit_status, report.collected) == (True, True, 0, 1)
    started = session_reports.parse("2.xml", _report(stage="started"), GUARD)
    assert (started.finished, started.exited) == (False, False)


def test_parse_never_raises_on_what_the_code_under_test_could_write():
    assert "does not parse" in session_reports.parse("1.xml", b"<testsuites", GUARD).problem
    assert "no pytest testsuite" in session_reports.parse("1.xml", b"<testsuites/>", GUARD).problem
    odd = session_reports.parse("1.xml", _report(exitstatus="x", collected="-"), GUARD)
    assert (odd.exit_status, odd.collected, odd.problem) == (None, 0, "")


def _session(**changes) -> SessionReport:
    values = {
        "name": "1.xml",
        "finished": True,
        "exited": True,
        "collected": 2,
        "tests": {"t.py::test_a": "passed"},
        "canaries": {"must_fail": [("t.py::test_f1", "failed")], "must_pass": [("t.py::test_p1", "passed")]},
    }
    return SessionReport(**{**values, **changes})


def test_an_honest_session_is_not_tampered_solved_or_not():
    assert tamper_checks.judge([_session()], Claims(solved=True, exit_code=0), expected=True) == []
    broken = _session(tests={"t.py::test_a": "failed"}, canaries={})
    assert tamper_checks.judge([broken], Claims(solved=False, exit_code=1), expected=True) == [], "unsolved: only a passing must-fail canary counts"


def test_a_passing_must_fail_canary_is_tampering_even_when_unsolved():
    passed = _session(canaries={"must_fail": [("t.py::test_f1", "passed")], "must_pass": [("t.py::test_p1", "passed")]})
    [line] = tamper_checks.judge([passed], Claims(solved=False), expected=True)
    assert line == "1.xml: the must-fail canary t.py::test_f1 passed"


def test_what_counts_against_a_solved_verdict():
    solved = Claims(solved=True, exit_code=0)
    cases = {
        "did not run both canaries": _session(canaries={"must_fail": [("t.py::test_f1", "failed")]}),
        "the must-pass canary t.py::test_p1 skipped": _session(
            canaries={"must_fail": [("t.py::test_f1", "failed")], "must_pass": [("t.py::test_p1", "skipped")]}
        ),
        "never finished": _session(finished=False, exited=False),
        "did not exit normally": _session(exited=False),
        "collect-only": _session(collect_only=True),
        "exited 0 while its pytest sessions reported 1 failed: t.py::test_a": _session(tests={"t.py::test_a": "failed"}),
        "does not parse": SessionReport(name="1.xml", problem="report 1.xml does not parse: x"),
    }
    for expected, report in cases.items():
        evidence = tamper_checks.judge([report], solved, expected=True)
        assert any(expected in line for line in evidence), (expected, evidence)
    assert tamper_checks.judge([_session(exited=False, worker=True)], solved, expected=True) == [], "an xdist worker ends by os._exit"


def test_a_parser_claim_the_report_contradicts_and_a_missing_report():
    claims = Claims(solved=True, passed=frozenset({"t.py::test_a", "t.py::test_z"}))
    contradicted = _session(tests={"t.py::test_a": "failed"})
    assert any(
        "counted as passed what the report holds as not passed: t.py::test_a" in line
        for line in tamper_checks.judge([contradicted], claims, expected=True)
    )
    assert tamper_checks.judge([_session()], claims, expected=True) == [], "a name the report lacks (another runner's id) is not evidence"
    assert tamper_checks.judge([], Claims(solved=True), expected=True) == [
        "the row's tests run under pytest, but no pytest session reported to the grader"
    ]
    assert tamper_checks.judge([], Claims(solved=True), expected=False) == []


def test_pytest_is_expected_from_the_command_or_an_f2p_script():
    assert tamper_checks.pytest_expected("", "python -m pytest -q tests")
    assert tamper_checks.pytest_expected("echo x | base64 -d > /tmp/rollout_f2p.py && python3 /tmp/rollout_f2p.py")
    assert not tamper_checks.pytest_expected("make check", "")
