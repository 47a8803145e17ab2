"""The results file is appended to and completed by a re-run, never truncated."""

import json

from contracts.rollout import RolloutResult, TokenSegment, TrajectoryRef
from policy.trajectory_store import TrajectoryStore
from trainer_client.results_file import ResultSink, record_with_segments


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
    segment = TokenSegment(
        kind="main", tokens=[1, 2], loss_mask=[0, 1], rollout_log_probs=[0.0, -0.5], prompt_length=1, turns=1, finish_reason="stop"
    )
    ref = TrajectoryStore(tmp_path / "traj").put("rollout-Crème-🦀-0-0", [segment])
    good = record_with_segments(result("a", trajectory=ref))
    assert good["status"] == "completed" and good["segments"][0]["tokens"] == [1, 2]
    missing = record_with_segments(result("b", trajectory=TrajectoryRef(uri="file:///nowhere/b.npz", sha256="0", n_segments=1, n_tokens=2, nbytes=1)))
    assert (missing["status"], missing["abort_reason"], missing["segments"]) == ("failed", "trajectory_unreadable", [])
    assert "FileNotFoundError" in missing["error"]
    path = tmp_path / "results.jsonl"
    with ResultSink(path, lambda record: record) as sink:
        sink.write_record(good)
        sink.write_record(missing)
        assert sink.done == {"a"}
