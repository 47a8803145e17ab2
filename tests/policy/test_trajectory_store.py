"""The claim check keeps long trajectories out of Temporal payloads, bit-exact."""

import io
import json
import random

import numpy as np
import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from contracts.rollout import TokenSegment, spans_from_runs
from policy.trajectory_store import TrajectoryStore, decode_segments

TEMPORAL_PAYLOAD_LIMIT = 2 * 1024 * 1024


def long_segment(n_tokens: int, prompt: int) -> TokenSegment:
    rng = random.Random(0)
    mask = [0] * prompt + [1 if rng.random() < 0.7 else 0 for _ in range(n_tokens - prompt)]
    return TokenSegment(
        kind="main",
        tokens=[rng.randrange(248_000) for _ in range(n_tokens)],
        loss_mask=mask,
        rollout_log_probs=[-rng.random() * 5 if m else 0.0 for m in mask],
        prompt_length=prompt,
        turns=40,
        finish_reason="stop",
    )


def test_a_100k_token_trajectory_round_trips_exactly_and_only_a_tiny_ref_travels(tmp_path):
    segments = [long_segment(100_000, 20_000), long_segment(3_000, 1_000)]
    store = TrajectoryStore(tmp_path)
    ref = store.put("rollout-x-0-0", segments)
    assert TrajectoryStore.load(ref) == segments
    as_json_payload = len(json.dumps([s.model_dump() for s in segments]))
    (ref_payload,) = pydantic_data_converter.payload_converter.to_payloads([ref])
    assert as_json_payload > TEMPORAL_PAYLOAD_LIMIT, "why the claim check exists"
    assert ref.nbytes < as_json_payload / 2
    assert len(ref_payload.data) < 1024
    print(f"100k+3k tokens: JSON {as_json_payload / 2**20:.2f} MiB, stored {ref.nbytes / 2**20:.2f} MiB, ref payload {len(ref_payload.data)} B")


def test_a_tampered_file_is_rejected(tmp_path):
    store = TrajectoryStore(tmp_path)
    ref = store.put("k", [long_segment(100, 10)])
    path = tmp_path / "k.npz"
    assert ref.uri == path.as_uri()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    try:
        TrajectoryStore.load(ref)
    except ValueError as error:
        assert "sha256" in str(error)
    else:
        raise AssertionError("a corrupted trajectory must not load")


HOSTILE_KEYS = [
    "rollout-run-Crème brûlée-0-0",
    "rollout-run-🦀🔥-0-0",
    "rollout-run-数据集/任务-1-2",
    "../../etc/passwd",
    "..",
    ".tmp-collides-with-temp-files",
    "a/b",
    "a_b",
    "x" * 2017,
    "é" * 600,
    "",
]


@pytest.mark.parametrize("root_name", ["plain", "résultats avec espaces %41"])
def test_any_key_round_trips_and_stays_inside_the_root(tmp_path, root_name):
    store = TrajectoryStore(tmp_path / root_name)
    refs = {key: store.put(key, [long_segment(50 + i, 5)]) for i, key in enumerate(HOSTILE_KEYS)}
    for i, (key, ref) in enumerate(refs.items()):
        assert TrajectoryStore.load(ref) == [long_segment(50 + i, 5)], key
    files = sorted(p for p in (tmp_path / root_name).iterdir())
    assert len(files) == len(HOSTILE_KEYS), "distinct keys, distinct files (a/b and a_b do not collide)"
    assert all(len(p.name.encode()) <= 255 and p.name.isascii() and not p.name.startswith(".") for p in files)
    assert [p.name for p in (tmp_path).iterdir()] == [root_name], "nothing written outside the root"
    assert store.put_log("🦀/" + "y" * 400, b"log").parent == store.root


def test_a_ref_that_is_not_a_local_file_is_refused(tmp_path):
    ref = TrajectoryStore(tmp_path).put("k", [long_segment(10, 1)])
    for uri in ("s3://bucket/k.npz", "file://otherhost/k.npz"):
        with pytest.raises(ValueError, match="only local file"):
            TrajectoryStore.load(ref.model_copy(update={"uri": uri}))


def with_versions(segment: TokenSegment, every: int) -> TokenSegment:
    """Versions changing every ``every`` sampled tokens, named the way a trainer might (not all numeric)."""
    sampled = [i for i, m in enumerate(segment.loss_mask) if m]
    runs = [(i, i + 1, f"ckpt-{n // every}/é") for n, i in enumerate(sampled)]
    return segment.model_copy(update={"weight_version_spans": spans_from_runs(runs)})


def test_weight_version_spans_round_trip_exactly(tmp_path):
    segments = [with_versions(long_segment(20_000, 2_000), every=997), with_versions(long_segment(300, 10), every=1), long_segment(50, 5)]
    TokenSegment.model_validate(segments[0].model_dump())
    assert len(segments[0].weight_version_spans) == -(-sum(segments[0].loss_mask) // 997)
    ref = TrajectoryStore(tmp_path).put("versions", segments)
    loaded = TrajectoryStore.load(ref)
    assert loaded == segments
    assert [s.token_weight_versions() for s in loaded] == [s.token_weight_versions() for s in segments]


def test_a_file_stored_before_versions_existed_still_reads(tmp_path):
    segment = long_segment(200, 20)
    meta = [segment.model_dump(exclude={"tokens", "loss_mask", "rollout_log_probs", "weight_version_spans"})]
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        tokens=np.array(segment.tokens, dtype=np.int32),
        loss_mask=np.array(segment.loss_mask, dtype=np.uint8),
        log_probs=np.array(segment.rollout_log_probs, dtype=np.float64),
        lengths=np.array([len(segment.tokens)], dtype=np.int64),
        meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
    )
    (loaded,) = decode_segments(buffer.getvalue())
    assert loaded == segment and loaded.weight_version_spans == []


def test_a_kept_patch_reads_back_verified_and_only_from_the_store(tmp_path):
    store = TrajectoryStore(tmp_path / "store")
    patch = "diff --git a/x b/x\n+caf\u00e9\n"
    ref = store.put_patch("rollout-r-x-0-0.attempt2", patch)
    assert (ref.path, ref.nbytes) == (str(tmp_path / "store" / "rollout-r-x-0-0.attempt2.patch"), len(patch.encode()))
    assert store.load_patch(ref) == patch
    assert [p.name for p in (tmp_path / "store").iterdir()] == ["rollout-r-x-0-0.attempt2.patch"], "no temp file left behind"
    (tmp_path / "store" / "rollout-r-x-0-0.attempt2.patch").write_text(patch + "+more\n")
    with pytest.raises(ValueError, match="sha256 mismatch"):
        store.load_patch(ref)
    outside = tmp_path / "elsewhere.patch"
    outside.write_text(patch)
    with pytest.raises(ValueError, match="not a patch in the trajectory store"):
        store.load_patch(ref.model_copy(update={"path": str(outside)}))
    with pytest.raises(ValueError, match="not a patch in the trajectory store"):
        store.load_patch(ref.model_copy(update={"path": str(tmp_path / "store" / "rollout-r-x-0-0.attempt2.patch" / ".." / "x.npz")}))
    with pytest.raises(OSError):
        store.load_patch(ref.model_copy(update={"path": str(tmp_path / "store" / "gone.patch")}))


def test_a_grading_log_is_kept_whole_beside_the_trajectories(tmp_path):
    store = TrajectoryStore(tmp_path)
    log = "[apply]\n$ git apply --3way\napplied\n" + "é" * 100_000
    path = store.put_grading_log("rollout-r1-calc-s0.01234567.4.1", log)
    other = store.put_grading_log("rollout-r1-calc-s0.01234567.4.2", "retry")
    assert path.parent == tmp_path.resolve() and path.name == "rollout-r1-calc-s0.01234567.4.1.grading.log"
    assert path.read_text(encoding="utf-8") == log and other.read_text() == "retry"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == [], "written atomically, no temp file left"
