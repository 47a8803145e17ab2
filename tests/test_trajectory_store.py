"""The claim check keeps long trajectories out of Temporal payloads, bit-exact."""

import json
import random

from temporalio.contrib.pydantic import pydantic_data_converter

from activities.contracts import TokenSegment
from activities.trajectory_store import TrajectoryStore

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
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    try:
        TrajectoryStore.load(ref)
    except ValueError as error:
        assert "sha256" in str(error)
    else:
        raise AssertionError("a corrupted trajectory must not load")
