"""The suite's own structure: no module under tests/ imports a test module or a conftest.

Pytest collects each test module and conftest itself; importing one from another runs its
collection-time code twice and ties the importer to the other module's private helpers.
Shared helpers are fixtures in ``tests/conftest.py``, or plain functions in a helper module
whose name does not start with ``test_``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def is_test_module(name: str) -> bool:
    """``name`` is a dotted module name; its last part is what pytest would collect or load itself."""
    last = name.rsplit(".", 1)[-1]
    return last.startswith("test_") or last == "conftest"


def imported_modules(tree: ast.Module) -> list[str]:
    """Every module an import statement in ``tree`` names, ``from x import y`` counting as both ``x`` and ``x.y``."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names.append(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
    return [name for name in names if name]


def test_modules_under_tests_import_no_test_module():
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if "histories" not in path.parts and "fixtures" not in path.parts
        if (
            found := [name for name in imported_modules(ast.parse(path.read_text(), str(path))) if is_test_module(name)]
        )
    }
    assert offenders == {}, "move shared helpers into tests/conftest.py fixtures or a helper module not named test_*"


@pytest.mark.parametrize(
    "source",
    [
        "from tests.test_sandbox import reap",
        "import tests.test_sandbox",
        "from tests import test_sandbox",
        "from .conftest import x",
        "import conftest",
    ],
)
def test_the_check_sees_every_import_form(source):
    assert any(is_test_module(name) for name in imported_modules(ast.parse(source)))


def test_the_check_allows_helper_modules():
    assert not any(
        is_test_module(name)
        for name in imported_modules(ast.parse("from tests.local_cluster import free_port\nimport tests"))
    )
