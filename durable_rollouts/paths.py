"""The project's paths: the checkout root and the machine-local cache that ``make setup`` fills."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = PROJECT_ROOT / ".cache"
# The demo's dataset: one example task per grader kind (examples/tasks/make_dataset.py writes it).
EXAMPLE_DATASET = PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl"
