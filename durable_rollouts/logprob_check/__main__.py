"""``python -m durable_rollouts.logprob_check SAMPLES.jsonl --checkpoint VERSION=DIR ...``: the trainer's log-prob
check.

SAMPLES.jsonl holds one slime sample per line (``Sample.to_dict()``: tokens, response_length, loss_mask,
rollout_log_probs, metadata.weight_version_spans). ``--checkpoint`` maps each weight version to the checkpoint that
sampled it (``--checkpoint none=DIR`` for tokens without a version). Prints the report (``--json``: as JSON); exit 0
when every trained token is within ``--threshold`` (default 1e-3), 1 when one is not, 2 on bad input.
Needs torch and transformers: run it with the engine's venv, ``.cache/vllm-engine/venv/bin/python``, from the checkout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from durable_rollouts.logprob_check.recompute import MissingCheckpoint, check_log_probs
from durable_rollouts.logprob_check.report import DEFAULT_THRESHOLD
from durable_rollouts.logprob_check.sequences import SampleError, TrainedSequence


def _checkpoint(value: str) -> tuple[str | None, Path]:
    version, sep, folder = value.partition("=")
    if not sep or not folder:
        raise argparse.ArgumentTypeError(f"--checkpoint {value!r}: expected VERSION=DIR")
    if not (Path(folder) / "config.json").is_file():
        raise argparse.ArgumentTypeError(f"--checkpoint {value!r}: {folder} has no config.json")
    return (None if version == "none" else version), Path(folder)


def read_samples(path: Path) -> list[TrainedSequence]:
    sequences = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line)
        except json.JSONDecodeError as error:
            raise SampleError(f"{path}:{number}: not JSON ({error.msg})") from None
        sequences.append(TrainedSequence.from_slime(fields, f"{path.name}:{number}"))
    return sequences


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m durable_rollouts.logprob_check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("samples", type=Path)
    parser.add_argument("--checkpoint", type=_checkpoint, action="append", required=True)
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        report = check_log_probs(read_samples(args.samples), dict(args.checkpoint), args.threshold)
    except (OSError, SampleError, MissingCheckpoint) as error:
        print(f"logprob_check: {error}", file=sys.stderr)
        return 2
    print(report.model_dump_json(indent=2) if args.json else "\n".join(report.lines()))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
