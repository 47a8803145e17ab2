"""The tree shows the architecture: subsystem packages hold the machinery and never reach up into Temporal.

``activities/`` holds the Temporal faces (and the adapter's HTTP face), ``workflows/`` the workflow code,
``trainer_client/`` the trainer's Temporal client; every other package is a library the faces wrap, so it
imports neither ``temporalio`` nor the faces, the workflows or the trainer's client, and each package's
modules import only packages below it in ``LAYERS``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from config.paths import PROJECT_ROOT

# Bottom first: a package may import packages of its own layer or a lower one.
LAYERS = [
    {"contracts"},
    {"config", "policy", "docker_sandbox", "task_sources"},
    {"grading", "claude_code", "drift_repair", "slime_samples"},
    {"scripted_policy"},
]
MACHINERY = set().union(*LAYERS)
UPPER = {"temporalio", "activities", "workflows", "trainer_client", "worker", "starter", "slime_generate", "slime_rollout"}
PACKAGES = sorted(path.name for path in PROJECT_ROOT.iterdir() if (path / "__init__.py").is_file() and path.name != "tests")


def layer_of(package: str) -> int:
    return next(index for index, layer in enumerate(LAYERS) if package in layer)


def imported_tops(folder: Path) -> dict[str, set[str]]:
    """Top-level names each module in ``folder`` and its subpackages imports (absolute imports, anywhere in the
    module), by the module's path relative to ``folder``."""
    found: dict[str, set[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(folder))] = names
    return found


def test_every_package_is_placed():
    assert set(PACKAGES) == MACHINERY | {"activities", "workflows", "trainer_client"}


@pytest.mark.parametrize("package", sorted(MACHINERY))
def test_machinery_imports_neither_temporal_nor_the_layers_above(package):
    for module, names in imported_tops(PROJECT_ROOT / package).items():
        assert not names & UPPER, f"{package}/{module} imports {sorted(names & UPPER)}"
        above = {name for name in names & MACHINERY if layer_of(name) > layer_of(package)}
        assert not above, f"{package}/{module} imports {sorted(above)}, a higher layer"


def test_trainer_client_does_not_import_the_activity_faces():
    for module, names in imported_tops(PROJECT_ROOT / "trainer_client").items():
        assert "activities" not in names, f"trainer_client/{module} imports the activity faces"


def test_the_activity_faces_do_not_reach_into_the_workflows():
    """Names both sides share (metric and search attribute names) live in ``contracts.telemetry_names``."""
    for module, names in imported_tops(PROJECT_ROOT / "activities").items():
        assert "workflows" not in names, f"activities/{module} imports the workflows"


def test_the_check_sees_imports_inside_functions_and_submodules(tmp_path):
    (tmp_path / "lib.py").write_text("def late():\n    from temporalio import activity\n    import activities.sandbox\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.py").write_text("import workflows.rollout_group\n")
    assert imported_tops(tmp_path) == {"lib.py": {"temporalio", "activities"}, "sub/deep.py": {"workflows"}}
