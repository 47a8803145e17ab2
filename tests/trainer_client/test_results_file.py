"""The results file is appended to and completed by a re-run, never truncated; a group is one line. A line holds
no packed trajectory and no log body: the logs go to files beside it (``<results file>.logs/``)."""

import json
from pathlib import Path

import pytest

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.contracts.drift_repair import EpisodeResult, RoleTurn
from durable_rollouts.contracts.grading import EvalResult
from durable_rollouts.contracts.probes import ProbeVerdict
from durable_rollouts.contracts.rollout_group import ChildRun, GroupResult, GroupSample
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.tokens import PackedTrajectory, TokenSegment
from durable_rollouts.policy.trajectory_packing import pack_trajectory
from durable_rollouts.trainer_client.results_file import (
    GroupProgressLine,
    ResultSink,
    file_stem,
    group_record_with_segments,
    record_with_segments,
)

SEGMENT = TokenSegment(
    kind="main",
    tokens=[1, 2],
    loss_mask=[0, 1],
    rollout_log_probs=[0.0, -0.5],
    prompt_length=1,
    turns=1,
    finish_reason="stop",
)
# A trajectory recorded when segments lived in a folder: no packed segments to read.
NOWHERE = PackedTrajectory.model_validate(
    {"uri": "file:///nowhere/b.npz", "sha256": "0", "n_segments": 1, "n_tokens": 2, "nbytes": 1}
)
AGENT_LOG = '{"type":"system"}\n{"type":"result","result":"caf\u00e9 \U0001f980"}\n'
GRADING_LOG = "[apply]\n$ git apply --3way\napplied\n8 passed\n"


def result(workflow_id: str, status: str = "completed", reason: str | None = None, **extra) -> RolloutResult:
    return RolloutResult(
        workflow_id=workflow_id,
        instance_id="i",
        sample_index=0,
        group_index=0,
        status=status,
        abort_reason=reason,
        **extra,
    )


def lines(path) -> list[dict]:
    return [json.loads(text) for text in path.read_text().splitlines()]


def test_lines_are_appended_and_final_ones_count_as_done_across_runs(tmp_path):
    path = tmp_path / "out" / "results.jsonl"
    with ResultSink(path, record_with_segments) as sink:
        assert sink.done == set()
        for r in (
            result("a"),
            result("b", "aborted", "wall_clock_timeout"),
            result("c", "failed", "server_unavailable"),
            result("d", "failed", "start_rejected:INVALID_ARGUMENT"),
        ):
            sink.write(r)
        sink.write_record(
            {"workflow_id": "", "status": "failed", "abort_reason": "invalid_row:metadata.image", "line": 7}
        )
        assert sink.done == {"a", "b", "d", "line:7"}
    with ResultSink(path, record_with_segments) as sink:
        assert sink.done == {"a", "b", "d", "line:7"}, "a failed line the starter may collect again is not done"
        assert sink.final_status == {"a": "completed", "b": "aborted", "d": "failed", "line:7": "failed"}
        sink.write(result("c"))
        assert "c" in sink.done
    assert [(r["workflow_id"], r["status"]) for r in lines(path)] == [
        ("a", "completed"),
        ("b", "aborted"),
        ("c", "failed"),
        ("d", "failed"),
        ("", "failed"),
        ("c", "completed"),
    ]


def test_a_torn_last_line_is_cut_before_appending(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(record_with_segments(result("a"))) + "\n" + '{"workflow_id": "b", "sta')
    with ResultSink(path, record_with_segments) as sink:
        assert sink.done == {"a"}
        sink.write(result("b"))
    assert [r["workflow_id"] for r in lines(path)] == ["a", "b"]


def test_a_trajectory_the_starter_cannot_read_makes_a_failed_line_a_rerun_retries(tmp_path):
    good = record_with_segments(result("a", trajectory=pack_trajectory([SEGMENT])))
    assert good["status"] == "completed" and good["segments"][0]["tokens"] == [1, 2]
    missing = record_with_segments(result("b", trajectory=NOWHERE))
    assert (missing["status"], missing["abort_reason"], missing["segments"]) == ("failed", "trajectory_unreadable", [])
    assert missing["error"].startswith("TrajectoryUnreadable: ") and "no packed segments" in missing["error"]
    packed = pack_trajectory([SEGMENT])
    altered = record_with_segments(
        result(
            "c", trajectory=packed.model_copy(update={"packed": packed.packed[:-1] + bytes([packed.packed[-1] ^ 0xFF])})
        )
    )
    assert (altered["status"], altered["abort_reason"]) == ("failed", "trajectory_unreadable") and "sha256" in altered[
        "error"
    ]
    path = tmp_path / "results.jsonl"
    with ResultSink(path, lambda record: record) as sink:
        sink.write_record(good)
        sink.write_record(missing)
        sink.write_record(altered)
        assert sink.done == {"a"}


def with_logs(workflow_id: str, **fields) -> RolloutResult:
    agent = AgentRun(session_id="s", exit_code=0, reason="done", is_error=False, log=AGENT_LOG, log_tail="tail")
    evaluation = EvalResult(
        reward=1.0,
        solved=True,
        applied_cleanly=True,
        grader="eval_cmd",
        log=GRADING_LOG,
        log_bytes=len(GRADING_LOG),
        log_tail="8 passed",
    )
    return result(
        workflow_id, reward=1.0, agent=agent, evaluation=evaluation, trajectory=pack_trajectory([SEGMENT]), **fields
    )


def assert_logs_moved_out(line: dict, folder: Path, workflow_id: str) -> None:
    """The line names its logs' files in ``folder`` and holds neither log, nor the packed trajectory."""
    agent_file, grading_file = (
        folder / f"{file_stem(workflow_id)}.agent.jsonl",
        folder / f"{file_stem(workflow_id)}.grading.log",
    )
    assert (line["agent"]["log"], line["agent"]["log_path"]) == ("", str(agent_file))
    assert (line["evaluation"]["log"], line["evaluation"]["log_path"]) == ("", str(grading_file))
    assert (
        agent_file.read_text(encoding="utf-8") == AGENT_LOG and grading_file.read_text(encoding="utf-8") == GRADING_LOG
    )
    assert (line["agent"]["log_tail"], line["evaluation"]["log_tail"], line["evaluation"]["log_bytes"]) == (
        "tail",
        "8 passed",
        len(GRADING_LOG),
    )
    assert "packed" not in line["trajectory"] and line["trajectory"]["n_tokens"] == 2, (
        "the trajectory's digest and sizes stay"
    )
    assert line["segments"][0]["tokens"] == [1, 2], "its segments are in the line, unpacked"


def test_a_results_line_holds_no_packed_trajectory_and_no_log_the_logs_go_to_files_beside_it(tmp_path):
    path = tmp_path / "out" / "results.jsonl"
    with ResultSink(path, record_with_segments) as sink:
        sink.write(with_logs("rollout-r-calc-0-0"))
        sink.write(result("bare", trajectory=None))
    folder = tmp_path / "out" / "results.jsonl.logs"
    logged, bare = lines(path)
    assert_logs_moved_out(logged, folder, "rollout-r-calc-0-0")
    assert AGENT_LOG.splitlines()[1] not in path.read_text(encoding="utf-8") and "git apply" not in path.read_text(
        encoding="utf-8"
    )
    assert sorted(p.name for p in folder.iterdir()) == [
        "rollout-r-calc-0-0.agent.jsonl",
        "rollout-r-calc-0-0.grading.log",
    ], "no file for no log"
    assert (bare["agent"], bare["evaluation"], bare["trajectory"]) == (None, None, None)


def test_a_group_lines_samples_write_their_logs_each_to_its_own_files(tmp_path):
    path = tmp_path / "results.jsonl"
    ids = ["rollout-r-calc-0-0", "rollout-r-calc-1-0-refill1"]
    with ResultSink(path, group_record_with_segments, GroupProgressLine) as sink:
        sink.write(group("group-r-calc-0", *(sample(i, with_logs(workflow_id)) for i, workflow_id in enumerate(ids))))
    (line,) = lines(path)
    for dumped, workflow_id in zip(line["samples"], ids, strict=True):
        assert_logs_moved_out(dumped["rollout"], tmp_path / "results.jsonl.logs", workflow_id)
    assert len(list((tmp_path / "results.jsonl.logs").iterdir())) == 4


HOSTILE_IDS = [
    "rollout-run-Crème brûlée-0-0",
    "rollout-run-🦀🔥-0-0",
    "rollout-run-数据集/任务-1-2",
    "../../etc/passwd",
    "..",
    ".hidden",
    "a/b",
    "a_b",
    "x" * 2017,
    "é" * 600,
    "",
]


@pytest.mark.parametrize("folder_name", ["plain", "résultats avec espaces %41"])
def test_any_workflow_id_gets_its_own_log_files_inside_the_logs_folder(tmp_path, folder_name):
    path = tmp_path / folder_name / "results.jsonl"
    with ResultSink(path, record_with_segments) as sink:
        for workflow_id in HOSTILE_IDS:
            sink.write(with_logs(workflow_id))
    folder = tmp_path / folder_name / "results.jsonl.logs"
    files = sorted(folder.iterdir())
    assert len(files) == 2 * len(HOSTILE_IDS), "distinct ids, distinct files (a/b and a_b do not collide)"
    assert all(len(p.name.encode()) <= 255 and p.name.isascii() and not p.name.startswith(".") for p in files)
    assert sorted(p.name for p in (tmp_path / folder_name).iterdir()) == ["results.jsonl", "results.jsonl.logs"], (
        "nothing written outside"
    )
    for workflow_id, line in zip(HOSTILE_IDS, lines(path), strict=True):
        assert Path(line["agent"]["log_path"]).read_text(encoding="utf-8") == AGENT_LOG, workflow_id
    assert file_stem("rollout-r-calc-0-0") == "rollout-r-calc-0-0", "a plain id is its own name"


def group(workflow_id: str, *samples: GroupSample, status: str = "completed", refilled: int = 0) -> GroupResult:
    return GroupResult(
        workflow_id=workflow_id,
        prompt_key="i",
        status=status,
        samples=list(samples),
        refilled=refilled,
        kept=status == "completed",
    )


def sample(index: int, rollout: RolloutResult | None, valid: bool = True, reason: str | None = None) -> GroupSample:
    runs = (
        [
            ChildRun(
                workflow_id=rollout.workflow_id, status=rollout.status, outcome="model" if valid else "infrastructure"
            )
        ]
        if rollout
        else []
    )
    return GroupSample(
        sample_index=index,
        valid=valid,
        outcome="model" if valid else "infrastructure",
        invalid_reason=reason,
        rollout=rollout,
        runs=runs,
    )


def test_a_group_is_one_line_with_each_samples_segments_in_its_rollout():
    first = result("r-0", reward=1.0, trajectory=pack_trajectory([SEGMENT]))
    lost = result("r-1", "aborted", "sandbox_boot_failed")
    record = group_record_with_segments(
        group("group-r-i-0", sample(0, first), sample(1, lost, valid=False, reason="sandbox_boot_failed"))
    )
    assert (record["workflow_id"], record["status"], record["valid_mask"], record["rewards"]) == (
        "group-r-i-0",
        "completed",
        [True, False],
        [1.0, 0.0],
    )
    assert record["samples"][0]["rollout"]["segments"][0]["tokens"] == [1, 2], "the full segments replace the summaries"
    assert (
        record["samples"][1]["rollout"]["segments"] == []
        and record["samples"][1]["invalid_reason"] == "sandbox_boot_failed"
    )
    assert record["samples"][0]["rollout"]["workflow_id"] == "r-0" and record["samples"][0]["episode"] is None


def test_a_group_with_an_unreadable_trajectory_is_a_failed_line_a_rerun_retries(tmp_path):
    readable = result("r-0", trajectory=pack_trajectory([SEGMENT]))
    record = group_record_with_segments(group("g", sample(0, readable), sample(3, result("r-3", trajectory=NOWHERE))))
    assert (record["status"], record["abort_reason"], record["kept"], record["dropped_by"]) == (
        "failed",
        "trajectory_unreadable",
        False,
        "not_completed",
    )
    assert record["error"].startswith("sample 3: TrajectoryUnreadable")
    assert [s["rollout"]["status"] for s in record["samples"]] == ["completed", "completed"], (
        "the samples' own results stay"
    )
    with ResultSink(tmp_path / "results.jsonl", group_record_with_segments, GroupProgressLine) as sink:
        sink.write_record(record)
        assert "g" not in sink.done


def test_the_group_progress_line_counts_groups_valid_samples_refills_and_the_mean_valid_reward(tmp_path, capsys):
    with ResultSink(tmp_path / "results.jsonl", group_record_with_segments, GroupProgressLine) as sink:
        sink.pending(["g0", "g1", "g2"], str, "groups")
        sink.write(group("g0", sample(0, result("a", reward=1.0)), sample(1, result("b", reward=0.0))))
        sink.write(
            group(
                "g1",
                sample(0, result("c", reward=1.0)),
                sample(1, None, valid=False),
                status="insufficient",
                refilled=2,
            )
        )
    out = capsys.readouterr().out.splitlines()
    assert out[-2].endswith("groups 1/3  samples valid 2/2  refilled 0  mean reward (valid) 0.500")
    assert out[-1].endswith("groups 2/3  samples valid 3/4  refilled 2  mean reward (valid) 0.667  insufficient 1")
    assert sink.done == {"g0", "g1"}


def test_the_group_progress_line_shows_the_probes_judged_once_any_is(tmp_path, capsys):
    def judged(name: str, verdict: str) -> RolloutResult:
        probe = ProbeVerdict(verdict=verdict)
        return result(
            name, evaluation=EvalResult(reward=0.0, solved=False, applied_cleanly=True, grader="eval_cmd", probe=probe)
        )

    with ResultSink(tmp_path / "results.jsonl", group_record_with_segments, GroupProgressLine) as sink:
        sink.pending(["g0", "p0", "p1"], str, "groups")
        sink.write(group("g0", sample(0, result("a", reward=1.0))))
        sink.write(
            group("p0", sample(0, judged("b", "cheated"), valid=False), sample(1, judged("c", "held"), valid=False))
        )
        sink.write(group("p1", sample(0, judged("d", "void"), valid=False)))
    out = capsys.readouterr().out.splitlines()
    assert "probes" not in out[-3]
    assert out[-2].endswith("mean reward (valid) 1.000  probes cheated 1/2 judged")
    assert out[-1].endswith("mean reward (valid) 1.000  probes cheated 1/2 judged (1 void)")


def test_an_episode_line_holds_no_packed_trajectory_of_its_role_turns_either(tmp_path):
    role = RoleTurn(
        role="drift",
        session_id="s",
        system_prompt="",
        user_prompt="",
        completion="",
        trajectory=pack_trajectory([SEGMENT]),
    )
    episode = EpisodeResult(
        workflow_id="episode-r-0",
        status="completed",
        drift_policy="model",
        repair_policy="model",
        drift_role=role,
        repair_role=role.model_copy(update={"role": "repair"}),
        trajectory=pack_trajectory([SEGMENT, SEGMENT]),
    )
    path = tmp_path / "episodes.jsonl"
    with ResultSink(path, record_with_segments) as sink:
        sink.write(episode)
    (line,) = lines(path)
    assert '"packed"' not in path.read_text()
    assert line["drift_role"]["trajectory"]["n_tokens"] == line["repair_role"]["trajectory"]["n_tokens"] == 2
    assert [s["tokens"] for s in line["segments"]] == [[1, 2], [1, 2]]
