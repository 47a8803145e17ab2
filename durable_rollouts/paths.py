"""The project's paths: the checkout root and the machine-local cache that ``make setup`` fills.

Run from a checkout (its ``pyproject.toml`` beside the package, as in an editable install), the root is the
checkout. Installed into site-packages (a trainer's ``pip install .``), where nothing should be written, the
root is the working directory the process started in: its ``results/`` (and payload folder) and ``.cache/`` go
there, and the checkout's examples are not at hand.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_PARENT = Path(__file__).resolve().parents[1]
PROJECT_ROOT = _PACKAGE_PARENT if (_PACKAGE_PARENT / "pyproject.toml").is_file() else Path.cwd()
CACHE_DIR = PROJECT_ROOT / ".cache"
# The demo's dataset: one example task per grader kind (examples/tasks/make_dataset.py writes it).
EXAMPLE_DATASET = PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl"
