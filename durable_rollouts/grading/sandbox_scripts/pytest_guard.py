"""The grader's pytest plugin: written outside the workdir under a fresh random name for each grading, loaded through
``PYTEST_PLUGINS`` with plugin auto-loading off; the grader fills ``CONFIG`` when it writes the file.

In every pytest process of the run (the first configuration only) it registers the plugins auto-loading would have
loaded except the workdir's, runs a must-fail and a must-pass canary in each test module after the run's own tests
(never logged), snapshots the test framework when it is imported and names what was replaced since, checks that each
test runs the code its own file compiles to (from the source kept before pytest imported it), records trace and
profile hooks and the workdir modules imported before it, and writes a JUnit XML report of the process when the
session starts, when it finishes and from an exit handler; pytest as the program then ends with its session's own
status. docs/grading.md ("What is checked in the run itself") states every rule.

Key invariant: what the report holds comes from objects the plugin took before any conftest or test module ran, and
from its own compile of the files; nothing the code under test prints or claims about itself is asked. Runs in the
image's own Python and pytest (3.6 and pytest 3 onwards): standard library and pytest only.
"""

import ast
import atexit
import builtins
import importlib
import inspect
import os
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree
from typing import Any

import pytest

# Annotated apart (quoted: a 3.6 interpreter cannot subscript dict) so the grader's one-line CONFIG pattern still
# matches.
CONFIG: "dict[str, Any]"
# Filled in by the grader (``run_guard.plugin_text``), which rewrites this one line.
CONFIG = {}
_STATE = {
    "outcomes": {},
    "canaries": {},
    "collect_errors": [],
    "declared_xfail": set(),
    "collected": 0,
    "pid": os.getpid(),
    "config": None,
    "exitstatus": None,
    "test_code": {},
    "tracers": set(),
    "session": None,
}
_LEFT_OUT_MARKERS = ("skip", "skipif", "xfail", "parametrize", "asyncio", "anyio", "trio")
_PARENT_KEY = "ROLLOUT_GUARD_" + CONFIG["must_fail"].upper()
_NESTED = os.environ.get(_PARENT_KEY, str(os.getpid())) != str(os.getpid())
os.environ[_PARENT_KEY] = str(os.getpid())
# What a verdict rests on: the run protocol, reports, outcomes, skipping, collection, the hook machinery and unittest's
# runner. A name missing from this pytest version is left out of the snapshot.
_FRAMEWORK = (
    ("pytest", ("skip", "xfail", "fail", "exit", "main", "importorskip")),
    ("_pytest.outcomes", ("skip", "xfail", "fail", "exit", "importorskip", "OutcomeException.__init__")),
    (
        "_pytest.python",
        (
            "Function.runtest",
            "Function.setup",
            "Function._getobj",
            "pytest_pyfunc_call",
            "PyCollector.collect",
            "Module.collect",
        ),
    ),
    (
        "_pytest.runner",
        (
            "runtestprotocol",
            "call_and_report",
            "call_runtest_hook",
            "pytest_runtest_protocol",
            "pytest_runtest_makereport",
        ),
    ),
    (
        "_pytest.runner",
        (
            "CallInfo.from_call",
            "pytest_runtest_setup",
            "pytest_runtest_call",
            "pytest_runtest_teardown",
            "check_interactive_exception",
        ),
    ),
    (
        "_pytest.reports",
        (
            "TestReport.__init__",
            "TestReport.from_item_and_call",
            "BaseReport.passed",
            "BaseReport.failed",
            "BaseReport.skipped",
        ),
    ),
    (
        "_pytest.skipping",
        (
            "pytest_runtest_setup",
            "pytest_runtest_call",
            "pytest_runtest_makereport",
            "evaluate_skip_marks",
            "evaluate_xfail_marks",
        ),
    ),
    (
        "_pytest.main",
        (
            "Session.perform_collect",
            "Session.genitems",
            "pytest_collection_modifyitems",
            "pytest_runtestloop",
            "wrap_session",
        ),
    ),
    ("_pytest.main", ("pytest_cmdline_main", "_main")),
    ("_pytest.unittest", ("TestCaseFunction.runtest", "TestCaseFunction.setup", "pytest_runtest_makereport")),
    ("_pytest.config", ("main", "Config.getoption")),
    ("pluggy._callers", ("_multicall",)),
    ("pluggy._hooks", ("HookCaller.__call__", "_HookCaller.__call__")),
    ("pluggy._manager", ("PluginManager._hookexec",)),
    (
        "unittest.case",
        ("TestCase.run", "TestCase.__call__", "TestCase.fail", "TestCase.assertEqual", "TestCase.assertTrue"),
    ),
    (
        "unittest.case",
        (
            "TestCase.assertFalse",
            "TestCase.assertIn",
            "TestCase.assertRaises",
            "TestCase.assertIsNone",
            "TestCase.skipTest",
        ),
    ),
    (
        "unittest.result",
        (
            "TestResult.addError",
            "TestResult.addFailure",
            "TestResult.addSuccess",
            "TestResult.addSkip",
            "TestResult.wasSuccessful",
        ),
    ),
    # How a test module's code is made: the guard compiles each test file again with these to check the code that ran.
    (
        "_pytest.assertion.rewrite",
        ("rewrite_asserts", "_rewrite_test", "AssertionRewriter.run", "AssertionRewriter.visit_Assert"),
    ),
    ("_pytest.assertion.rewrite", ("AssertionRewritingHook.exec_module", "AssertionRewritingHook.find_spec")),
    (
        "ast",
        (
            "parse",
            "walk",
            "NodeVisitor.visit",
            "NodeVisitor.generic_visit",
            "NodeTransformer.generic_visit",
            "copy_location",
        ),
    ),
)
_MISSING = object()
# The interpreter's own compile, taken before any conftest or test module: a replacement (a Python function, or a
# builtin of another name) made before this plugin was imported is named in every report (``_replaced``).
_COMPILE = builtins.compile
_COMPILE_GENUINE = (
    type(_COMPILE) is type(len) and getattr(_COMPILE, "__self__", None) is builtins and _COMPILE.__name__ == "compile"
)
# Files changed after this one was written (at the grading's start, before the diff) were written by the run itself.
_STARTED_NS = os.stat(__file__).st_ctime_ns
_IMPORTED_NS = int(
    time.time() * 1e9
)  # this pytest process's start, near enough: a conftest newer than it was written by the run


def _module(module_name):
    """The module as its package holds it (``_pytest`` -> ``.python``), not as ``sys.modules`` says: an entry swapped
    for a copy there hides nothing."""
    try:
        importlib.import_module(module_name)
        top, *parts = module_name.split(".")
        module = sys.modules[top]
        for part in parts:
            module = getattr(module, part)
    except Exception:
        return _MISSING
    return module


def _lookup(module, path):
    """The attribute at ``path`` in the module object, without calling descriptors (a classmethod stays itself)."""
    value = module
    for part in path.split("."):
        try:
            value = inspect.getattr_static(value, part)
        except AttributeError:
            return _MISSING
    return value


def _code(value):
    """The code object behind a callable (a function, a classmethod, a property's getter), else None."""
    for attribute in ("__func__", "fget"):
        value = getattr(value, attribute, None) or value
    code = getattr(value, "__code__", None)
    return code if type(code) is type(_code.__code__) else None  # a class's __code__ is a descriptor, not code


def _framework_roots():
    roots = []
    for name in ("pytest", "_pytest", "pluggy", "unittest", __name__):
        path = getattr(sys.modules.get(name), "__file__", None)
        if path:
            roots.append(os.path.dirname(os.path.realpath(path)) + os.sep)
    return (
        *roots,
        os.path.realpath(ast.__file__),
    )  # ast's file alone: the standard library's folder may hold site-packages


_FILE_CODES: "dict[Any, Any]" = {}  # (path, mtime, size) -> the code objects its source compiles to, or None
_SOURCES: "dict[str, bytes]" = {}  # a test module's path -> its source as it was before pytest imported it


def _all_codes(code, found):
    found.add(code)
    for const in code.co_consts:
        if type(const) is type(code):
            _all_codes(const, found)
    return found


def _rewritten(source, path):
    """The file compiled as pytest's assertion rewriter compiles a test module, with the interpreter's own compile."""
    _, rewrite_asserts, _ = _FRAMEWORK_SNAPSHOT[("_pytest.assertion.rewrite", "rewrite_asserts")]
    tree = _COMPILE(source, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    try:
        rewrite_asserts(tree, source, path, _STATE["config"])
    except TypeError:  # pytest before 5: (module, module_path, config)
        rewrite_asserts(tree, path, _STATE["config"])
    return _COMPILE(tree, path, "exec", dont_inherit=True)


def _source(path):
    """The file's source: a test module's as it was just before pytest imported it (``_Watcher.pytest_collectstart``),
    any other file's as it is now."""
    if path in _SOURCES:
        return _SOURCES[path]
    with open(path, "rb") as handle:
        return handle.read()


def _file_codes(path):
    """Every code object the file at ``path`` compiles to, plain and as pytest rewrites a test module; None when there
    is no source to compile."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    key = (path, status.st_mtime_ns, status.st_size)
    if key not in _FILE_CODES:
        try:
            source = _source(path)
            codes = _all_codes(_COMPILE(source, path, "exec", dont_inherit=True), set())
        except Exception:
            codes = None
        # pytest rewrites test modules and conftest files (and, with auto-loading, plugins), never itself.
        if codes is not None and not path.startswith(_framework_roots()):
            try:
                _all_codes(_rewritten(source, path), codes)
            except Exception:
                pass  # not a module pytest could rewrite: the plain compile stands alone
        _FILE_CODES[key] = codes
    return _FILE_CODES[key]


def _compiled_from(code):
    """True when ``code`` is what its file compiles to, False when it is not (or the run wrote the file), None when its
    file has no readable source (a builtin's, ``<string>``'s, a .pyc-only install's)."""
    path = os.path.realpath(code.co_filename)
    if not os.path.isfile(path):
        return None if code.co_filename.startswith("<") or not code.co_filename.endswith(".py") else False
    try:
        # The diff and the reset write workdir files after the guard, and a test module's source is kept from before
        # its import; any other file newer than the guard was written by the run.
        if path not in _SOURCES and not _inside_workdir(path) and os.stat(path).st_ctime_ns > _written_after(path):
            return False
    except OSError:
        return None
    codes = _file_codes(path)
    return None if codes is None else code in codes


def _written_after(path):
    """When a file outside the workdir must have been written by to be trusted: the grading's start, or, for a file
    already imported when pytest (the program) imported this plugin, that moment (a row's command may install pytest
    itself after the grading began, as Harbor's ``uvx -w`` does; nothing of the workdir ran before this plugin then)."""
    return _IMPORTED_NS if path in _PRELOADED and _pytest_is_the_program() else _STARTED_NS


def _foreign(code):
    """The code lives outside the framework's packages (and this plugin), or is not what its file compiles to:
    replaced, maybe before this plugin was imported (a script that imports the library under test, then calls
    ``pytest.main``), maybe under a forged file name, maybe from a file the run rewrote."""
    if code is None:
        return False
    if not os.path.realpath(code.co_filename).startswith(_framework_roots()):
        return True
    return _compiled_from(code) is False


def _snapshot(names):
    """(module name, path) -> (the module object, the value, its code) for every name found."""
    snapshot = {}
    for module_name, paths in names:
        module = _module(module_name)
        for path in paths:
            value = _MISSING if module is _MISSING else _lookup(module, path)
            if value is not _MISSING:
                snapshot[(module_name, path)] = (module, value, _code(value))
    return snapshot


def _changed(snapshot):
    """The names whose module left ``sys.modules``' entry, whose value or code was replaced in the module object
    taken at the snapshot (a copy put in ``sys.modules`` hides nothing), or whose code lives outside the framework."""
    for (module_name, path), (module, value, code) in snapshot.items():
        now = _lookup(module, path)
        if (
            sys.modules.get(module_name) is not module
            or now is not value
            or _code(now) is not code
            or _foreign(_code(now))
        ):
            yield module_name + "." + path


_FRAMEWORK_SNAPSHOT = _snapshot(_FRAMEWORK)
_MODULE_DICT = vars(type(sys))["__dict__"]  # read past any __getattribute__ a module's class was given


def _framework_modules():
    """(name, module) of every module of the framework's packages imported by now."""
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("_pytest", "pluggy", "pytest", "unittest") and module is not None:
            yield name, module


def _fingerprint(value):
    """What a callable runs: the object, its code and its defaults (a ``__code__`` or ``__defaults__`` swapped in place
    leaves the object the same)."""
    function = value
    for attribute in ("__func__", "fget"):
        function = getattr(function, attribute, None) or function
    if not inspect.isfunction(function):  # objects that make attributes up on demand (``mock.call``) give no more
        return (id(value), None, None, None)
    return (id(value), id(function.__code__), id(function.__defaults__), id(function.__kwdefaults__))


def _members(modules):
    """Dotted name -> (value, fingerprint): every callable a framework module binds (its functions, the classes it
    defines or imports, other callables), and every callable or descriptor of each class it defines (a class
    attribute added later, such as a property that shadows an inherited one, counts)."""
    found = {}
    for module_name, module in modules:
        try:
            namespace = dict(_MODULE_DICT.__get__(module))
        except Exception:
            continue
        for name, value in namespace.items():
            if callable(value):
                found[module_name + "." + name] = (value, _fingerprint(value))
            if isinstance(value, type) and value.__dict__.get("__module__") == module_name:
                for key, member in list(vars(value).items()):
                    if callable(member) or hasattr(type(member), "__get__"):
                        found[module_name + "." + name + "." + key] = (member, _fingerprint(member))
    return found


_MEMBER_MODULES = list(_framework_modules())
_MEMBERS = _members(_MEMBER_MODULES)


def _members_changed():
    """The framework's callables and class members replaced (or their code or defaults), added or removed since this
    plugin was imported; one replaced by installed code (a plugin of the image that patches pytest) is marked
    ``INSTALLED_PATCH``."""
    now = _members(_MEMBER_MODULES)
    changed = [name for name, (_, mark) in _MEMBERS.items() if now.get(name, (None, None))[1] != mark]
    changed += [name for name in now if name not in _MEMBERS and name.count(".") > 1]
    if not _pytest_is_the_program():  # a script ran before this plugin (the library imported, then pytest.main)
        changed += [name for name, (value, _) in _MEMBERS.items() if name not in changed and _planted_value(value)]
    return sorted(name + (INSTALLED_PATCH if _installed_code(now.get(name, (None,))[0]) else "") for name in changed)


def _planted(code):
    """Code the workdir wrote, or code that is not what the file it names compiles to (a framework member replaced
    before this plugin was imported; code generated from text, a dataclass's ``__init__``, names no file)."""
    if code is None or code.co_filename.startswith("<"):
        return False
    return _inside_workdir(code.co_filename) or _compiled_from(code) is False


def _planted_value(value):
    """A callable the workdir planted in a framework module before this plugin: its code, or for a class the module
    that defined it."""
    if not isinstance(value, type):
        return _planted(_code(value))
    module = sys.modules.get(getattr(value, "__module__", ""), None)
    path = getattr(module, "__file__", None)
    return isinstance(path, str) and _inside_workdir(path)  # its methods are members of their own


def _hook_machinery_changed(config):
    """What pluggy calls between a hook call and the implementations, when it is not installed code: the plugin
    manager's inner executor, each hook caller's executor and class (the hook relay's entries), and the relay itself."""
    if config is None:
        return []
    manager, found = config.pluginmanager, []
    inner = getattr(manager, "_inner_hookexec", None)
    if inner is not None and not _installed_code(inner):
        found.append("pluggy PluginManager._inner_hookexec")
    hook = getattr(config, "hook", None)
    # pytest 7.0 to 9.0 hand out the relay behind a PathAwareHookProxy of their own.
    if hook is not manager.hook and getattr(hook, "_hook_relay", None) is not manager.hook:
        found.append("pytest Config.hook")
    for name, caller in sorted(vars(manager.hook).items()):
        if not name.startswith("pytest_"):
            continue
        if not _installed_code(inspect.getattr_static(type(caller), "__call__", None)):
            found.append("pluggy hook relay " + name)
        elif not _installed_code(getattr(caller, "_hookexec", None)):
            found.append("pluggy hook caller " + name + "._hookexec")
        elif getattr(caller._hookexec, "__self__", manager) is not manager:  # a genuine caller of another manager
            found.append("pluggy hook caller " + name + " (bound to another plugin manager)")
    session = _STATE["session"]
    for what, instance in [("Config", config), ("PluginManager", manager), ("Session", session)]:
        found += ["pytest " + what + "." + name + " (shadowed on the instance)" for name in _shadowed(instance)]
    for item in list(getattr(session, "items", None) or [])[:_MAX_ITEMS_CHECKED]:
        found += ["pytest " + type(item).__name__ + "." + name + " (shadowed on an item)" for name in _shadowed(item)]
    return sorted(set(found))


_MAX_ITEMS_CHECKED = 10000


def _shadowed(instance):
    """Names an instance holds in its own ``__dict__`` that its class defines as a method: a lookup such as
    ``session.gethookproxy`` (what ``item.ihook`` calls) then runs the instance's callable instead."""
    if instance is None:
        return []
    try:
        own = list(object.__getattribute__(instance, "__dict__"))
    except Exception:
        return []
    return sorted(set(own) & _methods_of(type(instance)))


_METHODS: "dict[type, set[str]]" = {}  # a class -> the names it defines as plain functions


def _methods_of(kind):
    """The names ``kind`` (with its bases) defines as plain functions, once per class."""
    if kind not in _METHODS:
        _METHODS[kind] = {name for name in dir(kind) if inspect.isfunction(inspect.getattr_static(kind, name, None))}
    return _METHODS[kind]


INSTALLED_PATCH = " (by installed code)"  # the host matches it (``tamper_checks.INSTALLED_PATCH``)


def _installed_code(value):
    """``value`` is a function (or descriptor over one) that an installed file outside the workdir compiles to."""
    code = _code(value)
    return code is not None and _installed(os.path.realpath(code.co_filename)) and _compiled_from(code) is True


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
    """passed, xpassed (a non-strict xfail that passed), failed, error, skipped or xfailed, from a test's setup, call
    and teardown reports."""
    for report in reports:
        if report.failed:
            return "failed" if report.when == "call" else "error"
    if any(report.skipped for report in reports):
        return "xfailed" if any(hasattr(report, "wasxfail") for report in reports) else "skipped"
    passed = [report for report in reports if report.when == "call" and report.passed]
    if not passed:
        return "error"
    return "xpassed" if any(hasattr(report, "wasxfail") for report in passed) else "passed"


def _declares_xfail(item):
    """The test itself expects to fail: an xfail marker, or unittest's ``expectedFailure``."""
    return item.get_closest_marker("xfail") is not None or bool(
        getattr(getattr(item, "obj", None), "__unittest_expecting_failure__", False)
    )


def _declares_skip(node):
    return node.get_closest_marker("skip") is not None or node.get_closest_marker("skipif") is not None


def _shown(path):
    return os.path.relpath(path, os.path.realpath(CONFIG["workdir"])) if _inside_workdir(path) else path


def _code_status(function, own_file):
    """Where a test's (or a test module's function's) code comes from: "" when it is what ``own_file`` compiled to,
    else "forged FILE" (not what the file it names compiles to), "from FILE" (another file's), "unreadable NAME"
    (no source: ``exec``'d text, a .pyc-only install) or "no code" (not a Python function)."""
    function = getattr(function, "__func__", function)
    code = getattr(function, "__code__", None)
    if type(code) is not type(_code_status.__code__):
        return "no code"
    path = os.path.realpath(code.co_filename)
    genuine = _compiled_from(code)
    if genuine is False:
        return "forged " + _shown(path)
    if genuine is None:
        return "unreadable " + code.co_filename
    return "" if path == own_file else "from " + _shown(path)


def _by_function(nodeid):
    """A test's key in the code record: its node id without parameters, whose ids may change between runs."""
    return nodeid[: nodeid.index("[")] if nodeid.endswith("]") and "[" in nodeid else nodeid


def _note_tracers():
    """Record the trace and profile hooks set now (this thread's and new threads'; ``sys.monitoring``'s tools): a hook
    can swap what a test calls inside the call itself and put it back before it returns."""
    hooks = [
        ("trace", sys.gettrace()),
        ("profile", sys.getprofile()),
        ("thread trace", getattr(threading, "_trace_hook", None)),
        ("thread profile", getattr(threading, "_profile_hook", None)),
    ]
    for kind, hook in hooks:
        if hook is not None:
            code = _code(hook)
            where = _shown(os.path.realpath(code.co_filename)) if code is not None else type(hook).__module__
            _STATE["tracers"].add(kind + " " + getattr(hook, "__qualname__", type(hook).__name__) + " (" + where + ")")
    monitoring = getattr(sys, "monitoring", None)
    for tool in range(6) if monitoring is not None else ():
        if monitoring.get_tool(tool):
            _STATE["tracers"].add("monitoring " + str(monitoring.get_tool(tool)))


def _check_test(item):
    """Record where the function pytest calls for ``item`` comes from, unless it is its own file's (canaries aside)."""
    _note_tracers()
    if not isinstance(item, pytest.Function) or item.name in (CONFIG["must_fail"], CONFIG["must_pass"]):
        return
    try:
        status = _code_status(item.obj, os.path.realpath(str(getattr(item, "path", None) or item.fspath)))
    except Exception as error:
        status = "unreadable: " + type(error).__name__
    if status:
        _STATE["test_code"].setdefault(_by_function(item.nodeid), status)


def _is_test_module(node):
    """A Python test module (doctest collectors subclass ``pytest.Module`` but run no test functions)."""
    return isinstance(node, pytest.Module) and not type(node).__name__.startswith("Doctest")


def _sweep_modules(items):
    """Record every function a test module that ran defines (in its namespace and its classes) whose code is not what
    its file compiled to: a test or a helper rewritten after collection."""
    seen = set()
    for item in items:
        module = item.getparent(pytest.Module)
        if not _is_test_module(module) or module.nodeid in seen:
            continue
        seen.add(module.nodeid)
        try:
            obj = vars(module).get("_obj")  # what collection imported; never import it again here
            if obj is None:
                continue
            namespace, name = _MODULE_DICT.__get__(obj), _MODULE_DICT.__get__(obj).get("__name__")
            own_file = os.path.realpath(str(getattr(module, "path", None) or module.fspath))
            functions = []
            for value in list(namespace.values()):
                if isinstance(value, type) and value.__dict__.get("__module__") == name:
                    functions += [member for member in list(vars(value).values()) if inspect.isfunction(member)]
                elif inspect.isfunction(value):
                    functions.append(value)
            for function in functions:
                code = _code(function)
                generated = code is not None and code.co_filename.startswith("<")  # a dataclass's own methods
                if getattr(function, "__module__", None) == name and not generated:
                    status = _code_status(function, own_file)
                    if status:
                        key = module.nodeid + "::" + str(function.__qualname__).replace(".", "::")  # as pytest's ids
                        _STATE["test_code"].setdefault(key, status)
        except Exception as error:
            _STATE["test_code"].setdefault(module.nodeid, "unreadable: " + type(error).__name__)


def _run_canaries(items):
    from _pytest.runner import runtestprotocol

    first = {}
    for item in items:
        module = item.getparent(pytest.Module)
        if module is not None and module.nodeid not in first:
            first[module.nodeid] = (module, item)
    for module, like in list(first.values())[: CONFIG["max_modules"]]:
        for role, name, function in (
            ("must_fail", CONFIG["must_fail"], _must_fail),
            ("must_pass", CONFIG["must_pass"], _must_pass),
        ):
            try:
                outcome = _outcome(runtestprotocol(_canary(module, name, function, like), log=False, nextitem=None))
            except Exception as error:
                outcome = "error: " + type(error).__name__
            if outcome == "skipped" and _declares_skip(module):
                outcome = "declared-skip"  # the module itself says skip (``pytestmark``): the canary is skipped with it
            _STATE["canaries"].setdefault(role, []).append([module.nodeid + "::" + name, outcome])


class _Watcher:
    """The hooks that watch the first configuration's session."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        _STATE["collected"] = len(items)
        _STATE["declared_xfail"] = {item.nodeid for item in items if _declares_xfail(item)}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        """After the run's own tests (an xdist controller has none: its workers run the canaries)."""
        yield
        if not session.config.option.collectonly:
            _run_canaries(getattr(session, "items", None) or [])

    def pytest_collectstart(self, collector):
        """Keep a test module's source before pytest imports it: the code that runs is checked against it."""
        if _is_test_module(collector):
            path = os.path.realpath(str(getattr(collector, "path", None) or collector.fspath))
            try:
                _SOURCES.setdefault(path, _source(path))
            except OSError:
                pass

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item):
        """The test's function as pytest is about to call it, and again after (a swap made while it ran)."""
        _check_test(item)
        yield
        _check_test(item)

    def pytest_runtest_logreport(self, report):
        _STATE["outcomes"].setdefault(report.nodeid, []).append(report)

    def pytest_collectreport(self, report):
        if report.failed:
            _STATE["collect_errors"].append(report.nodeid)

    def pytest_sessionstart(self, session):
        _STATE["session"] = session
        _write("started")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        _sweep_modules(getattr(session, "items", None) or [])
        _STATE["exitstatus"] = int(exitstatus)
        _write("finished", int(exitstatus))


def _pytest_is_the_program():
    """This process was started as pytest itself (its console script or ``python -m pytest``), so its exit status is
    its session's."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = os.path.basename(sys.argv[0]) if sys.argv else ""
    return getattr(spec, "name", "") in ("pytest", "pytest.__main__") or program in ("pytest", "py.test")


@atexit.register
def _exited():
    """The interpreter is exiting normally: the session's report, if it finished here, says so; pytest as the program
    then ends with the session's status (see the module docstring)."""
    if os.getpid() != _STATE["pid"] or _STATE["exitstatus"] is None:
        return
    _write("exited", _STATE["exitstatus"])
    if _pytest_is_the_program() and not _is_worker(_STATE["config"]):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(_STATE["exitstatus"])


def _testcase(suite, nodeid, outcome, message=""):
    path, _, name = nodeid.rpartition("::")
    case = ElementTree.SubElement(
        suite, "testcase", classname=path.replace("/", ".").replace("::", "."), name=name or nodeid, nodeid=nodeid
    )
    if nodeid in _STATE["declared_xfail"]:
        case.set("declared", "xfail")
    if outcome == "failed":
        ElementTree.SubElement(case, "failure", message=message)
    elif outcome in ("skipped", "xfailed"):
        ElementTree.SubElement(case, "skipped", type="pytest.xfail" if outcome == "xfailed" else "pytest.skip")
    elif outcome == "xpassed":
        case.set("xpassed", "1")
    elif outcome != "passed":
        ElementTree.SubElement(case, "error", message=outcome)


def _replaced():
    """The framework's and this plugin's callables replaced since the snapshot (see ``_changed``)."""
    own = ["rollout guard " + name.rpartition(__name__ + ".")[2] for name in _changed(_OWN_SNAPSHOT)]
    compiles = [] if _COMPILE_GENUINE and builtins.compile is _COMPILE else ["builtins.compile"]
    named = list(_changed(_FRAMEWORK_SNAPSHOT))
    machinery = _hook_machinery_changed(_STATE["config"])
    return named + [name for name in _members_changed() if name not in named] + machinery + compiles + own


def _hook_impls(config):
    """(hook name, plugin, the callable pluggy calls) for every registered hook implementation: what ``_multicall``
    runs, not what the plugin's module or class claims about itself."""
    hooks = config.pluginmanager.hook
    for name in sorted(vars(hooks)):
        caller = getattr(hooks, name, None)
        get = getattr(caller, "get_hookimpls", None)
        if name.startswith("pytest_") and get is not None:
            for impl in get():
                yield name, impl.plugin, impl.function


def _is_attribute(plugin, name, function):
    """``function`` is the plugin's own ``name`` (a bound method compares by its function and instance)."""
    try:
        own = getattr(plugin, name)
    except Exception:
        return False
    same_method = getattr(own, "__func__", None) is getattr(function, "__func__", 0)
    return own is function or (same_method and getattr(own, "__self__", None) is getattr(function, "__self__", 0))


def _installed(path):
    """Code of the framework, this plugin or an installed distribution (site or dist packages) outside the workdir."""
    if _inside_workdir(path):
        return False  # the patch's own files, whatever folder names it chose
    installed = os.sep + "site-packages" + os.sep in path or os.sep + "dist-packages" + os.sep in path
    return installed or path.startswith(_framework_roots())


def _loaded_conftest(config, plugin, path):
    """A conftest module pytest loaded itself, from a file not written since this process started."""
    loaded = getattr(config.pluginmanager, "_conftest_plugins", None)
    if os.path.basename(path) != "conftest.py" or loaded is None or not any(plugin is held for held in loaded):
        return False
    try:
        return os.stat(path).st_ctime_ns <= _IMPORTED_NS
    except OSError:
        return False


def _workdir_plugins(config):
    """The files whose hooks are registered with pytest and are neither installed (``_installed``) nor conftest files
    pytest loaded, or whose hooks are not what their file compiles to, and the hook implementations swapped for
    another callable than the plugin's own: a plugin the library under test registered, wherever it wrote it or
    whatever file name it forged, or one the repository declares (workdir files relative to it)."""
    found = set()
    if config is None:
        return []
    for name, plugin, function in _hook_impls(config):
        # The plugin holds it under the hook's name, or under its own (``specname``).
        if not any(_is_attribute(plugin, held, function) for held in (name, getattr(function, "__name__", name))):
            # The host matches this suffix (``tamper_checks.SWAPPED_HOOK``).
            found.add(name + " of " + str(config.pluginmanager.get_name(plugin)) + " (swapped for another callable)")
            continue
        code = _code(function)
        if code is None:
            continue
        path = os.path.realpath(code.co_filename)
        if not _installed(path) and not _loaded_conftest(config, plugin, path):
            found.add(_shown(path))
        elif _compiled_from(code) is False:  # a file name forged, or a file the run wrote
            found.add(_shown(path) + " (its hooks are not that file's code)")
    return sorted(found)


def _seen(key, now):
    """``now`` with everything an earlier report of this process named: a replacement undone before the last report
    (an exit handler putting a callable back) stays in the record."""
    _STATE.setdefault(key, set()).update(now)
    return sorted(_STATE[key])


def _write(stage, exitstatus=None):
    config = _STATE["config"]
    _note_tracers()
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
        ("replaced", ",".join(_seen("replaced", _replaced()))),
        ("workdir_plugins", ",".join(_seen("workdir_plugins", _workdir_plugins(config)))),
        ("early_imports", ",".join(_EARLY_IMPORTS)),
        ("tracers", ",".join(sorted(_STATE["tracers"]))),
    ):
        ElementTree.SubElement(properties, "property", name=name, value=value)
    for nodeid, outcome in outcomes.items():
        _testcase(suite, nodeid, outcome)
    collection = ElementTree.SubElement(root, "testsuite", name="rollout-collect-errors")
    for nodeid in _STATE["collect_errors"]:
        ElementTree.SubElement(collection, "testcase", name="collect", nodeid=nodeid)
    test_code = ElementTree.SubElement(root, "testsuite", name="rollout-test-code")
    for key, status in sorted(_STATE["test_code"].items()):
        ElementTree.SubElement(test_code, "testcase", name="code", nodeid=key, status=status)
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


# This plugin's own functions, taken last (every one is defined by now).
_OWN = tuple(
    name for name, value in list(globals().items()) if inspect.isfunction(value) and value.__module__ == __name__
)
_OWN += tuple("_Watcher." + name for name in vars(_Watcher) if name.startswith("pytest_"))
_OWN_SNAPSHOT = _snapshot([(__name__, _OWN)])


def _early_imports():
    """Workdir modules imported before this plugin, when pytest is the program: nothing of the workdir runs that early
    unless its name shadows one pytest's start-up tries (``org``, which Python 3.11's ``copy`` probes for Jython)."""
    if not _pytest_is_the_program():
        return []
    found = []
    for name, path in _module_files():
        if _inside_workdir(path):
            found.append(name)
    return sorted(found)


def _module_files():
    """(name, file) of every module imported by now, read past lazy loaders and odd module objects."""
    found = []
    for name, module in list(sys.modules.items()):
        try:
            path = _MODULE_DICT.__get__(module).get("__file__")
        except Exception:
            continue
        if isinstance(path, str):
            found.append((name, path))
    return found


_EARLY_IMPORTS = _early_imports()
_PRELOADED = {os.path.realpath(path) for _, path in _module_files()}
