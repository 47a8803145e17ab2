"""The log-prob check as a trainer runs it, ``python -m durable_rollouts.logprob_check`` in the engine's venv: bad
input is exit 2 with one line naming the sample's file and line and the field, or the version no checkpoint was
given for; nothing is recomputed then. (Passing and failing checks on real samples: ``tests/test_real_engine.py``.)"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.vllm_engine.local_engine import ENGINE_PYTHON, SMOLLM2
from tests.real_engine import require_engine

pytestmark = pytest.mark.integration


def check(samples: Path, *checkpoints: str) -> subprocess.CompletedProcess:
    args = [
        str(ENGINE_PYTHON),
        "-m",
        "durable_rollouts.logprob_check",
        str(samples),
        *(f"--checkpoint={c}" for c in checkpoints),
    ]
    return subprocess.run(args, capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=300)


def sample(**overrides) -> str:
    fields = {
        "tokens": [1, 2, 3],
        "response_length": 2,
        "loss_mask": [1, 1],
        "rollout_log_probs": [-0.5, -0.5],
        "metadata": {},
    }
    return json.dumps({**fields, **overrides})


def test_a_sample_whose_fields_disagree_is_named_by_file_line_and_field(tmp_path):
    require_engine()
    samples = tmp_path / "samples.jsonl"
    samples.write_text(sample() + "\n" + sample(loss_mask=[1]) + "\n")
    run = check(samples, f"none={SMOLLM2}")
    assert (run.returncode, run.stdout) == (2, ""), run.stderr
    assert run.stderr.strip() == "logprob_check: samples.jsonl:2: loss_mask has 1 entries for a response of 2 tokens"


def test_a_version_without_a_checkpoint_is_named(tmp_path):
    require_engine()
    samples = tmp_path / "samples.jsonl"
    samples.write_text(sample(metadata={"weight_version_spans": [{"version": "7", "start": 0, "end": 2}]}) + "\n")
    run = check(samples, f"default={SMOLLM2}")
    assert (
        run.returncode == 2
        and "no checkpoint for weight version(s) 7: pass --checkpoint VERSION=DIR for each" in run.stderr
    ), run.stderr
