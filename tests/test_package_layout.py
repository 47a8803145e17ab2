"""The tree shows the architecture: one library package holds the machinery and never reaches up into Temporal.

The top level holds only the entry scripts, ``activities/`` (the Temporal faces), ``workflows/`` (the workflow
code) and the library ``durable_rollouts/``, beside ``bench/``, ``tests/`` and ``testbed/`` (the local stand-ins both of
those use), which the library never imports. Inside
the library, ``trainer_client`` is the trainer's Temporal client (it starts workflows by their typed references); every
other subpackage is machinery the faces wrap, so it imports neither ``temporalio`` nor the faces, the workflows or the
trainer's client, and each one's modules import only subpackages of its own layer or a lower one in ``LAYERS``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from durable_rollouts.paths import PROJECT_ROOT

LIBRARY = "durable_rollouts"
# Bottom first: a subpackage may import subpackages of its own layer or a lower one.
LAYERS = [
    {"contracts", "paths", "meters", "folder_loads", "process_exit"},
    {"policy", "docker_sandbox", "task_sources"},
    {"config", "grading", "claude_code", "drift_repair", "slime_samples", "logprob_check"},
    {"scripted_policy", "trajectory_view", "vllm_engine"},
]
MACHINERY = set().union(*LAYERS)
UPPER = {
    "temporalio",
    "activities",
    "workflows",
    "trainer_client",
    "worker",
    "starter",
    "slime_generate",
    "slime_rollout",
    "bench",
    "testbed",
    "tests",
}
ENTRY_SCRIPTS = {"worker.py", "starter.py", "slime_generate.py", "slime_rollout.py"}


def layer_of(package: str) -> int:
    return next(index for index, layer in enumerate(LAYERS) if package in layer)


def imported_tops(folder: Path) -> dict[str, set[str]]:
    """What each module in ``folder`` and its subpackages imports (absolute imports, anywhere in the module), by
    the module's path relative to ``folder``: top-level names, and for the library its subpackage's name."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        modules = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules += [
                    f"{node.module}.{alias.name}" if node.module == LIBRARY else node.module for alias in node.names
                ]
        found[str(path.relative_to(folder))] = {_top(module) for module in modules}
    return found


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == LIBRARY and len(parts) > 1 else parts[0]


def test_the_top_level_holds_the_entry_scripts_the_faces_and_one_library():
    packages = {path.name for path in PROJECT_ROOT.iterdir() if (path / "__init__.py").is_file()}
    assert packages == {"activities", "workflows", LIBRARY, "tests", "bench", "testbed", "scripts"}
    assert {path.name for path in PROJECT_ROOT.glob("*.py")} == ENTRY_SCRIPTS


def test_every_library_subpackage_and_module_is_placed():
    library = PROJECT_ROOT / LIBRARY
    subpackages = {path.name for path in library.iterdir() if (path / "__init__.py").is_file()}
    modules = {path.stem for path in library.glob("*.py") if path.name != "__init__.py"}
    assert subpackages | modules == MACHINERY | {"trainer_client"}


@pytest.mark.parametrize("package", sorted(MACHINERY))
def test_machinery_imports_neither_temporal_nor_the_layers_above(package):
    folder = PROJECT_ROOT / LIBRARY / package
    modules = (
        imported_tops(folder)
        if folder.is_dir()
        else {folder.name + ".py": imported_tops(folder.parent)[f"{package}.py"]}
    )
    for module, names in modules.items():
        assert not names & UPPER, f"{package}/{module} imports {sorted(names & UPPER)}"
        above = {name for name in names & MACHINERY if layer_of(name) > layer_of(package)}
        assert not above, f"{package}/{module} imports {sorted(above)}, a higher layer"


def test_trainer_client_does_not_import_the_activity_faces():
    """It starts workflows by their typed references (``workflows``), never through the activities or a script."""
    for module, names in imported_tops(PROJECT_ROOT / LIBRARY / "trainer_client").items():
        assert not names & {"activities", "worker", "starter", "slime_generate", "slime_rollout", "bench", "tests"}, (
            f"trainer_client/{module} imports {sorted(names)}"
        )


def test_the_activity_faces_do_not_reach_into_the_workflows():
    """Names both sides share (metric and search attribute names) live in
    ``durable_rollouts.contracts.telemetry_names``."""
    for module, names in imported_tops(PROJECT_ROOT / "activities").items():
        assert "workflows" not in names, f"activities/{module} imports the workflows"


def test_the_check_sees_imports_inside_functions_and_submodules(tmp_path):
    (tmp_path / "lib.py").write_text(
        "def late():\n    from temporalio import activity\n    import activities.sandbox\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.py").write_text(
        "import workflows.rollout_group\nfrom durable_rollouts import policy\nfrom durable_rollouts.grading.x import "
        "y\n"
    )
    assert imported_tops(tmp_path) == {
        "lib.py": {"temporalio", "activities"},
        "sub/deep.py": {"workflows", "policy", "grading"},
    }


def test_the_benchmarks_are_a_package_that_needs_no_tests_and_no_path_edits():
    """``python -m bench.<name>`` from the checkout: nothing in bench/ imports the tests or edits ``sys.path``."""
    for module, names in imported_tops(PROJECT_ROOT / "bench").items():
        assert "tests" not in names, f"bench/{module} imports the tests"
        assert "sys.path" not in (PROJECT_ROOT / "bench" / module).read_text(), f"bench/{module} edits sys.path"


def test_the_maintenance_scripts_run_as_modules_without_path_edits():
    """``python -m scripts.<name>`` from the checkout, as the benchmarks run."""
    for module in imported_tops(PROJECT_ROOT / "scripts"):
        assert "sys.path" not in (PROJECT_ROOT / "scripts" / module).read_text(), f"scripts/{module} edits sys.path"


def test_the_tests_and_the_testbed_do_not_import_the_benchmarks():
    """What a test and a benchmark both need (a registry, an object store, a browser) lives in ``testbed/``."""
    for folder in ("tests", "testbed"):
        for module, names in imported_tops(PROJECT_ROOT / folder).items():
            assert "bench" not in names, f"{folder}/{module} imports the benchmarks"
