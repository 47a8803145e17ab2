"""The starter's dataset handling: bad rows are reported by line and the rest still run."""

import json
import os
import subprocess
import sys

import pytest

from config.paths import PROJECT_ROOT
from config.settings import RolloutBudgets
from contracts.rollout import PolicySpec, StalenessBound
from starter import EXAMPLE_DATASET, parse_args, read_rows, rollout_input, staleness_bound, workflow_id_for


def test_bad_rows_are_reported_by_line_and_skipped(tmp_path, capsys):
    good = EXAMPLE_DATASET.read_text().splitlines()
    bad_workdir = json.loads(good[0])
    del bad_workdir["metadata"]["workdir"]
    wrong_type = json.loads(good[1])
    wrong_type["metadata"] = "not an object"
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([good[0], json.dumps(bad_workdir), json.dumps(wrong_type), "{nope", good[2]]) + "\n")
    rows, _ = read_rows(path)
    assert [row.line for row in rows] == [1, 5]
    err = capsys.readouterr().err
    assert "line 2: metadata.workdir" in err and "line 3: metadata" in err and "line 4: row: invalid JSON" in err


def test_workflow_ids_are_deterministic_per_run_sample_and_group():
    (row,) = read_rows(EXAMPLE_DATASET)[0][:1]
    rollout = rollout_input(row.task, 2, 5, PolicySpec(), RolloutBudgets())
    assert workflow_id_for("run7", rollout.task, 2, 5) == f"rollout-run7-{row.task.instance_id}-2-5"
    assert rollout.guard_s == RolloutBudgets().guard_s


def test_run_and_episodes_use_the_workers_task_queue_and_refuse_unusable_run_ids(monkeypatch, capsys):
    monkeypatch.setenv("ROLLOUT_TASK_QUEUE", "team-a-rollouts")
    assert parse_args(["run", "data.jsonl"]).task_queue == "team-a-rollouts"
    assert parse_args(["episodes"]).task_queue == "team-a-rollouts"
    assert parse_args(["run", "data.jsonl", "--task-queue", "other"]).task_queue == "other"
    monkeypatch.delenv("ROLLOUT_TASK_QUEUE")
    assert parse_args(["demo"]).task_queue == "rl-rollouts"
    assert parse_args(["run", "d", "--run-id", "étape-42"]).run_id == "étape-42"
    for bad in ("x" * 200, "two\nlines", "bad\udc80", ""):
        with pytest.raises(SystemExit):
            parse_args(["run", "d", "--run-id", bad])
        assert "--run-id" in capsys.readouterr().err


def test_the_server_wait_comes_from_the_environment_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv("ROLLOUT_SERVER_WAIT_S", "45")
    assert parse_args(["run", "d"]).server_wait == 45.0
    monkeypatch.setenv("ROLLOUT_SERVER_WAIT_S", "soon")
    done = subprocess.run([sys.executable, str(PROJECT_ROOT / "starter.py"), "run", "d"], capture_output=True, text=True, env={**os.environ})
    assert (done.returncode, done.stderr.strip()) == (2, "starter: ROLLOUT_SERVER_WAIT_S='soon': must be a number of seconds")


def test_dataset_root_flag_is_where_row_script_paths_resolve(tmp_path, monkeypatch):
    monkeypatch.delenv("ROLLOUT_DATASET_ROOT", raising=False)
    root = tmp_path / "harness"
    root.mkdir()
    (root / "run.sh").write_text('pytest "$@"\n')
    row = {
        "prompt": "p",
        "metadata": {"instance_id": "pro-1", "image": "i", "workdir": "/w", "swepro": {"parser_script": "parse", "run_script_path": "run.sh"}},
    }
    dataset = tmp_path / "rows" / "train.jsonl"
    dataset.parent.mkdir()
    dataset.write_text(json.dumps(row) + "\n")
    args = parse_args(["run", str(dataset), "--dataset-root", str(root)])
    (found,), errors = read_rows(dataset, args.dataset_root)
    assert errors == [] and found.task.swepro.run_script == 'pytest "$@"\n'
    (), (refused,) = read_rows(dataset)
    assert refused.field == "metadata.swepro.run_script_path" and "needs a dataset root" in refused.reason, "no flag, no root"


def test_the_default_results_file_is_one_per_run():
    assert parse_args(["run", "d.jsonl", "--run-id", "step-7"]).out.endswith("results/run-step-7.jsonl")
    assert parse_args(["demo", "--run-id", "a/../b"]).out.endswith("results/demo-a_.._b.jsonl"), "a run id never names another folder"
    assert parse_args(["episodes", "--run-id", "e1", "--out", "x.jsonl"]).out == "x.jsonl"


def test_the_run_options_set_the_staleness_bound_and_fall_back_to_the_environment(monkeypatch):
    monkeypatch.delenv("ROLLOUT_MAX_STALENESS", raising=False)
    assert staleness_bound(parse_args(["run", "d.jsonl"])) is None
    assert staleness_bound(parse_args(["run", "d.jsonl", "--max-staleness", "3", "--staleness-policy", "drop"])) == StalenessBound(
        max_staleness=3, policy="drop"
    )
    monkeypatch.setenv("ROLLOUT_MAX_STALENESS", "1")
    assert staleness_bound(parse_args(["demo"])) == StalenessBound(max_staleness=1, policy="mask")
    assert staleness_bound(parse_args(["demo", "--max-staleness", "4"])) == StalenessBound(max_staleness=4, policy="mask")
