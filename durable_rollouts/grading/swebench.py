"""SWE-bench grading through the installed ``swebench`` package: its test spec writes the eval script,
its log parser and report decide (``solved`` iff the report says ``resolved``, RESOLVED_FULL).

Both package generations work: ``swebench`` < 5 builds the spec from ``repo`` + ``version`` (its spec table),
``swebench`` >= 5 from the row's ``eval_script`` / ``log_parser`` / ``eval_type`` columns. A row the installed
generation cannot build a spec for is ``NotEvaluable`` naming the row field; without the package every entry
point raises ``NotEvaluable`` saying what to install (docs/task_sources.md, *SWE-bench rows*).

Invariants:

* the package is imported lazily (it pulls in ``datasets``, ``modal``, …) and never on the event loop:
  ``eval_script`` and ``verdict`` are blocking and run in a thread (``require_eval_script`` does that, naming
  the task in its ``NotEvaluable``);
* a row's ``install_config`` (the spec of a repo the package does not know) is put into the package's tables
  only for one call, under a lock, and the tables are restored afterwards: concurrent gradings never see each
  other's specs.
"""

from __future__ import annotations

import asyncio
import importlib
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from durable_rollouts.contracts.tasks import SweBenchSpec, TaskSpec

INSTALL_HINT = "pip install 'durable-rollouts[swebench]'"
DEFAULT_LOG_PARSER = "pytest"

_tables_lock = threading.Lock()


class NotEvaluable(Exception):
    """This worker cannot grade the row: the package is missing or cannot build the row's test spec."""


@dataclass(frozen=True)
class Verdict:
    """``passed``: the names of the required tests the package's log parser found passing."""

    solved: bool
    tests_passed: int
    tests_failed: int
    note: str
    passed: frozenset[str] = frozenset()


async def require_eval_script(task: TaskSpec) -> str:
    """``eval_script`` off the event loop; ``NotEvaluable`` names the task (activities report it as
    ``NotEvaluable``)."""
    try:
        return await asyncio.to_thread(eval_script, task)
    except NotEvaluable as error:
        raise NotEvaluable(f"task {task.instance_id}: {error}") from None


def eval_script(task: TaskSpec) -> str:
    """The bash script the package runs in a graded container (resets test files, applies the test patch, runs the
    tests)."""
    with _test_spec(task) as spec:
        return spec.eval_script


def verdict(task: TaskSpec, log: str) -> Verdict:
    """Grade the eval script's combined output with the package's log parser and report."""
    from swebench.harness.grading import get_eval_report

    with _test_spec(task) as spec, tempfile.NamedTemporaryFile("w", suffix=".log", encoding="utf-8") as log_file:
        log_file.write(log)
        log_file.flush()
        prediction = {"instance_id": task.instance_id, "model_name_or_path": "rollout", "model_patch": ""}
        report = get_eval_report(spec, prediction, log_file.name, include_tests_status=True)[task.instance_id]
    if not report["patch_successfully_applied"]:
        note = "swebench found no test results: the test patch did not apply, or the tests did not run"
        return Verdict(False, 0, 0, note)
    tests = report["tests_status"]
    passed = [str(name) for group in ("FAIL_TO_PASS", "PASS_TO_PASS") for name in tests[group]["success"]]
    failed_names = [name for group in ("FAIL_TO_PASS", "PASS_TO_PASS") for name in tests[group]["failure"]]
    note = f"required tests not passed: {failed_names[:20]}" if failed_names else ""
    return Verdict(bool(report["resolved"]), len(passed), len(failed_names), note, frozenset(passed))


def package_version() -> str:
    """The installed swebench version, once its grading module imports; else ``NotEvaluable`` saying why."""
    try:
        version = metadata.version("swebench")
    except metadata.PackageNotFoundError:
        raise NotEvaluable(
            f"SWE-bench rows are graded with the `swebench` package, which this worker does not have: {INSTALL_HINT}"
        ) from None
    try:
        importlib.import_module("swebench.harness.grading")
    except ImportError as error:
        raise NotEvaluable(f"swebench {version} is installed but does not import ({error}): {INSTALL_HINT}") from None
    return version


@contextmanager
def _test_spec(task: TaskSpec) -> Iterator[Any]:
    """The package's ``TestSpec`` for ``task``, with any ``install_config`` registered while it is in use."""
    spec = task.swebench
    if spec is None:
        raise NotEvaluable(f"task {task.instance_id} is not a SWE-bench row")
    version = package_version()
    instance = _instance(task, spec)
    if int(version.split(".")[0]) >= 5:
        yield _modern_test_spec(instance, spec, version)
        return
    with _tables_lock, _registered(spec, version):
        yield _legacy_test_spec(instance, spec)


def _instance(task: TaskSpec, spec: SweBenchSpec) -> dict[str, Any]:
    return {
        "instance_id": task.instance_id,
        "repo": spec.repo,
        "version": spec.version,
        "base_commit": spec.base_commit,
        "environment_setup_commit": spec.environment_setup_commit or spec.base_commit,
        "test_patch": spec.test_patch,
        "FAIL_TO_PASS": spec.fail_to_pass,
        "PASS_TO_PASS": spec.pass_to_pass,
        "problem_statement": task.problem_statement,
        "image": task.image,
        "eval_script": spec.eval_script,
        "log_parser": spec.log_parser,
        "eval_type": spec.eval_type or "pass_and_fail",
    }


def _legacy_test_spec(instance: dict[str, Any], spec: SweBenchSpec) -> Any:
    """swebench < 5's ``TestSpec`` with its eval script only.

    ``make_test_spec`` would also write the image-build scripts, which fetch
    requirements files from GitHub for django, matplotlib, sympy, xarray,
    pylint, flask, ... (about half of Verified): grading needs none of that,
    and a worker without internet could not grade those rows.
    """
    from swebench.harness.constants import MAP_REPO_TO_EXT, MAP_REPO_VERSION_TO_SPECS
    from swebench.harness.test_spec.create_scripts import make_eval_script_list
    from swebench.harness.test_spec.test_spec import TestSpec

    specs = MAP_REPO_VERSION_TO_SPECS[spec.repo][spec.version]
    return TestSpec(
        instance_id=instance["instance_id"],
        repo=spec.repo,
        version=spec.version,
        repo_script_list=[],
        eval_script_list=make_eval_script_list(
            instance, specs, "testbed", "/testbed", spec.base_commit, spec.test_patch
        ),
        env_script_list=[],
        arch="x86_64",
        FAIL_TO_PASS=spec.fail_to_pass,
        PASS_TO_PASS=spec.pass_to_pass,
        language=MAP_REPO_TO_EXT[spec.repo],
        docker_specs=specs.get("docker_specs", {}),
        namespace=None,
    )


def _modern_test_spec(instance: dict[str, Any], spec: SweBenchSpec, version: str) -> Any:
    missing = [f"remote_env_info.{name}" for name in ("eval_script", "log_parser") if not getattr(spec, name)]
    if missing:
        raise NotEvaluable(
            f"swebench {version} builds test specs from the row's eval script and log parser; this row has no "
            f"{' or '.join(missing)} (rows in the older shape need swebench<5)"
        )
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.harness.utils import make_test_spec

    if spec.log_parser not in PARSER_REGISTRY:
        raise NotEvaluable(f"remote_env_info.log_parser: swebench {version} has no parser named {spec.log_parser!r}")
    return make_test_spec(instance)


@contextmanager
def _registered(spec: SweBenchSpec, version: str) -> Iterator[None]:
    """Make ``spec.repo`` @ ``spec.version`` known to a swebench < 5 for the duration of the block."""
    from swebench.harness import constants
    from swebench.harness.log_parsers import MAP_REPO_TO_PARSER

    specs = constants.MAP_REPO_VERSION_TO_SPECS
    if spec.install_config is None:
        if spec.version not in specs.get(spec.repo, {}):
            raise NotEvaluable(
                f"remote_env_info.repo/version: swebench {version} has no test spec for {spec.repo} {spec.version}, "
                "and the row has no install_config to supply one"
            )
        yield
        return
    if "test_cmd" not in spec.install_config:
        raise NotEvaluable("remote_env_info.install_config.test_cmd: missing")
    parser = _python_log_parser(spec.log_parser or spec.install_config.get("log_parser") or DEFAULT_LOG_PARSER, version)
    config = {"python": "3", **spec.install_config}
    with (
        _overridden(specs, spec.repo, {**specs.get(spec.repo, {}), spec.version: config}),
        _overridden(constants.MAP_REPO_TO_EXT, spec.repo, "py"),
        _overridden(MAP_REPO_TO_PARSER, spec.repo, parser),
    ):
        yield


def _python_log_parser(name: str, version: str) -> Callable[..., dict[str, str]]:
    """The package's parser ``parse_log_<name>``; ``name`` may carry the prefix (SWE-rebench writes
    ``parse_log_pytest``)."""
    parsers = importlib.import_module("swebench.harness.log_parsers.python")
    name = name.removeprefix("parse_log_")
    parser = getattr(parsers, f"parse_log_{name}", None)
    if parser is None:
        raise NotEvaluable(
            f"remote_env_info.install_config.log_parser: swebench {version} has no parser parse_log_{name}"
        )
    return parser


@contextmanager
def _overridden(table: dict[str, Any], key: str, value: Any) -> Iterator[None]:
    missing = object()
    before = table.get(key, missing)
    table[key] = value
    try:
        yield
    finally:
        if before is missing:
            del table[key]
        else:
            table[key] = before
