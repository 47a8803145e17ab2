"""The oracle's tasks come from the dataset as the starter reads it: the same reader, the same dataset root."""

from __future__ import annotations

import json

from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.scripted_policy.completions import OracleTask
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.task_sources.dataset_rows import read_dataset

PATCH = "diff --git a/x b/x\n"


def test_a_row_naming_its_scripts_in_the_dataset_root_is_known_exactly_when_the_starter_can_run_it(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("ROLLOUT_DATASET_ROOT", raising=False)
    root = tmp_path / "harness"
    root.mkdir()
    (root / "run.sh").write_text('pytest "$@"\n')
    swepro = {"parser_script": "parse", "run_script_path": "run.sh"}
    metadata = {"instance_id": "pro-1", "image": "i", "workdir": "/w", "swepro": swepro, "reference_patch": PATCH}
    dataset = tmp_path / "train.jsonl"
    dataset.write_text(json.dumps({"prompt": "\n  Fix the stock check\nmore", "metadata": metadata}) + "\n")
    assert oracle_tasks_from(dataset, root) == [OracleTask(match="Fix the stock check", patch=PATCH)]
    assert oracle_tasks_from(dataset) == [], (
        "without the root the starter refuses the row, and the oracle does not know it"
    )
    monkeypatch.setenv("ROLLOUT_DATASET_ROOT", str(root))
    assert len(oracle_tasks_from(dataset)) == 1, "the same default root as the starter's"


def test_every_example_row_with_a_reference_patch_is_known_and_no_dataset_gives_none():
    dataset = PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl"
    rows = [row for row in read_dataset(dataset) if getattr(row, "task", None) and row.task.reference_patch]
    assert [task.patch for task in oracle_tasks_from(dataset)] == [row.task.reference_patch for row in rows]
    assert oracle_tasks_from(None) == []


def test_a_row_the_oracle_cannot_know_is_named_in_a_warning_and_the_others_are_known(tmp_path, caplog):
    good = (PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl").read_text().splitlines()
    dataset = tmp_path / "mixed.jsonl"
    dataset.write_text("\n".join(["{not json", *good]) + "\n")
    with caplog.at_level("WARNING", logger="durable_rollouts.scripted_policy.oracle_tasks"):
        known = oracle_tasks_from(dataset)
    assert known == oracle_tasks_from(PROJECT_ROOT / "examples" / "tasks" / "dataset.jsonl")
    assert [record.getMessage() for record in caplog.records] == [
        f"oracle tasks: {dataset}: line 1: row: invalid JSON (Expecting property name enclosed in double quotes) (the "
        f"oracle does not know this row)"
    ]
