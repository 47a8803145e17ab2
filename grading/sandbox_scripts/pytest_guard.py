"""The grader's pytest plugin, written outside the workdir under a fresh random name for each grading and
loaded through ``PYTEST_PLUGINS`` with plugin auto-loading off. The grader fills ``CONFIG`` when it writes
the file.

What it does in every pytest process of the grading run:

* registers the baseline's pytest plugins itself (``CONFIG["plugins"]``: [distribution, entry point,
  value] as the probe found them before the diff was applied), each only if this interpreter has that
  distribution with that same entry point and no ``-p no:<name>`` blocks it, as auto-loading would have;
* after the run's own tests, runs two canaries beside them, in the module of each test file that ran:
  one that must fail and one that must pass, under names drawn fresh for this grading. They go through
  pytest's own run protocol (fixtures, the ``makereport`` hooks, ``Function.runtest``) but are never
  logged: the terminal, the exit status and every other reporter see only the task's tests;
* writes a JUnit XML report of this process to ``CONFIG["report_dir"]``: when the session starts (marked
  ``started``), again when it finishes, with each test's outcome and node id and the canaries' in a
  testsuite of their own, and once more (marked ``exited``) from an exit handler registered when this
  module is imported, before any code of the workdir runs: handlers run last-registered first, so a
  process ended by ``os._exit``, a signal or a cleared handler list after its session never says ``exited``.

Runs in the image's own Python and pytest (3.6 and pytest 3 onwards): standard library and pytest only.
"""

import atexit
import importlib
import os
import xml.etree.ElementTree as ElementTree

import pytest

CONFIG = {"report_dir": "", "must_fail": "", "must_pass": "", "secret": "", "plugins": [], "max_modules": 16}
_STATE = {"outcomes": {}, "canaries": {}, "collected": 0, "pid": os.getpid(), "config": None, "exitstatus": None}


def _baseline_entry_points():
    try:
        from importlib import metadata
    except ImportError:
        return []
    wanted = {(dist, name, value) for dist, name, value in CONFIG["plugins"]}
    found = []
    for dist in metadata.distributions():
        dist_name = (dist.metadata or {}).get("Name") or ""
        for point in dist.entry_points:
            if point.group == "pytest11" and (dist_name, point.name, point.value) in wanted:
                found.append((point.name, point.value))
    return found


def pytest_addhooks(pluginmanager):
    for name, value in _baseline_entry_points():
        if pluginmanager.get_plugin(name) is not None or pluginmanager.is_blocked(name):
            continue
        module_name, _, attribute = value.partition(":")
        plugin = importlib.import_module(module_name.strip())
        for part in filter(None, attribute.strip().split(".")):
            plugin = getattr(plugin, part)
        pluginmanager.register(plugin, name)


def _is_worker(config):
    return hasattr(config, "workerinput") or hasattr(config, "slaveinput")


def _must_fail():
    raise AssertionError(CONFIG["secret"])


def _must_pass():
    return None


def _canary(module, name, function):
    if hasattr(pytest.Function, "from_parent"):
        return pytest.Function.from_parent(module, name=name, callobj=function)
    return pytest.Function(name, module, callobj=function)


def _outcome(reports):
    """passed, failed, error or skipped, as JUnit counts a test from its setup, call and teardown reports."""
    for report in reports:
        if report.failed:
            return "failed" if report.when == "call" else "error"
    if any(report.skipped for report in reports):
        return "skipped"
    return "passed" if any(report.when == "call" and report.passed for report in reports) else "error"


def _run_canaries(items):
    from _pytest.runner import runtestprotocol

    modules = []
    for item in items:
        module = item.getparent(pytest.Module)
        if module is not None and module not in modules:
            modules.append(module)
    for module in modules[: CONFIG["max_modules"]]:
        for role, name, function in (("must_fail", CONFIG["must_fail"], _must_fail), ("must_pass", CONFIG["must_pass"], _must_pass)):
            try:
                outcome = _outcome(runtestprotocol(_canary(module, name, function), log=False, nextitem=None))
            except Exception as error:
                outcome = "error: " + type(error).__name__
            _STATE["canaries"].setdefault(role, []).append([module.nodeid + "::" + name, outcome])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    _STATE["collected"] = len(items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    """After the run's own tests (an xdist controller has none: its workers run the canaries)."""
    yield
    if not session.config.option.collectonly:
        _run_canaries(getattr(session, "items", None) or [])


def pytest_runtest_logreport(report):
    _STATE["outcomes"].setdefault(report.nodeid, []).append(report)


def pytest_sessionstart(session):
    _STATE["config"] = session.config
    _write(session.config, "started")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    _STATE["exitstatus"] = int(exitstatus)
    _write(session.config, "finished", int(exitstatus))


@atexit.register
def _exited():
    """The interpreter is exiting normally: the session's report, if it finished here, says so."""
    if os.getpid() == _STATE["pid"] and _STATE["exitstatus"] is not None:
        _write(_STATE["config"], "exited", _STATE["exitstatus"])


def _testcase(suite, nodeid, outcome, message=""):
    path, _, name = nodeid.rpartition("::")
    case = ElementTree.SubElement(suite, "testcase", classname=path.replace("/", ".").replace("::", "."), name=name or nodeid, nodeid=nodeid)
    if outcome == "failed":
        ElementTree.SubElement(case, "failure", message=message)
    elif outcome == "skipped":
        ElementTree.SubElement(case, "skipped")
    elif outcome != "passed":
        ElementTree.SubElement(case, "error", message=outcome)


def _write(config, stage, exitstatus=None):
    root = ElementTree.Element("testsuites")
    outcomes = {nodeid: _outcome(reports) for nodeid, reports in _STATE["outcomes"].items()}
    suite = ElementTree.SubElement(
        root,
        "testsuite",
        name="pytest",
        tests=str(len(outcomes)),
        failures=str(sum(outcome == "failed" for outcome in outcomes.values())),
        errors=str(sum(outcome == "error" for outcome in outcomes.values())),
        skipped=str(sum(outcome == "skipped" for outcome in outcomes.values())),
    )
    properties = ElementTree.SubElement(suite, "properties")
    for name, value in (
        ("session", stage),
        ("exitstatus", "" if exitstatus is None else str(exitstatus)),
        ("collected", str(_STATE["collected"])),
        ("collectonly", str(int(bool(config.option.collectonly)))),
        ("worker", str(int(_is_worker(config)))),
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
    ElementTree.ElementTree(root).write(path + ".tmp", encoding="utf-8", xml_declaration=True)
    os.replace(path + ".tmp", path)
