"""Re-grading a finished run for real: a dev server, a worker, Docker sandboxes, Claude Code, the scripted oracle.

A group of 2 solves ``calc-eval-cmd`` (reward 1) and a flat rollout of the
same run aborts before any diff. ``starter.py regrade`` then grades the two
kept patches again in fresh sandboxes: with a dataset whose eval command got
stricter the verdicts flip to reward 0 (``changed``), without one they stay;
the aborted rollout is skipped with its reason, and an unknown run id is an
error.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.rollout_group import GroupInput
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.contracts.workflow_ids import regrade_workflow_id, rollout_workflow_id
from durable_rollouts.paths import EXAMPLE_DATASET
from durable_rollouts.scripted_policy.oracle_tasks import oracle_tasks_from
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer
from durable_rollouts.task_sources.dataset_rows import DatasetRow, read_dataset
from durable_rollouts.trainer_client.results_file import file_stem
from durable_rollouts.trainer_client.rollout_groups import start_group
from durable_rollouts.trainer_client.rollout_runs import rollout_input, start_rollout
from starter import main_async, parse_args
from tests.local_cluster import containers_of_runs, local_cluster

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
BUDGETS = RolloutBudgets(agent_budget_s=240, eval_timeout_s=120, guard_s=600)
INSTANCE = "calc-eval-cmd"
# A stricter test the reference fix does not pass: the evaluator has no power operator.
STRICTER = " && python3 -c \"import calc; assert calc.evaluate('2 * 2 * 2') == calc.evaluate('2 ** 3')\""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def oracle_cluster(renderer, tmp_path_factory):
    policy = ScriptedPolicyServer(
        renderer, default_policy="oracle", oracle_tasks=oracle_tasks_from(str(EXAMPLE_DATASET))
    )
    policy_url = await policy.start()
    async with local_cluster(policy_url, tmp_path_factory.mktemp("results"), BUDGETS) as (env, settings):
        yield env, settings
    await policy.stop()


def example_row() -> dict:
    return next(
        json.loads(line)
        for line in EXAMPLE_DATASET.read_text().splitlines()
        if json.loads(line)["metadata"]["instance_id"] == INSTANCE
    )


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def regrade(monkeypatch, address: str, *flags: str) -> int:
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    return await main_async(parse_args(["regrade", *flags]))


async def test_a_finished_run_is_regraded_from_its_kept_patches(
    oracle_cluster, task_images, tmp_path, monkeypatch, capsys
):
    env, settings = oracle_cluster
    address = env.client.service_client.config.target_host
    task = next(
        row.task
        for row in read_dataset(EXAMPLE_DATASET)
        if isinstance(row, DatasetRow) and row.task.instance_id == INSTANCE
    )
    run_id = f"rg{uuid.uuid4().hex[:6]}"
    base = rollout_input(task, 0, 0, PolicySpec(sampling=SamplingParams(max_new_tokens=2048)), BUDGETS)
    group = GroupInput(
        run_id=run_id, group_index=0, rollouts=[base.model_copy(update={"sample_index": i}) for i in range(2)]
    )
    group_result = await (await start_group(env.client, group, settings.task_queue)).result()
    no_workdir = rollout_input(
        task.model_copy(update={"instance_id": "calc-no-workdir", "workdir": ""}), 0, 1, PolicySpec(), BUDGETS
    )
    aborted: RolloutResult = await (await start_rollout(env.client, no_workdir, run_id, settings.task_queue)).result()

    assert group_result.rewards == [1.0, 1.0] and aborted.abort_reason == "missing_image_or_workdir"
    originals = {s.rollout.workflow_id: s.rollout for s in group_result.samples if s.rollout}
    for rollout in originals.values():
        assert rollout.diff and rollout.diff.kept_patch, "the graded patch is kept in the result"
        assert (
            rollout.diff.kept_patch.startswith("diff --git ")
            and len(rollout.diff.kept_patch.encode()) == rollout.diff.patch_bytes
        ), "all of it"

    changed = tmp_path / "changed.jsonl"
    row = example_row()
    row["metadata"]["eval_cmd"] += STRICTER
    changed.write_text(json.dumps(row) + "\n")
    strict_out = tmp_path / "strict.jsonl"
    strict_flags = [
        "--run-id",
        run_id,
        "--task-queue",
        settings.task_queue,
        "--regrade-id",
        "strict",
        "--dataset",
        str(changed),
        "--out",
        str(strict_out),
    ]
    assert await regrade(monkeypatch, address, *strict_flags) == 0
    printed = capsys.readouterr().out
    strict = rows_of(strict_out)
    assert (
        sorted(r["original_workflow_id"] for r in strict)
        == sorted(originals)
        == [rollout_workflow_id(run_id, INSTANCE, i, 0) for i in range(2)]
    )
    for r in strict:
        assert r["workflow_id"] == regrade_workflow_id("strict", r["original_workflow_id"])
        assert (r["status"], r["instance_id"], r["group_index"], r["grader_from"]) == (
            "completed",
            INSTANCE,
            0,
            "dataset",
        )
        assert r["original"] == {
            "reward": 1.0,
            "solved": True,
            "applied_cleanly": True,
            "apply_method": originals[r["original_workflow_id"]].evaluation.apply_method,
        }
        assert (
            r["evaluation"]["reward"],
            r["evaluation"]["solved"],
            r["evaluation"]["applied_cleanly"],
            r["changed"],
        ) == (0.0, False, True, True)
        assert r["patch_bytes"] == originals[r["original_workflow_id"]].diff.patch_bytes
        grading_log = Path(r["evaluation"]["log_path"])
        assert r["evaluation"]["log"] == "", "the results file holds the log's path, not the log"
        assert grading_log == strict_out.with_name("strict.jsonl.logs") / f"{file_stem(r['workflow_id'])}.grading.log"
        assert (
            grading_log.stat().st_size == r["evaluation"]["log_bytes"]
            and "[eval_cmd exit 1]" in grading_log.read_text()
        ), "the whole new log"
    assert sorted(r["sample_index"] for r in strict) == [0, 1]
    assert f"skipped {aborted.workflow_id}: no diff was taken (aborted: missing_image_or_workdir)" in printed
    assert (
        "re-graded 2 (regrade id strict), 2 verdicts changed, 0 not graded; 1 skipped; 0 already in the file" in printed
    )

    same_out = tmp_path / "same.jsonl"
    run = ["--run-id", run_id, "--task-queue", settings.task_queue]
    assert await regrade(monkeypatch, address, *run, "--regrade-id", "same", "--out", str(same_out)) == 0
    same = rows_of(same_out)
    assert [(r["grader_from"], r["evaluation"]["reward"], r["changed"]) for r in same] == [("rollout", 1.0, False)] * 2
    capsys.readouterr()

    assert await regrade(monkeypatch, address, *strict_flags) == 0
    assert rows_of(strict_out) == strict, "the same regrade id and file: nothing graded twice"
    assert "2 of 2 re-grades already there; running the other 0" in capsys.readouterr().out

    assert await regrade(monkeypatch, address, "--run-id", f"{run_id}-nope", "--out", str(tmp_path / "none.jsonl")) == 1
    assert f"no rollouts of run '{run_id}-nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:
        await regrade(
            monkeypatch, address, *run, "--dataset", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "x.jsonl")
        )
    assert refused.value.code == 2 and "missing.jsonl': no such file or folder" in capsys.readouterr().err
    assert await containers_of_runs([run_id]) == [], "every grading sandbox is gone"
