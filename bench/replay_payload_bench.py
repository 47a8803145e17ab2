"""Replay-data payload benchmark: what routed experts and top-p nuclei add to a long MoE trajectory.

One ``--tokens`` trajectory (``bench.harness.synthetic_results.trajectory_segment``: 10 % prompt, 90 %
sampled) with the replay data of a Qwen3.5-35B-A3B-shaped policy (``--layers`` 40 x top-``--top-k`` 8 of
``--experts`` 256: uniformly random distinct experts per row, the worst case for compression) and top-p
nuclei of ``--nucleus`` ids per sampled token on average. In one run it prints, for the trajectory without replay
data, with top-p nuclei, and with both:

* the packed trajectory (``durable_rollouts.policy.trajectory_packing``) and its size against the same data as slime
  holds it (int32 ``tokens - 1`` x layers x top-k routing, int32 nuclei), with the ratio;
* pack and unpack time;
* what a rollout result's payload keeps in Temporal's history once the external store has it (the
  reference the data converter writes, ``durable_rollouts.trainer_client.payload_storage`` on a local folder).

No thresholds: it prints numbers. Run from the repository root::

    .venv/bin/python -m bench.replay_payload_bench [--tokens 65536] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness.synthetic_results import rollout_result, trajectory_segment
from durable_rollouts.config.payload_store import PayloadFolderSettings
from durable_rollouts.contracts.replay import SegmentReplay
from durable_rollouts.policy.trajectory_packing import pack_trajectory, read_trajectory
from durable_rollouts.trainer_client.payload_storage import data_converter


def replay_for(tokens: list[int], loss_mask: list[int], args: argparse.Namespace, routed: bool) -> SegmentReplay:
    rng = np.random.default_rng(0)
    counts = np.where(np.asarray(loss_mask) == 1, rng.poisson(args.nucleus - 1, len(tokens)) + 1, 0)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    ids = rng.integers(0, 151_936, int(offsets[-1]), dtype=np.int32)
    rows = None
    if routed:
        scores = rng.random((len(tokens) - 1, args.layers, args.experts), dtype=np.float32)
        rows = (
            np.argpartition(scores, args.top_k, axis=2)[:, :, : args.top_k]
            .astype(np.uint16)
            .reshape(len(tokens) - 1, -1)
        )
    return SegmentReplay(top_p_ids=ids, top_p_offsets=offsets, routed=rows)


def slime_bytes(replay: SegmentReplay | None) -> int:
    """The replay data as slime holds it in a ``Sample``: int32 nuclei and offsets, int32 routing."""
    if replay is None:
        return 0
    routed = replay.routed.size * 4 if replay.routed is not None else 0
    return (replay.top_p_ids.size + replay.top_p_offsets.size) * 4 + routed


async def history_reference(result) -> int:
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        converter = data_converter(PayloadFolderSettings(root=Path(tmp), threshold_bytes=256 * 1024))
        return (await converter.encode([result]))[0].ByteSize()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=65_536)
    parser.add_argument("--layers", type=int, default=40)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--experts", type=int, default=256)
    parser.add_argument("--nucleus", type=float, default=4.0, help="mean top-p ids per sampled token")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    segment = trajectory_segment(args.tokens, 0)
    base = len(segment.tokens) * (4 + 1 + 8)
    rows = {}
    for name, replay in (
        ("no replay", None),
        ("top-p", replay_for(segment.tokens, segment.loss_mask, args, routed=False)),
        ("top-p + routing", replay_for(segment.tokens, segment.loss_mask, args, routed=True)),
    ):
        started = time.perf_counter()
        packed = pack_trajectory([segment], replay=[replay] if replay else None)
        pack_s = time.perf_counter() - started
        started = time.perf_counter()
        back = read_trajectory(packed)
        unpack_s = time.perf_counter() - started
        assert back.replay == ([replay] if replay else [])
        result = rollout_result(segment, 16, 0).model_copy(update={"trajectory": packed})
        rows[name] = {
            "as_slime_holds_it_bytes": base + slime_bytes(replay),
            "packed_bytes": packed.nbytes,
            "pack_s": pack_s,
            "unpack_s": unpack_s,
            "history_bytes": await history_reference(result),
        }

    print(
        f"{args.tokens:,}-token trajectory, routing {args.layers} layers x top-{args.top_k} of {args.experts} experts, "
        f"~{args.nucleus:g} top-p ids/token"
    )
    print(
        f"{'':16} {'as slime holds it':>18} {'packed':>10} {'ratio':>6} {'pack s':>7} {'unpack s':>8} "
        f"{'in history':>10}"
    )
    for name, row in rows.items():
        ratio = row["as_slime_holds_it_bytes"] / row["packed_bytes"]
        print(
            f"{name:16} {row['as_slime_holds_it_bytes'] / 2**20:15.1f} MiB {row['packed_bytes'] / 2**20:6.1f} MiB "
            f"{ratio:5.1f}x "
            f"{row['pack_s']:7.2f} {row['unpack_s']:8.2f} {row['history_bytes']:8d} B"
        )
    if args.json:
        args.json.write_text(json.dumps({"tokens": args.tokens, "rows": rows}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
