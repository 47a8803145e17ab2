"""The grader's pytest plugin, written outside the workdir under a fresh random name for each grading and
loaded through ``PYTEST_PLUGINS`` with plugin auto-loading off. The grader fills ``CONFIG`` when it writes
the file.

What it does in every pytest process of the grading run:

* registers the pytest plugins auto-loading would have loaded, except those the workdir declares: the
  baseline's (``CONFIG["plugins"]``: [distribution, entry point, value] as the probe found them before the
  diff was applied) and those of any distribution that lives outside ``CONFIG["workdir"]`` (a plugin the
  row's test command installs, as ``uvx -w pytest-json-ctrf`` does), unless ``-p no:<name>`` blocks it;
* watches the first pytest configuration of the process only (a test that runs pytest in-process, through
  ``pytester``, is not the grader's run);
* after the run's own tests, runs two canaries beside them, in the module of each test file that ran:
  one that must fail and one that must pass, under names drawn fresh for this grading, carrying the
  markers of the module's first test (skip, skipif, xfail, parametrize and async runners' left out), so a test setup that
  selects by marker treats them alike. They go through pytest's own run protocol (fixtures, the
  ``makereport`` hooks, ``Function.runtest``) but are never logged: the terminal, the exit status and
  every other reporter see only the task's tests;
* writes a JUnit XML report of this process to ``CONFIG["report_dir"]``: when the session starts (marked
  ``started``), again when it finishes, with each test's outcome and node id and the canaries' in a
  testsuite of their own, and once more (marked ``exited``) from an exit handler registered when this
  module is imported: handlers run last-registered first, so a process ended by ``os._exit``, a signal or
  a cleared handler list after its session never says ``exited``. A pytest process started by another
  one of the run (not an xdist worker) is marked ``nested``. A report that cannot be written is left out;
  pytest carries on.

Runs in the image's own Python and pytest (3.6 and pytest 3 onwards): standard library and pytest only.
"""

import atexit
import importlib
import os
import xml.etree.ElementTree as ElementTree
from typing import Any

import pytest

# Annotated apart (quoted: a 3.6 interpreter cannot subscript dict) so the grader's one-line CONFIG pattern still matches.
CONFIG: "dict[str, Any]"
CONFIG = {"report_dir": "", "workdir": "", "must_fail": "", "must_pass": "", "secret": "", "plugins": [], "max_modules": 16}
_STATE = {"outcomes": {}, "canaries": {}, "collected": 0, "pid": os.getpid(), "config": None, "exitstatus": None}
_LEFT_OUT_MARKERS = ("skip", "skipif", "xfail", "parametrize", "asyncio", "anyio", "trio")
_PARENT_KEY = "ROLLOUT_GUARD_" + CONFIG["must_fail"].upper()
_NESTED = os.environ.get(_PARENT_KEY, str(os.getpid())) != str(os.getpid())
os.environ[_PARENT_KEY] = str(os.getpid())


def _inside_workdir(path):
    workdir = os.path.realpath(CONFIG["workdir"]) if CONFIG["workdir"] else ""
    path = os.path.realpath(str(path))
    return bool(workdir) and (path == workdir or path.startswith(workdir + os.sep))


def _distributions():
    """(name, location, [(entry point name, value)]) of every pytest11 entry point this interpreter sees."""
    try:
        from importlib import metadata
    except ImportError:
        try:
            import importlib_metadata as metadata
        except ImportError:
            metadata = None
    if metadata is not None:
        for dist in metadata.distributions():
            points = [(point.name, point.value) for point in dist.entry_points if point.group == "pytest11"]
            if points:
                yield (dist.metadata or {}).get("Name") or "", str(dist.locate_file("")), points
        return
    try:
        import pkg_resources
    except ImportError:
        return
    for dist in pkg_resources.working_set:
        points = [(name, str(point).split("=", 1)[1].strip()) for name, point in dist.get_entry_map("pytest11").items()]
        if points:
            yield dist.project_name, dist.location or "", points


def _trusted_entry_points():
    baseline = {(dist, name, value) for dist, name, value in CONFIG["plugins"]}
    for dist_name, location, points in _distributions():
        for name, value in points:
            if (dist_name, name, value) in baseline or not _inside_workdir(location):
                yield name, value


def pytest_addhooks(pluginmanager):
    for name, value in _trusted_entry_points():
        if pluginmanager.get_plugin(name) is not None or pluginmanager.is_blocked(name):
            continue
        module_name, _, attribute = value.partition(":")
        plugin = importlib.import_module(module_name.strip())
        for part in filter(None, attribute.strip().split(".")):
            plugin = getattr(plugin, part)
        pluginmanager.register(plugin, name)


def pytest_configure(config):
    if _STATE["config"] is None:
        _STATE["config"] = config
        config.pluginmanager.register(_Watcher(), "rollout-guard-watcher")


def _is_worker(config):
    return hasattr(config, "workerinput") or hasattr(config, "slaveinput")


def _must_fail():
    raise AssertionError(CONFIG["secret"])


def _must_pass():
    return None


def _canary(module, name, function, like):
    if hasattr(pytest.Function, "from_parent"):
        canary = pytest.Function.from_parent(module, name=name, callobj=function)
    else:
        canary = pytest.Function(name, module, callobj=function)
    if hasattr(like, "own_markers") and hasattr(canary, "own_markers"):
        for mark in like.own_markers:
            if mark.name not in _LEFT_OUT_MARKERS:
                canary.own_markers.append(mark)
                canary.keywords[mark.name] = mark
    return canary


def _outcome(reports):
    """passed, failed, error, skipped or xfailed, from a test's setup, call and teardown reports."""
    for report in reports:
        if report.failed:
            return "failed" if report.when == "call" else "error"
    if any(report.skipped for report in reports):
        return "xfailed" if any(hasattr(report, "wasxfail") for report in reports) else "skipped"
    return "passed" if any(report.when == "call" and report.passed for report in reports) else "error"


def _run_canaries(items):
    from _pytest.runner import runtestprotocol

    first = {}
    for item in items:
        module = item.getparent(pytest.Module)
        if module is not None and module.nodeid not in first:
            first[module.nodeid] = (module, item)
    for module, like in list(first.values())[: CONFIG["max_modules"]]:
        for role, name, function in (("must_fail", CONFIG["must_fail"], _must_fail), ("must_pass", CONFIG["must_pass"], _must_pass)):
            try:
                outcome = _outcome(runtestprotocol(_canary(module, name, function, like), log=False, nextitem=None))
            except Exception as error:
                outcome = "error: " + type(error).__name__
            _STATE["canaries"].setdefault(role, []).append([module.nodeid + "::" + name, outcome])


class _Watcher:
    """The hooks that watch the first configuration's session."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        _STATE["collected"] = len(items)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        """After the run's own tests (an xdist controller has none: its workers run the canaries)."""
        yield
        if not session.config.option.collectonly:
            _run_canaries(getattr(session, "items", None) or [])

    def pytest_runtest_logreport(self, report):
        _STATE["outcomes"].setdefault(report.nodeid, []).append(report)

    def pytest_sessionstart(self, session):
        _write("started")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        _STATE["exitstatus"] = int(exitstatus)
        _write("finished", int(exitstatus))


@atexit.register
def _exited():
    """The interpreter is exiting normally: the session's report, if it finished here, says so."""
    if os.getpid() == _STATE["pid"] and _STATE["exitstatus"] is not None:
        _write("exited", _STATE["exitstatus"])


def _testcase(suite, nodeid, outcome, message=""):
    path, _, name = nodeid.rpartition("::")
    case = ElementTree.SubElement(suite, "testcase", classname=path.replace("/", ".").replace("::", "."), name=name or nodeid, nodeid=nodeid)
    if outcome == "failed":
        ElementTree.SubElement(case, "failure", message=message)
    elif outcome in ("skipped", "xfailed"):
        ElementTree.SubElement(case, "skipped", type="pytest.xfail" if outcome == "xfailed" else "pytest.skip")
    elif outcome != "passed":
        ElementTree.SubElement(case, "error", message=outcome)


def _write(stage, exitstatus=None):
    config = _STATE["config"]
    root = ElementTree.Element("testsuites")
    outcomes = {nodeid: _outcome(reports) for nodeid, reports in _STATE["outcomes"].items()}
    suite = ElementTree.SubElement(
        root,
        "testsuite",
        name="pytest",
        tests=str(len(outcomes)),
        failures=str(sum(outcome == "failed" for outcome in outcomes.values())),
        errors=str(sum(outcome == "error" for outcome in outcomes.values())),
        skipped=str(sum(outcome in ("skipped", "xfailed") for outcome in outcomes.values())),
    )
    properties = ElementTree.SubElement(suite, "properties")
    worker = _is_worker(config)
    for name, value in (
        ("session", stage),
        ("exitstatus", "" if exitstatus is None else str(exitstatus)),
        ("collected", str(_STATE["collected"])),
        ("collectonly", str(int(bool(config.option.collectonly)))),
        ("worker", str(int(worker))),
        ("nested", str(int(_NESTED and not worker))),
        ("pid", str(os.getpid())),
    ):
        ElementTree.SubElement(properties, "property", name=name, value=value)
    for nodeid, outcome in outcomes.items():
        _testcase(suite, nodeid, outcome)
    canaries = ElementTree.SubElement(root, "testsuite", name="rollout-canaries")
    for role, runs in _STATE["canaries"].items():
        for nodeid, outcome in runs:
            case = ElementTree.SubElement(canaries, "testcase", name=role, nodeid=nodeid)
            case.set("outcome", outcome)
    path = os.path.join(CONFIG["report_dir"], f"{os.getpid()}.xml")
    try:
        ElementTree.ElementTree(root).write(path + ".tmp", encoding="utf-8", xml_declaration=True)
        os.replace(path + ".tmp", path)
    except OSError:
        pass
