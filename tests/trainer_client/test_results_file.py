"""The results file is appended to and completed by a re-run, never truncated; a group is one line."""

import json

from contracts.rollout import RolloutResult, TokenSegment, TrajectoryRef
from contracts.rollout_group import ChildRun, GroupResult, GroupSample
from policy.trajectory_store import TrajectoryStore
from trainer_client.results_file import GroupProgressLine, ResultSink, group_record_with_segments, record_with_segments

SEGMENT = TokenSegment(kind="main", tokens=[1, 2], loss_mask=[0, 1], rollout_log_probs=[0.0, -0.5], prompt_length=1, turns=1, finish_reason="stop")
NOWHERE = TrajectoryRef(uri="file:///nowhere/b.npz", sha256="0", n_segments=1, n_tokens=2, nbytes=1)


def result(workflow_id: str, status: str = "completed", reason: str | None = None, **extra) -> RolloutResult:
    return RolloutResult(workflow_id=workflow_id, instance_id="i", sample_index=0, group_index=0, status=status, abort_reason=reason, **extra)


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
        sink.write_record({"workflow_id": "", "status": "failed", "abort_reason": "invalid_row:metadata.image", "line": 7})
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
    ref = TrajectoryStore(tmp_path / "traj").put("rollout-Crème-🦀-0-0", [SEGMENT])
    good = record_with_segments(result("a", trajectory=ref))
    assert good["status"] == "completed" and good["segments"][0]["tokens"] == [1, 2]
    missing = record_with_segments(result("b", trajectory=NOWHERE))
    assert (missing["status"], missing["abort_reason"], missing["segments"]) == ("failed", "trajectory_unreadable", [])
    assert "FileNotFoundError" in missing["error"]
    path = tmp_path / "results.jsonl"
    with ResultSink(path, lambda record: record) as sink:
        sink.write_record(good)
        sink.write_record(missing)
        assert sink.done == {"a"}


def group(workflow_id: str, *samples: GroupSample, status: str = "completed", refilled: int = 0) -> GroupResult:
    return GroupResult(workflow_id=workflow_id, prompt_key="i", status=status, samples=list(samples), refilled=refilled, kept=status == "completed")


def sample(index: int, rollout: RolloutResult | None, valid: bool = True, reason: str | None = None) -> GroupSample:
    runs = [ChildRun(workflow_id=rollout.workflow_id, status=rollout.status, outcome="model" if valid else "infrastructure")] if rollout else []
    return GroupSample(
        sample_index=index, valid=valid, outcome="model" if valid else "infrastructure", invalid_reason=reason, rollout=rollout, runs=runs
    )


def test_a_group_is_one_line_with_each_samples_segments_in_its_rollout(tmp_path):
    store = TrajectoryStore(tmp_path / "traj")
    first = result("r-0", reward=1.0, trajectory=store.put("r-0", [SEGMENT]))
    lost = result("r-1", "aborted", "sandbox_boot_failed")
    record = group_record_with_segments(group("group-r-i-0", sample(0, first), sample(1, lost, valid=False, reason="sandbox_boot_failed")))
    assert (record["workflow_id"], record["status"], record["valid_mask"], record["rewards"]) == (
        "group-r-i-0",
        "completed",
        [True, False],
        [1.0, 0.0],
    )
    assert record["samples"][0]["rollout"]["segments"][0]["tokens"] == [1, 2], "the full segments replace the summaries"
    assert record["samples"][1]["rollout"]["segments"] == [] and record["samples"][1]["invalid_reason"] == "sandbox_boot_failed"
    assert record["samples"][0]["rollout"]["workflow_id"] == "r-0" and record["samples"][0]["episode"] is None


def test_a_group_with_an_unreadable_trajectory_is_a_failed_line_a_rerun_retries(tmp_path):
    readable = result("r-0", trajectory=TrajectoryStore(tmp_path / "traj").put("r-0", [SEGMENT]))
    record = group_record_with_segments(group("g", sample(0, readable), sample(3, result("r-3", trajectory=NOWHERE))))
    assert (record["status"], record["abort_reason"], record["kept"], record["dropped_by"]) == (
        "failed",
        "trajectory_unreadable",
        False,
        "not_completed",
    )
    assert record["error"].startswith("sample 3: FileNotFoundError")
    assert [s["rollout"]["status"] for s in record["samples"]] == ["completed", "completed"], "the samples' own results stay"
    with ResultSink(tmp_path / "results.jsonl", group_record_with_segments, GroupProgressLine) as sink:
        sink.write_record(record)
        assert "g" not in sink.done


def test_the_group_progress_line_counts_groups_valid_samples_refills_and_the_mean_valid_reward(tmp_path, capsys):
    with ResultSink(tmp_path / "results.jsonl", group_record_with_segments, GroupProgressLine) as sink:
        sink.pending(["g0", "g1", "g2"], str, "groups")
        sink.write(group("g0", sample(0, result("a", reward=1.0)), sample(1, result("b", reward=0.0))))
        sink.write(group("g1", sample(0, result("c", reward=1.0)), sample(1, None, valid=False), status="insufficient", refilled=2))
    out = capsys.readouterr().out.splitlines()
    assert out[-2].endswith("groups 1/3  samples valid 2/2  refilled 0  mean reward (valid) 0.500")
    assert out[-1].endswith("groups 2/3  samples valid 3/4  refilled 2  mean reward (valid) 0.667  insufficient 1")
    assert sink.done == {"g0", "g1"}
