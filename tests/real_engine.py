"""What the real-engine tests share: the engine (vLLM's CPU build serving SmolLM2-135M-Instruct), a recording
proxy before it, synchronising on the engine's own token counter, and the trainer's log-prob check.

The engine runs once per test module that uses it (≈5.5 GB, 25–50 s to start). A machine set up with
``SETUP_SKIP_ENGINE=1`` skips these tests, saying so; without that variable a missing engine is a failure, so CI
never skips them silently. The log-prob check runs as the trainer runs it: the command
``python -m durable_rollouts.logprob_check`` in the engine's venv (the project's venv has no torch), over the slime
samples ``slime_generate.sample_dicts`` makes of each result.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.logprob_check.report import LogprobReport
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.vllm_engine.local_engine import ENGINE_PYTHON, SMOLLM2, engine_missing
from slime_generate import sample_dicts
from tests.engine_proxy import RecordingProxy

GENERATED = re.compile(r"^vllm:generation_tokens_total\{[^}]*\} ([0-9.e+]+)$", re.MULTILINE)


def require_engine() -> None:
    missing = engine_missing()
    if missing is None:
        return
    if os.environ.get("SETUP_SKIP_ENGINE") == "1":
        pytest.skip(f"SETUP_SKIP_ENGINE=1: {missing}")
    pytest.fail(missing)


async def generated_tokens(http: aiohttp.ClientSession, engine_url: str) -> float:
    """The engine's count of tokens it has sampled (its Prometheus counter)."""
    async with http.get(f"{engine_url}/metrics") as response:
        match = GENERATED.search(await response.text())
    return float(match.group(1)) if match else 0.0


async def mid_reply(http: aiohttp.ClientSession, proxy: RecordingProxy, engine_url: str, tokens: int = 4) -> str:
    """Wait for a generate request in flight that has sampled at least ``tokens`` tokens; its request id."""
    while not proxy.in_flight:
        await asyncio.sleep(0.05)
    request_id = next(iter(proxy.in_flight))
    before = await generated_tokens(http, engine_url)
    while await generated_tokens(http, engine_url) < before + tokens:
        if request_id not in proxy.in_flight:
            return await mid_reply(http, proxy, engine_url, tokens)  # it ended first: wait for the next one
        await asyncio.sleep(0.05)
    return request_id


def perturbed_checkpoint(folder: Path, scale: float = 1.3) -> Path:
    """SmolLM2 with its final norm scaled: the logits change (log-probs move by 0.1–1) while every layer's keys and
    values stay as they were, so a request frozen across the update samples on a cache the new weights would have
    made too, and its tokens after the update are exactly what the new checkpoint gives."""
    shutil.copytree(SMOLLM2, folder, dirs_exist_ok=True)
    weights = load_file(str(SMOLLM2 / "model.safetensors"))
    weights["model.norm.weight"] = weights["model.norm.weight"] * np.float32(scale)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def write_samples(results: list[RolloutResult], path: Path) -> Path:
    """The slime samples of ``results``, one JSON object per line, as a trainer would dump them."""
    with path.open("w") as out:
        for result in results:
            for sample in sample_dicts(result):
                out.write(json.dumps(sample, default=str) + "\n")
    return path


def logprob_check(samples: Path, checkpoints: Mapping[str, Path]) -> tuple[int, str, dict]:
    """Run the trainer's log-prob check command once; (exit code, its report as the command prints it, as JSON)."""
    args = [str(ENGINE_PYTHON), "-m", "durable_rollouts.logprob_check", str(samples), "--json"]
    for version, folder in checkpoints.items():
        args += ["--checkpoint", f"{version}={folder}"]
    run = subprocess.run(args, capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=600)
    if not run.stdout.strip():
        return run.returncode, run.stderr, {}
    report = LogprobReport.model_validate_json(run.stdout)
    return run.returncode, "\n".join(report.lines()), report.model_dump()
