"""The reports the grader's pytest plugin writes, one JUnit XML file per pytest process of a grading run.

Invariants: ``parse`` never raises on what a file holds (the code under test can write there too): a file
that does not parse is a ``SessionReport`` with ``problem`` set. A test's outcome is ``passed``, ``xpassed``,
``failed``, ``error``, ``skipped`` or ``xfailed``, from its setup, call and teardown together (``declared_xfail``: the
tests that themselves expect to fail, by an xfail marker or unittest's ``expectedFailure``); a canary's outcome is
read only from the canaries' own testsuite, and only under the names this grading drew (``Guard``). Collectors that
failed (a test module that does not import), the framework callables the plugin found replaced, the workdir modules
imported before it and the test code that is not its file's come from their own testsuite and property.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from xml.etree import ElementTree

if TYPE_CHECKING:
    from durable_rollouts.grading.run_guard import Guard

CANARY_SUITE = "rollout-canaries"
COLLECT_ERROR_SUITE = "rollout-collect-errors"
TEST_CODE_SUITE = "rollout-test-code"


@dataclass(frozen=True)
class SessionReport:
    """One pytest process: ``finished`` (its session ended, else it died or was stopped on the way), ``exited``
    (then its interpreter exited normally: not by ``os._exit`` or a signal),
    ``collect_only``, ``worker`` (an xdist worker), ``nested`` (a pytest process another one of the run
    started, e.g. a test of a pytest plugin running pytest), how many tests it ``collected`` to run itself (an xdist
    controller none), the task's tests by node id, and each canary run as
    (node id, outcome) under its role (``must_fail`` / ``must_pass``); the collectors that failed
    (``collect_errors``), the test framework's callables found replaced (``replaced``, by dotted name), the
    workdir files registered as pytest plugins (``workdir_plugins``, conftest files aside), the tests and test-module
    functions whose code is not their file's (``test_code``: key -> "forged FILE", "from FILE", ...), the workdir
    modules imported before the guard (``early_imports``) and the trace and profile hooks seen set (``tracers``)."""

    name: str
    finished: bool = False
    exited: bool = False
    collect_only: bool = False
    worker: bool = False
    nested: bool = False
    exit_status: int | None = None
    collected: int = 0
    tests: dict[str, str] = field(default_factory=dict)
    canaries: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    collect_errors: frozenset[str] = frozenset()
    replaced: frozenset[str] = frozenset()
    workdir_plugins: frozenset[str] = frozenset()
    declared_xfail: frozenset[str] = frozenset()
    test_code: dict[str, str] = field(default_factory=dict)
    early_imports: frozenset[str] = frozenset()
    tracers: frozenset[str] = frozenset()
    problem: str = ""


def _outcome(case: ElementTree.Element) -> str:
    for child, outcome in (("failure", "failed"), ("error", "error")):
        if case.find(child) is not None:
            return outcome
    skipped = case.find("skipped")
    if skipped is not None:
        return "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
    return "xpassed" if case.get("xpassed") == "1" else "passed"


def parse(name: str, data: bytes, guard: Guard) -> SessionReport:
    """The report in ``data`` (the file ``name``); canaries count only under ``guard``'s names."""
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as error:
        return SessionReport(name=name, problem=f"report {name} does not parse: {error}")
    suites = list(root.iter("testsuite"))
    main = next((suite for suite in suites if suite.get("name") == "pytest"), None)
    if main is None:
        return SessionReport(name=name, problem=f"report {name} has no pytest testsuite")
    properties = {prop.get("name", ""): prop.get("value", "") for prop in main.iter("property")}
    tests = {case.get("nodeid", ""): _outcome(case) for case in main.iter("testcase")}
    declared_xfail = frozenset(
        case.get("nodeid", "") for case in main.iter("testcase") if case.get("declared") == "xfail"
    )
    canaries: dict[str, list[tuple[str, str]]] = {}
    expected = {"must_fail": guard.must_fail, "must_pass": guard.must_pass}
    for suite in suites:
        if suite.get("name") != CANARY_SUITE:
            continue
        for case in suite.iter("testcase"):
            role, nodeid = case.get("name", ""), case.get("nodeid", "")
            if role in expected and nodeid.endswith("::" + expected[role]):
                canaries.setdefault(role, []).append((nodeid, case.get("outcome", "")))
    collect_errors = frozenset(
        case.get("nodeid", "")
        for suite in suites
        if suite.get("name") == COLLECT_ERROR_SUITE
        for case in suite.iter("testcase")
    )
    test_code = {
        case.get("nodeid", ""): case.get("status", "")
        for suite in suites
        if suite.get("name") == TEST_CODE_SUITE
        for case in suite.iter("testcase")
    }
    status = properties.get("exitstatus", "")
    return SessionReport(
        name=name,
        finished=properties.get("session") in ("finished", "exited"),
        exited=properties.get("session") == "exited",
        collect_only=properties.get("collectonly") == "1",
        worker=properties.get("worker") == "1",
        nested=properties.get("nested") == "1",
        exit_status=int(status) if status.lstrip("-").isdigit() else None,
        collected=int(collected) if (collected := properties.get("collected", "")).isdigit() else 0,
        tests={nodeid: outcome for nodeid, outcome in tests.items() if nodeid},
        canaries=canaries,
        collect_errors=collect_errors - {""},
        replaced=frozenset(filter(None, properties.get("replaced", "").split(","))),
        workdir_plugins=frozenset(filter(None, properties.get("workdir_plugins", "").split(","))),
        declared_xfail=declared_xfail - {""},
        test_code={key: status for key, status in test_code.items() if key and status},
        early_imports=frozenset(filter(None, properties.get("early_imports", "").split(","))),
        tracers=frozenset(filter(None, properties.get("tracers", "").split(","))),
    )
