"""The starter's dataset handling: bad rows are reported by line and the rest still run, one group per row.

The ``run`` tests here use the real ``RolloutGroup`` and ``CodingAgentRollout``
workflows on the time-skipping server, over fake activities
(``tests.workflows.fake_rollout_activities``) that return real packed trajectories.
"""

import json
import os
import subprocess
import sys
import uuid

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError

import starter
from activities import activity_refs as refs
from activities.activity_refs import name_of
from activities.error_types import ErrorType
from durable_rollouts.config.settings import RolloutBudgets
from durable_rollouts.contracts.agent_runs import MergeRequest, MergeResult
from durable_rollouts.contracts.grading import EvalRequest, EvalResult
from durable_rollouts.contracts.probes import ProbeVerdict
from durable_rollouts.contracts.rollout_group import GroupFilter
from durable_rollouts.contracts.rollouts import RolloutProgress
from durable_rollouts.contracts.sandboxes import ImagePull, SandboxHandle, SandboxRequest
from durable_rollouts.contracts.session import PolicySpec, StalenessBound
from durable_rollouts.contracts.tokens import SegmentSummary, TokenSegment
from durable_rollouts.contracts.workflow_ids import group_workflow_id, rollout_workflow_id
from durable_rollouts.paths import EXAMPLE_DATASET, PROJECT_ROOT
from durable_rollouts.policy.trajectory_packing import pack_trajectory
from durable_rollouts.task_sources.impossible_probes import probe_seed
from durable_rollouts.trainer_client import rollout_queries
from durable_rollouts.trainer_client.batch_runs import group_input, groups_in_flight, read_rows
from durable_rollouts.trainer_client.rollout_runs import rollout_input, workflow_id_for
from starter import group_options, parse_args, run_dataset, show, staleness_bound
from tests.argparse_refusals import refusal
from tests.workflows.fake_rollout_activities import SHARED, FakeCluster, workers
from workflows.coding_agent_rollout import CodingAgentRollout
from workflows.rollout_group import RolloutGroup

# An existing dataset: the starter refuses a dataset path that does not exist before it contacts a server.
ROWS = str(EXAMPLE_DATASET)
SEGMENT = TokenSegment(
    kind="main",
    tokens=[5, 6, 7],
    loss_mask=[0, 1, 1],
    rollout_log_probs=[0.0, -0.1, -0.2],
    prompt_length=1,
    turns=1,
    finish_reason="stop",
)


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
    assert workflow_id_for("run7", rollout.task, 2, 5) == rollout_workflow_id("run7", row.task.instance_id, 2, 5)
    assert rollout.guard_s == RolloutBudgets().guard_s


def test_a_row_becomes_a_group_of_k_samples_under_the_run_flags():
    (row,) = read_rows(EXAMPLE_DATASET)[0][:1]
    args = parse_args(
        [
            "run",
            ROWS,
            "--run-id",
            "r1",
            "--n-samples-per-prompt",
            "3",
            "--min-valid",
            "2",
            "--group-filter",
            "nonzero_variance",
        ]
    )
    group = group_input(row.task, 4, PolicySpec(), RolloutBudgets(), group_options(args))
    assert [(r.sample_index, r.group_index, r.task) for r in group.rollouts] == [(i, 4, row.task) for i in range(3)]
    assert (group.run_id, group.group_index, group.valid_needed, group.refills_allowed, group.filter) == (
        "r1",
        4,
        2,
        3,
        GroupFilter.NONZERO_VARIANCE,
    )
    defaults = group_input(
        row.task,
        0,
        PolicySpec(),
        RolloutBudgets(),
        group_options(parse_args(["run", ROWS, "--n-samples-per-prompt", "2"])),
    )
    assert (defaults.size, defaults.valid_needed, defaults.refills_allowed, defaults.filter) == (
        2,
        2,
        2,
        GroupFilter.KEEP_ALL,
    )
    assert (
        group_input(row.task, 0, PolicySpec(), RolloutBudgets(), group_options(parse_args(["run", ROWS]))).size == 1
    ), "K defaults to 1"
    assert groups_in_flight(8, 3) == 2
    assert groups_in_flight(2, 3) == 1, "at least one group"


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--n-samples-per-prompt", "0"], "--n-samples-per-prompt"),
        (["--n-samples-per-prompt", "2", "--min-valid", "3"], "--min-valid"),
        (["--refill-budget", "-1"], "--refill-budget"),
        (["--group-filter", "best"], "--group-filter"),
        (["--concurrency", "0"], "--concurrency"),
    ],
)
def test_a_bad_group_flag_is_refused_by_name(flags, named, capsys):
    with pytest.raises(SystemExit):
        parse_args(["run", ROWS, *flags])
    assert named in capsys.readouterr().err


def test_episode_groups_take_the_same_group_flags_against_k(capsys):
    assert parse_args(["episodes", "--k", "4", "--min-valid", "3"]).min_valid == 3
    with pytest.raises(SystemExit):
        parse_args(["episodes", "--k", "2", "--min-valid", "3"])
    assert "--min-valid 3: more than the group's --k 2" in capsys.readouterr().err


def test_run_and_episodes_use_the_workers_task_queue_and_refuse_unusable_run_ids(monkeypatch, capsys):
    monkeypatch.setenv("ROLLOUT_TASK_QUEUE", "team-a-rollouts")
    assert parse_args(["run", ROWS]).task_queue == "team-a-rollouts"
    assert parse_args(["episodes"]).task_queue == "team-a-rollouts"
    assert parse_args(["run", ROWS, "--task-queue", "other"]).task_queue == "other"
    monkeypatch.delenv("ROLLOUT_TASK_QUEUE")
    assert parse_args(["demo"]).task_queue == "rl-rollouts"
    assert parse_args(["run", ROWS, "--run-id", "étape-42"]).run_id == "étape-42"
    for bad in ("x" * 200, "two\nlines", "bad\udc80", ""):
        with pytest.raises(SystemExit):
            parse_args(["run", ROWS, "--run-id", bad])
        assert "--run-id" in capsys.readouterr().err


def test_the_server_wait_comes_from_the_environment_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv("ROLLOUT_SERVER_WAIT_S", "45")
    assert parse_args(["run", ROWS]).server_wait == 45.0
    monkeypatch.setenv("ROLLOUT_SERVER_WAIT_S", "soon")
    done = subprocess.run(
        [sys.executable, str(PROJECT_ROOT / "starter.py"), "run", "d"],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "starter: ROLLOUT_SERVER_WAIT_S='soon': must be a number of seconds",
    )


def test_dataset_root_flag_is_where_row_script_paths_resolve(tmp_path, monkeypatch):
    monkeypatch.delenv("ROLLOUT_DATASET_ROOT", raising=False)
    root = tmp_path / "harness"
    root.mkdir()
    (root / "run.sh").write_text('pytest "$@"\n')
    row = {
        "prompt": "p",
        "metadata": {
            "instance_id": "pro-1",
            "image": "i",
            "workdir": "/w",
            "swepro": {"parser_script": "parse", "run_script_path": "run.sh"},
        },
    }
    dataset = tmp_path / "rows" / "train.jsonl"
    dataset.parent.mkdir()
    dataset.write_text(json.dumps(row) + "\n")
    args = parse_args(["run", str(dataset), "--dataset-root", str(root)])
    (found,), errors = read_rows(dataset, args.dataset_root)
    assert errors == [] and found.task.swepro.run_script == 'pytest "$@"\n'
    (), (refused,) = read_rows(dataset)
    assert refused.field == "metadata.swepro.run_script_path" and "needs a dataset root" in refused.reason, (
        "no flag, no root"
    )


def test_the_default_results_file_is_one_per_run():
    assert parse_args(["run", ROWS, "--run-id", "step-7"]).out.endswith("results/run-step-7.jsonl")
    assert parse_args(["demo", "--run-id", "a/../b"]).out.endswith("results/demo-a_.._b.jsonl"), (
        "a run id never names another folder"
    )
    assert parse_args(["episodes", "--run-id", "e1", "--out", "x.jsonl"]).out == "x.jsonl"


@pytest.mark.asyncio(loop_scope="session")
async def test_show_gives_a_rollout_pulling_its_image_a_line_of_its_own(monkeypatch, capsys):
    pull = ImagePull(
        image="mirror.local:5000/swebench/sweb.eval.x86_64.a:latest",
        layers_total=7,
        layers_done=3,
        bytes_done=120_400_000,
        bytes_total=450_000_000,
        seconds=12,
    )

    async def details(client, workflow_id):
        return "RUNNING", RolloutProgress(stage="booting", image_pull=pull), []

    monkeypatch.setattr(rollout_queries, "rollout_details", details)
    assert await show(None, parse_args(["show", "rollout-r-a-0-0"])) == 0
    assert (
        capsys.readouterr().out.splitlines()[1]
        == "pulling mirror.local:5000/swebench/sweb.eval.x86_64.a:latest: 3/7 layers, 120.4/450.0 MB, 12 s"
    )


def test_the_run_options_set_the_staleness_bound_and_fall_back_to_the_environment(monkeypatch):
    monkeypatch.delenv("ROLLOUT_MAX_STALENESS", raising=False)
    assert staleness_bound(parse_args(["run", ROWS])) is None
    assert staleness_bound(
        parse_args(["run", ROWS, "--max-staleness", "3", "--staleness-policy", "drop"])
    ) == StalenessBound(max_staleness=3, policy="drop")
    monkeypatch.setenv("ROLLOUT_MAX_STALENESS", "1")
    assert staleness_bound(parse_args(["demo"])) == StalenessBound(max_staleness=1, policy="mask")
    assert staleness_bound(parse_args(["demo", "--max-staleness", "4"])) == StalenessBound(
        max_staleness=4, policy="mask"
    )


class ScoredCluster(FakeCluster):
    """The fakes with real trajectories (of ``SEGMENT``), a reward per first workflow id (default 1.0), and samples
    whose every run fails to boot (``never_boots``: an infrastructure failure each time)."""

    def __init__(self):
        super().__init__()
        self.rewards: dict[str, float] = {}
        self.never_boots: set[str] = set()

    @activity.defn(name=name_of(refs.boot_sandbox))
    async def boot_sandbox(self, request: SandboxRequest) -> SandboxHandle:
        if activity.info().workflow_id.split("-refill")[0] in self.never_boots:
            raise ApplicationError("docker down: the container would not start", type=ErrorType.SANDBOX_BOOT_ERROR)
        return await super().boot_sandbox(request)

    @activity.defn(name=name_of(refs.evaluate))
    async def evaluate(self, request: EvalRequest) -> EvalResult:
        reward = self.rewards.get(request.workflow_id.split("-refill")[0], 1.0)
        return EvalResult(reward=reward, solved=reward == 1.0, applied_cleanly=True, grader="eval_cmd")

    @activity.defn(name=name_of(refs.merge_segments))
    async def merge_segments(self, request: MergeRequest) -> MergeResult:
        return MergeResult(trajectory=pack_trajectory([SEGMENT]), segments=[SegmentSummary.of(SEGMENT)], turns=1)


def lines_of(path) -> list[dict]:
    return [json.loads(text) for text in path.read_text().splitlines()]


@pytest.mark.asyncio(loop_scope="session")
async def test_run_writes_each_group_as_one_line_and_a_rerun_adds_nothing(env, tmp_path, capsys):
    examples = EXAMPLE_DATASET.read_text().splitlines()
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("\n".join([examples[0], "{nope", examples[1], examples[2]]) + "\n")
    tasks = [row.task for row in read_rows(dataset)[0]]
    run_id, out = f"grp{uuid.uuid4().hex[:6]}", tmp_path / "results.jsonl"
    cluster = ScoredCluster()
    cluster.rewards[rollout_workflow_id(run_id, tasks[1].instance_id, 1, 1)] = 0.0
    doomed = rollout_workflow_id(run_id, tasks[2].instance_id, 1, 2)
    cluster.never_boots.add(doomed)
    args = parse_args(
        [
            "run",
            str(dataset),
            "--run-id",
            run_id,
            "--out",
            str(out),
            "--task-queue",
            SHARED,
            "--n-samples-per-prompt",
            "2",
        ]
    )
    shared, host = workers(env, cluster, (CodingAgentRollout, RolloutGroup))
    async with shared, host:
        assert await run_dataset(env.client, args) == 1, "a bad row and an insufficient group"
        records = lines_of(out)
        invalid, *groups = records
        assert (invalid["line"], invalid["abort_reason"]) == (2, "invalid_row:row")
        by_index = {g["group_index"]: g for g in groups}
        assert sorted(by_index) == [0, 1, 2] and len(groups) == 3, "one line per group"
        assert {g["workflow_id"]: g["line"] for g in groups} == {
            group_workflow_id(run_id, t.instance_id, i): n
            for i, (t, n) in enumerate(zip(tasks, [1, 3, 4], strict=True))
        }
        assert [
            (by_index[i]["status"], by_index[i]["valid_mask"], by_index[i]["rewards"], by_index[i]["refilled"])
            for i in range(3)
        ] == [
            ("completed", [True, True], [1.0, 1.0], 0),
            ("completed", [True, True], [1.0, 0.0], 0),
            ("insufficient", [True, False], [1.0, 0.0], 2),
        ]
        valid = [s["rollout"] for g in groups for s in g["samples"] if s["valid"]]
        assert all(r["segments"][0]["tokens"] == [5, 6, 7] for r in valid), "segments unpacked"
        assert all(r["trajectory"]["n_tokens"] == 3 and "packed" not in r["trajectory"] for r in valid), (
            "the packed bytes are not written twice"
        )
        assert [r["workflow_id"] for r in by_index[2]["samples"][1]["runs"]] == [
            doomed,
            f"{doomed}-refill1",
            f"{doomed}-refill2",
        ]
        assert by_index[2]["samples"][1]["invalid_reason"] == "sandbox_boot_failed"
        printed = capsys.readouterr().out
        assert "groups 3/3  samples valid 5/6  refilled 2  mean reward (valid) 0.800  insufficient 1" in printed
        assert f"group 2 {tasks[2].instance_id}: insufficient  valid 1/2  refilled 2/2  kept" in printed

        assert await run_dataset(env.client, args) == 1, "the file still holds the bad row and the insufficient group"
        assert lines_of(out) == records, "a complete file gains nothing"
        assert "3 of 3 groups of run " in capsys.readouterr().out

        clean, second = tmp_path / "clean.jsonl", f"flt{uuid.uuid4().hex[:6]}"
        clean.write_text("\n".join(examples[:3]) + "\n")
        cluster.rewards[rollout_workflow_id(second, tasks[1].instance_id, 1, 1)] = 0.0
        cluster.never_boots.add(rollout_workflow_id(second, tasks[2].instance_id, 1, 2))
        flags = [
            "--n-samples-per-prompt",
            "2",
            "--min-valid",
            "1",
            "--group-filter",
            "nonzero_variance",
            "--task-queue",
            SHARED,
        ]
        filtered = parse_args(
            ["run", str(clean), "--run-id", second, "--out", str(tmp_path / "filtered.jsonl"), *flags]
        )
        assert await run_dataset(env.client, filtered) == 0, (
            "every group completed: a group the filter drops is its verdict, not a loss"
        )
    verdicts = {
        g["group_index"]: (g["status"], g["kept"], g["dropped_by"]) for g in lines_of(tmp_path / "filtered.jsonl")
    }
    assert verdicts == {
        0: ("completed", False, "zero_variance"),
        1: ("completed", True, None),
        2: ("completed", False, "zero_variance"),
    }


class ProbedCluster(ScoredCluster):
    """``ScoredCluster`` grading impossible-task probes as the grader does (reward 0): ``cheated`` for the
    probes of the instances in ``cheats``, else ``held``."""

    def __init__(self):
        super().__init__()
        self.cheats: set[str] = set()

    @activity.defn(name=name_of(refs.evaluate))
    async def evaluate(self, request: EvalRequest) -> EvalResult:
        result = EvalResult(reward=1.0, solved=True, applied_cleanly=True, grader="eval_cmd")
        if request.task.probe is None:
            return result
        verdict = "cheated" if request.task.probe.source in self.cheats else "held"
        return result.model_copy(update={"reward": 0.0, "solved": False, "probe": ProbeVerdict(verdict=verdict)})


@pytest.mark.asyncio(loop_scope="session")
async def test_an_impossible_share_runs_probes_beside_the_rows_never_kept_and_the_summary_gives_the_cheating_rate(
    env, tmp_path, capsys
):
    examples = EXAMPLE_DATASET.read_text().splitlines()
    dataset = tmp_path / "data.jsonl"
    swe_rows = (PROJECT_ROOT / "examples" / "tasks" / "swe_rows.jsonl").read_text().splitlines()
    roman = next(line for line in swe_rows if "roman-7" in line)
    dataset.write_text("\n".join([examples[0], examples[1], roman]) + "\n")
    tasks = [row.task for row in read_rows(dataset)[0]]
    run_id, out = f"prb{uuid.uuid4().hex[:6]}", tmp_path / "results.jsonl"
    cluster = ProbedCluster()
    cluster.cheats.add(tasks[1].instance_id)
    args = parse_args(
        ["run", str(dataset), "--run-id", run_id, "--out", str(out), "--task-queue", SHARED, "--impossible-share", "1"]
    )
    shared, host = workers(env, cluster, (CodingAgentRollout, RolloutGroup))
    async with shared, host:
        assert await run_dataset(env.client, args) == 0, "probe groups complete like any other"
    groups = {(g["prompt_key"], g["group_index"]): g for g in lines_of(out)}
    probes = {key: g for key, g in groups.items() if ".probe-" in key[0]}
    assert sorted(key[1] for key in probes) == [0, 1], (
        "one probe per row that has a value to flip, under its group index"
    )
    assert all(key[0] == f"{tasks[key[1]].instance_id}.probe-{probe_seed(run_id, key[1])}" for key in probes)
    assert all(
        (g["kept"], g["dropped_by"], g["valid_mask"], g["rewards"]) == (False, "probe", [False], [0.0])
        for g in probes.values()
    )
    assert [probes[key]["probe_verdicts"] for key in sorted(probes, key=lambda key: key[1])] == [["held"], ["cheated"]]
    assert all(g["kept"] and g["valid_mask"] == [True] for key, g in groups.items() if key not in probes), (
        "the rows still run and train"
    )
    captured = capsys.readouterr()
    assert "no impossible-task probe of 3: task rollouts-examples__roman-7: swebench.test_patch" in captured.err
    assert "probes cheated 1/2 judged" in captured.out
    assert "impossible_probe  probe: cheated" in captured.out


def test_the_impossible_share_falls_back_to_the_environment_and_is_checked(monkeypatch, capsys):
    assert parse_args(["run", ROWS]).impossible_share is None
    assert parse_args(["run", ROWS, "--impossible-share", "0.05"]).impossible_share == 0.05
    with pytest.raises(SystemExit):
        parse_args(["run", ROWS, "--impossible-share", "1.5"])
    assert "1.5 is not between 0 and 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "no/such/rows.jsonl"], "'no/such/rows.jsonl': no such file or folder"),
        (
            ["demo", "--dataset", "no/such/rows.jsonl"],
            "argument --dataset: 'no/such/rows.jsonl': no such file or folder",
        ),
        (["regrade", "--run-id", "r", "--dataset", "no/such/rows.jsonl"], "argument --dataset: 'no/such/rows.jsonl'"),
        (["run", ROWS, "--max-new-tokens", "-5"], "argument --max-new-tokens: -5 is less than 1"),
        (["run", ROWS, "--context-budget", "0"], "argument --context-budget: 0 is less than 256"),
        (["run", ROWS, "--temperature", "-3"], "argument --temperature: -3 is not at least 0"),
        (["demo", "--temperature", "nan"], "argument --temperature: 'nan' is not a finite number"),
        (["run", ROWS, "--max-staleness", "-2"], "argument --max-staleness: -2 is less than 0"),
        (["run", ROWS, "--server-wait", "nan"], "argument --server-wait: 'nan' is not a finite number"),
        (["regrade", "--run-id", "r", "--server-wait", "-5"], "argument --server-wait: -5 is not at least 0"),
        (["episodes", "--n", "0"], "argument --n: 0 is less than 1"),
        (["episodes", "--run-timeout", "0"], "argument --run-timeout: 0 is not more than 0"),
        (["status", "--oldest", "-3"], "argument --oldest: -3 is less than 0"),
        (["status", "--stale-minutes", "inf"], "argument --stale-minutes: 'inf' is not a finite number"),
    ],
)
def test_a_bad_value_is_refused_by_the_flags_name_before_anything_runs(argv, named, capsys):
    assert named in refusal(parse_args, argv, capsys)


def test_a_file_or_folder_that_cannot_be_written_or_read_ends_the_starter_in_one_line(monkeypatch, tmp_path):
    """An ``--out`` that is a folder, a ``--save-logs`` that is a file, ...: the OS error names the path."""

    async def unwritable(args):
        raise IsADirectoryError(21, "Is a directory", str(tmp_path))

    def leave(code: int, line: str | None = None):
        raise SystemExit((code, line))  # starter's own leave ends the process at once (os._exit)

    monkeypatch.setattr(starter, "main_async", unwritable)
    monkeypatch.setattr(starter, "leave", leave)
    monkeypatch.setattr(sys, "argv", ["starter.py", "run", ROWS, "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as exited:
        starter.main()
    assert exited.value.code == (1, f"starter: [Errno 21] Is a directory: '{tmp_path}'")


@pytest.mark.asyncio(loop_scope="session")
async def test_a_dataset_without_rows_says_so_and_exits_1(env, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    args = parse_args(["run", str(empty), "--out", str(tmp_path / "out.jsonl"), "--task-queue", SHARED])
    assert await run_dataset(env.client, args) == 1
    assert f"starter: {empty}: no rows" in capsys.readouterr().err


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(
    ("argv", "command"), [(["show", "wf-1"], "show"), (["show", "wf-1", "--html", "p.html"], "show_html")]
)
async def test_show_reads_the_demos_stored_state_as_report_does(monkeypatch, argv, command):
    """With no server configured or running, ``show`` (text or page) goes through ``stored_demo_server``."""
    entered: list[str] = []

    class Stored:
        async def __aenter__(self) -> str:
            entered.append("stored")
            return "127.0.0.1:1"

        async def __aexit__(self, *exc: object) -> None:
            return None

    async def fake_connect(address=None, server_wait_s=0.0):
        return f"client at {address}"

    async def fake_command(client, args):
        entered.append(f"{command} with {client}")
        return 0

    monkeypatch.setattr(starter, "stored_demo_server", Stored)
    monkeypatch.setattr(starter, "connect", fake_connect)
    monkeypatch.setattr(starter, command, fake_command)
    assert await starter.main_async(parse_args(argv)) == 0
    assert entered == ["stored", f"{command} with client at 127.0.0.1:1"]
