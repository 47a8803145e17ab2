"""Process start: what a worker, starter or page process of the project spends before it does any work.

Two costs every such process pays, each measured in a fresh child process of the project's interpreter (the
child's own CPU, ``RUSAGE_SELF``, around the measured statement only), over ``--rounds`` rounds in which shipped
and baseline alternate:

* **entry imports**: ``import worker`` and ``import starter`` as shipped (boto is imported only where a bucket
  store is used, ``durable_rollouts.trainer_client.s3_payloads``) against the **baseline** of the same import with
  aioboto3, botocore and the SDK's S3 driver imported first, as every process did while the payload module
  imported them at its top;
* **tokenizer load**: ``AutoTokenizer.from_pretrained`` of the cached Qwen3.6 folder as shipped (its config
  declares the added tokens, ``durable_rollouts.policy.tokenizer_cache``) against the **baseline** of a copy of
  it whose config does not, as transformers 5's ``save_pretrained`` writes it: the load then parses the
  ``tokenizer.json`` a second time in Python. The transformers import is outside the measured span.

Prints the medians per measure and the ratio baseline / shipped. No thresholds. From the repository root (about
3 minutes with the defaults; ``make setup`` first, for the tokenizer)::

    flock /tmp/bench.lock .venv/bin/python -m bench.process_start_bench [--rounds 9] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer

BOTO_FIRST = "import aioboto3, botocore.config, botocore.exceptions, temporalio.contrib.aws.s3driver.aioboto3; "
# A child: ``setup`` untimed, then ``statement`` timed; prints the CPU seconds the statement took.
CHILD = """
import resource, sys
{setup}
before = resource.getrusage(resource.RUSAGE_SELF)
{statement}
after = resource.getrusage(resource.RUSAGE_SELF)
print(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
"""


def _child(setup: str, statement: str, *args: str) -> float:
    """The CPU seconds ``statement`` took in a fresh ``python -c`` (after ``setup``) from the checkout root."""
    code = CHILD.format(setup=setup, statement=statement)
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"child failed ({done.returncode}): {done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def undeclared_copy(folder: Path, into: Path) -> Path:
    """A copy of the tokenizer ``folder`` whose config has no ``added_tokens_decoder``."""
    copy = into / "undeclared"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config.pop("added_tokens_decoder", None)
    (copy / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return copy


def measure(rounds: int, scratch: Path) -> dict[str, dict[str, list[float]]]:
    """Per measure, per variant ("shipped", "baseline"), one CPU-seconds value per round."""
    shipped_tokenizer = ensure_qwen_tokenizer()
    baseline_tokenizer = undeclared_copy(shipped_tokenizer, scratch)
    load = "AutoTokenizer.from_pretrained(sys.argv[1])"
    cases: dict[str, dict[str, tuple[str, str, tuple[str, ...]]]] = {
        "import worker": {"shipped": ("", "import worker", ()), "baseline": ("", BOTO_FIRST + "import worker", ())},
        "import starter": {"shipped": ("", "import starter", ()), "baseline": ("", BOTO_FIRST + "import starter", ())},
        "tokenizer load": {
            "shipped": ("from transformers import AutoTokenizer", load, (str(shipped_tokenizer),)),
            "baseline": ("from transformers import AutoTokenizer", load, (str(baseline_tokenizer),)),
        },
    }
    for variants in cases.values():  # warm-up, untimed: bytecode caches and the page cache
        for setup, statement, args in variants.values():
            _child(setup, statement, *args)
    results: dict[str, dict[str, list[float]]] = {name: {"shipped": [], "baseline": []} for name in cases}
    for round_index in range(rounds):
        order = ("shipped", "baseline") if round_index % 2 == 0 else ("baseline", "shipped")
        for name, variants in cases.items():
            for variant in order:
                setup, statement, args = variants[variant]
                value = _child(setup, statement, *args)
                results[name][variant].append(value)
                print(f"round {round_index + 1} {name:15s} {variant:8s} {value:5.2f} CPU-s")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", type=Path, help="write the per-round values and the medians here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="process-start-bench-") as scratch:
        results = measure(args.rounds, Path(scratch))
    summary: dict[str, Any] = {}
    print(f"\nmedian CPU seconds over {args.rounds} rounds")
    for name, variants in results.items():
        shipped, baseline = statistics.median(variants["shipped"]), statistics.median(variants["baseline"])
        summary[name] = {"shipped": shipped, "baseline": baseline, "baseline / shipped": baseline / shipped}
        print(
            f"  {name:15s} shipped {shipped:5.2f}  baseline {baseline:5.2f}  baseline / shipped "
            f"{baseline / shipped:4.2f}x"
        )
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, "values": results, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
