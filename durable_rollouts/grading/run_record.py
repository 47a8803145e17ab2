"""A grading run's record, as the grader's own reporter wrote it: the run's pytest sessions folded into one view,
and where a test name that a row's judge uses stands in it.

Invariants:

* Only the run's own sessions count: a ``nested`` one (a test that runs pytest) is left out.
* ``outcomes`` holds each task test once, by node id; canaries are kept by (role, module node id), so two runs whose
  canaries were drawn under other names compare module by module.
* ``find`` matches a judge's name to the record's node ids: the same id; the same test under a path that ends the
  other's (pytest's ids are relative to its rootdir, a parser's may not be); a name cut inside its parameters
  (SWE-bench's log parser splits at white space) as the start of one. A name that is no ``path::test`` id finds nothing.
* ``files`` are the test files the run reported on, collection errors included: a test of such a file should be in
  the record whatever its name.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from durable_rollouts.grading.session_reports import SessionReport

NOT_RUN = ("skipped", "xfailed")
PASSING = ("passed", "xpassed")
_PARAMETERS = re.compile(r"\[.*\]$")


def function_of(nodeid: str) -> str:
    """A test's node id without its parameters (``t.py::test_x`` of ``t.py::test_x[1-a]``)."""
    return _PARAMETERS.sub("", nodeid)


def missing_from(run: RunRecord, baseline: RunRecord) -> list[str]:
    """The baseline's tests the run does not hold: by node id, except that a parametrised test only counts as
    missing when the run holds fewer of its parameter sets (ids made from values, random or the code's output,
    may change between runs; their number does not)."""
    before, now = Counter(map(function_of, baseline.outcomes)), Counter(map(function_of, run.outcomes))
    return [
        nodeid
        for nodeid in baseline.outcomes
        if nodeid not in run.outcomes and now[function_of(nodeid)] < before[function_of(nodeid)]
    ]


def own_sessions(reports: Iterable[SessionReport]) -> list[SessionReport]:
    """The reports of the run's own pytest processes (not ``nested`` ones)."""
    return [report for report in reports if not report.nested]


def _parts(path: str) -> tuple[str, ...]:
    return tuple(part for part in PurePosixPath(path).parts if part not in ("/", ".", ".."))


def same_file(one: str, other: str) -> bool:
    """Two test paths name the same file when one's components end the other's (``test_x.py`` for
    ``tests/test_x.py`` run from ``tests/``)."""
    ours, theirs = _parts(other), _parts(one)
    shorter = min(len(ours), len(theirs))
    return shorter > 0 and ours[-shorter:] == theirs[-shorter:]


def module_of(nodeid: str) -> str:
    """The module part of a test's node id (``tests/test_x.py`` of ``tests/test_x.py::TestX::test_a``)."""
    return nodeid.partition("::")[0]


@dataclass(frozen=True)
class RunRecord:
    """One grading run's own sessions, their tests' outcomes, canary runs ((node id, outcome)) by (role, module),
    failed collectors, the framework callables found replaced, the workdir files registered as plugins, the test code
    that is not its file's and the workdir modules imported before the guard (``SessionReport``)."""

    sessions: tuple[SessionReport, ...] = ()
    outcomes: dict[str, str] = field(default_factory=dict)
    canaries: dict[tuple[str, str], tuple[tuple[str, str], ...]] = field(default_factory=dict)
    collect_errors: frozenset[str] = frozenset()
    replaced: frozenset[str] = frozenset()
    workdir_plugins: frozenset[str] = frozenset()
    declared_xfail: frozenset[str] = frozenset()
    test_code: dict[str, str] = field(default_factory=dict)
    early_imports: frozenset[str] = frozenset()
    tracers: frozenset[str] = frozenset()

    @property
    def files(self) -> frozenset[str]:
        return frozenset(module_of(nodeid) for nodeid in [*self.outcomes, *self.collect_errors])

    @functools.cached_property
    def _by_function(self) -> dict[str, list[tuple[str, str, str]]]:
        """(path, test, node id) of every test, by its function's name (the test part without parameters)."""
        index: dict[str, list[tuple[str, str, str]]] = {}
        for nodeid in self.outcomes:
            path, _, test = nodeid.partition("::")
            index.setdefault(_PARAMETERS.sub("", test), []).append((path, test, nodeid))
        return index

    def find(self, name: str) -> list[str]:
        """The node ids of the record that ``name`` (a judge's test name) stands for (see the module docstring)."""
        if name in self.outcomes:
            return [name]
        path, separator, test = name.partition("::")
        if not separator:
            return []
        cut = "[" in test and not test.endswith("]")
        candidates = self._by_function.get(test.partition("[")[0] if cut else _PARAMETERS.sub("", test), [])
        return [
            nodeid
            for their_path, their_test, nodeid in candidates
            if (their_test == test or (cut and their_test.startswith(test))) and same_file(their_path, path)
        ]

    def has_file_of(self, name: str) -> bool:
        """The record reported on the file of ``name`` (a ``path::test`` id)."""
        path, separator, _ = name.partition("::")
        return bool(separator) and any(same_file(file, path) for file in self.files)


def record(reports: Iterable[SessionReport]) -> RunRecord:
    """The run's record from its reports (see the module docstring)."""
    sessions = tuple(own_sessions(reports))
    canaries: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}
    for report in sessions:
        for role, runs in report.canaries.items():
            for nodeid, outcome in runs:
                key = (role, nodeid.rpartition("::")[0])
                canaries[key] = (*canaries.get(key, ()), (nodeid, outcome))
    return RunRecord(
        sessions=sessions,
        outcomes={nodeid: outcome for report in sessions for nodeid, outcome in report.tests.items()},
        canaries=canaries,
        collect_errors=frozenset().union(*(report.collect_errors for report in sessions)),
        replaced=frozenset().union(*(report.replaced for report in sessions)),
        workdir_plugins=frozenset().union(*(report.workdir_plugins for report in sessions)),
        declared_xfail=frozenset().union(*(report.declared_xfail for report in sessions)),
        test_code={key: status for report in sessions for key, status in report.test_code.items()},
        early_imports=frozenset().union(*(report.early_imports for report in sessions)),
        tracers=frozenset().union(*(report.tracers for report in sessions)),
    )
