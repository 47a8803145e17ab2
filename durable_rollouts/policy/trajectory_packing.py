"""Token segments packed into a ``PackedTrajectory``: the payload a rollout's result carries them in.

A 100k-token trajectory is ~2.7 MiB as JSON; packed it is int32 ids, uint8
mask and float64 log-probs (bit-exact as the server sent them), the rest of
each segment (its weight version spans included) as JSON beside them,
compressed together, and the session's turn log (``TurnLog``: the turns in
record order and the keys of the messages that routed them) and replay data
(``SegmentReplay``: top-p nuclei as int32, routed experts as uint8 when every
id fits, else uint16) when it has them.
The trajectory travels through Temporal as an ordinary
payload: Temporal's external storage (``durable_rollouts.trainer_client.payload_storage``)
puts a large one in the object store or the local payload folder and keeps
a reference in history, so no host reads another host's disk.
``unpack_trajectory`` verifies the digest before it decodes.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field

import numpy as np

from durable_rollouts.contracts.replay import SegmentReplay
from durable_rollouts.contracts.tokens import PackedTrajectory, TokenSegment, TurnLog


class TrajectoryUnreadable(ValueError):
    """A packed trajectory that cannot be unpacked: empty (recorded before trajectories travelled inline) or altered."""


@dataclass(frozen=True)
class Trajectory:
    """What a packed trajectory holds: its segments, its turn log (None: recorded without one) and its replay
    data (empty: none captured; else one per segment)."""

    segments: list[TokenSegment]
    turn_log: TurnLog | None = None
    replay: list[SegmentReplay] = field(default_factory=list)


def pack_trajectory(
    segments: list[TokenSegment], turn_log: TurnLog | None = None, replay: list[SegmentReplay] | None = None
) -> PackedTrajectory:
    """``segments`` packed, with ``turn_log`` (checked against them) and ``replay`` (one per segment) when given."""
    if turn_log is not None:
        turn_log.check_against(segments)
    if replay and len(replay) != len(segments):
        raise ValueError(f"{len(replay)} replay records for {len(segments)} segments")
    packed = encode_trajectory(segments, turn_log, replay or [])
    return PackedTrajectory(
        packed=packed,
        sha256=hashlib.sha256(packed).hexdigest(),
        n_segments=len(segments),
        n_tokens=sum(len(s.tokens) for s in segments),
        nbytes=len(packed),
    )


def unpack_trajectory(trajectory: PackedTrajectory) -> list[TokenSegment]:
    """The segments ``trajectory`` holds; ``TrajectoryUnreadable`` when it holds none or its digest differs."""
    return read_trajectory(trajectory).segments


def read_trajectory(trajectory: PackedTrajectory) -> Trajectory:
    """Segments and turn log of ``trajectory``; ``TrajectoryUnreadable`` when it holds none or its digest differs."""
    if not trajectory.packed:
        raise TrajectoryUnreadable(
            "trajectory carries no packed segments (a result from a worker that kept them in a folder)"
        )
    if hashlib.sha256(trajectory.packed).hexdigest() != trajectory.sha256:
        raise TrajectoryUnreadable(f"trajectory sha256 mismatch (expected {trajectory.sha256[:16]}…)")
    return decode_trajectory(trajectory.packed)


def encode_trajectory(
    segments: list[TokenSegment], turn_log: TurnLog | None = None, replay: list[SegmentReplay] | None = None
) -> bytes:
    lengths = np.array([len(s.tokens) for s in segments], dtype=np.int64)
    meta = [s.model_dump(exclude={"tokens", "loss_mask", "rollout_log_probs"}) for s in segments]
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        tokens=np.array([t for s in segments for t in s.tokens], dtype=np.int32),
        loss_mask=np.array([m for s in segments for m in s.loss_mask], dtype=np.uint8),
        log_probs=np.array([p for s in segments for p in s.rollout_log_probs], dtype=np.float64),
        lengths=lengths,
        meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
        **(
            {"turn_log": np.frombuffer(turn_log.model_dump_json().encode(), dtype=np.uint8)}
            if turn_log is not None
            else {}
        ),
        **(replay_arrays(replay) if replay else {}),
        allow_pickle=False,  # numeric arrays only; decode_trajectory's np.load refuses pickles too
    )
    return buffer.getvalue()


def replay_arrays(replay: list[SegmentReplay]) -> dict[str, np.ndarray]:
    """Each kind of replay data concatenated over the segments, with its lengths per segment."""
    arrays: dict[str, np.ndarray] = {}
    if replay[0].top_p_ids is not None:
        arrays["top_p_ids"] = np.concatenate([r.top_p_ids for r in replay if r.top_p_ids is not None])
        arrays["top_p_offsets"] = np.concatenate([r.top_p_offsets for r in replay if r.top_p_offsets is not None])
        arrays["top_p_lengths"] = np.array(
            [len(r.top_p_ids) for r in replay if r.top_p_ids is not None], dtype=np.int64
        )
    if replay[0].routed is not None:
        rows = np.concatenate([r.routed for r in replay if r.routed is not None])
        arrays["routed"] = rows.astype(np.uint8) if rows.size == 0 or rows.max() < 256 else rows
        arrays["routed_rows"] = np.array([len(r.routed) for r in replay if r.routed is not None], dtype=np.int64)
    return arrays


def _replay_of(arrays: np.lib.npyio.NpzFile, lengths: np.ndarray) -> list[SegmentReplay]:
    """The per-segment replay data of ``replay_arrays``, back (``lengths``: the segments' token counts)."""
    n = len(lengths)
    top_p: list[tuple[np.ndarray | None, np.ndarray | None]] = [(None, None)] * n
    routed: list[np.ndarray | None] = [None] * n
    if "top_p_ids" in arrays.files:
        ids_end = np.cumsum(arrays["top_p_lengths"])
        offsets_end = np.cumsum(lengths + 1)
        ids, offsets = np.split(arrays["top_p_ids"], ids_end[:-1]), np.split(arrays["top_p_offsets"], offsets_end[:-1])
        top_p = list(zip(ids, offsets, strict=True))
    if "routed" in arrays.files:
        routed = list(np.split(arrays["routed"].astype(np.uint16), np.cumsum(arrays["routed_rows"])[:-1]))
    if not ("top_p_ids" in arrays.files or "routed" in arrays.files):
        return []
    return [SegmentReplay(top_p_ids=i, top_p_offsets=o, routed=r) for (i, o), r in zip(top_p, routed, strict=True)]


def decode_trajectory(payload: bytes) -> Trajectory:
    with np.load(io.BytesIO(payload)) as arrays:
        meta = json.loads(arrays["meta"].tobytes())
        bounds = np.concatenate([[0], np.cumsum(arrays["lengths"])])
        tokens, mask, log_probs = arrays["tokens"], arrays["loss_mask"], arrays["log_probs"]
        turn_log = TurnLog.model_validate_json(arrays["turn_log"].tobytes()) if "turn_log" in arrays.files else None
        replay = _replay_of(arrays, arrays["lengths"])
        segments = [
            TokenSegment(
                **info,
                tokens=tokens[a:b].tolist(),
                loss_mask=mask[a:b].tolist(),
                rollout_log_probs=[float(x) for x in log_probs[a:b]],
            )
            for info, a, b in zip(meta, bounds[:-1], bounds[1:], strict=False)
        ]
    return Trajectory(segments, turn_log, replay)
