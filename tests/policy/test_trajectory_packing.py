"""A packed trajectory carries long token segments through Temporal as one ordinary payload, bit-exact and verified."""

import hashlib
import io
import json
import random
import struct

import numpy as np
import pytest
from temporalio.contrib.pydantic import pydantic_data_converter

from durable_rollouts.contracts.tokens import PackedTrajectory, TokenSegment
from durable_rollouts.contracts.weight_versions import spans_from_runs
from durable_rollouts.policy.trajectory_packing import (
    TrajectoryUnreadable,
    decode_trajectory,
    pack_trajectory,
    unpack_trajectory,
)

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


def float_bits(segments: list[TokenSegment]) -> list[bytes]:
    return [struct.pack(f"<{len(s.rollout_log_probs)}d", *s.rollout_log_probs) for s in segments]


def test_a_100k_token_trajectory_round_trips_bit_exact_and_packs_small():
    segments = [long_segment(100_000, 20_000), long_segment(3_000, 1_000)]
    awkward = segments[1].model_copy(
        update={"rollout_log_probs": [-5e-324, -1e-300, -0.0, *segments[1].rollout_log_probs[3:]]}
    )
    segments[1] = awkward
    trajectory = pack_trajectory(segments)
    unpacked = unpack_trajectory(trajectory)
    assert unpacked == segments
    assert float_bits(unpacked) == float_bits(segments), "log-probs come back bit for bit (-0.0 and subnormals too)"
    assert (trajectory.n_segments, trajectory.n_tokens) == (2, 103_000)
    assert (trajectory.nbytes, trajectory.sha256) == (
        len(trajectory.packed),
        hashlib.sha256(trajectory.packed).hexdigest(),
    )
    as_json = len(json.dumps([s.model_dump() for s in segments]))
    assert as_json > TEMPORAL_PAYLOAD_LIMIT, "why segments are packed"
    assert trajectory.nbytes < as_json / 2
    print(f"100k+3k tokens: JSON {as_json / 2**20:.2f} MiB, packed {trajectory.nbytes / 2**20:.2f} MiB")


def test_no_segments_pack_and_unpack_to_none():
    trajectory = pack_trajectory([])
    assert (trajectory.n_segments, trajectory.n_tokens) == (0, 0) and trajectory.packed
    assert unpack_trajectory(trajectory) == []


def test_an_altered_packed_trajectory_is_rejected():
    trajectory = pack_trajectory([long_segment(100, 10)])
    data = bytearray(trajectory.packed)
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(TrajectoryUnreadable, match="sha256"):
        unpack_trajectory(trajectory.model_copy(update={"packed": bytes(data)}))
    with pytest.raises(TrajectoryUnreadable, match="sha256"):
        unpack_trajectory(trajectory.model_copy(update={"sha256": "0" * 64}))


def test_a_trajectory_without_packed_segments_is_unreadable():
    """A result recorded when segments lived in a folder has no ``packed``: an error, never an empty trajectory."""
    recorded = PackedTrajectory.model_validate(
        {"uri": "file:///results/trajectories/k.npz", "sha256": "0" * 64, "n_segments": 1, "n_tokens": 10, "nbytes": 99}
    )
    assert recorded.packed == b""
    with pytest.raises(TrajectoryUnreadable, match="no packed segments"):
        unpack_trajectory(recorded)
    assert issubclass(TrajectoryUnreadable, ValueError), "readers catching ValueError (the results file) see it"


def test_a_packed_trajectory_keeps_its_bytes_through_the_json_payload_converter():
    segments = [long_segment(5_000, 500), long_segment(40, 4)]
    trajectory = pack_trajectory(segments)
    (payload,) = pydantic_data_converter.payload_converter.to_payloads([trajectory])
    assert payload.metadata["encoding"] == b"json/plain"
    assert json.loads(payload.data)["sha256"] == trajectory.sha256, "an ordinary JSON payload"
    assert len(payload.data) < 2 * trajectory.nbytes, "the bytes travel base64, not as a list of numbers"
    (back,) = pydantic_data_converter.payload_converter.from_payloads([payload], [PackedTrajectory])
    assert back == trajectory and back.packed == trajectory.packed
    assert unpack_trajectory(back) == segments


def with_versions(segment: TokenSegment, every: int) -> TokenSegment:
    """Versions changing every ``every`` sampled tokens, named the way a trainer might (not all numeric)."""
    sampled = [i for i, m in enumerate(segment.loss_mask) if m]
    runs = [(i, i + 1, f"ckpt-{n // every}/é") for n, i in enumerate(sampled)]
    return segment.model_copy(update={"weight_version_spans": spans_from_runs(runs)})


def test_weight_version_spans_round_trip_exactly():
    segments = [
        with_versions(long_segment(20_000, 2_000), every=997),
        with_versions(long_segment(300, 10), every=1),
        long_segment(50, 5),
    ]
    TokenSegment.model_validate(segments[0].model_dump())
    assert len(segments[0].weight_version_spans) == -(-sum(segments[0].loss_mask) // 997)
    unpacked = unpack_trajectory(pack_trajectory(segments))
    assert unpacked == segments
    assert [s.weight_version_spans for s in unpacked] == [s.weight_version_spans for s in segments]
    assert [s.token_weight_versions() for s in unpacked] == [s.token_weight_versions() for s in segments]


def test_segments_packed_before_versions_existed_still_decode():
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
    (loaded,) = decode_trajectory(buffer.getvalue()).segments
    assert loaded == segment and loaded.weight_version_spans == []
