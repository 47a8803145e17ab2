"""Samples made on the real engine, through slime's own code: ``slime_generate.generate`` as slime calls it (its
``Sample`` class, the router address in slime's args, ``ROLLOUT_POLICY_ENGINE=vllm`` in the trainer's environment)
runs the example tasks with Claude Code driven by SmolLM2 on vLLM; slime's ``_convert_samples_to_train_data`` takes
the samples, and the trainer's log-prob check (in this venv, which has torch) holds for every trained token."""

from __future__ import annotations

import asyncio
import itertools
import json

from tests.against_slime import require_slime

require_slime()

from slime.utils.types import Sample  # noqa: E402

import slime_generate  # noqa: E402
from durable_rollouts.config.settings import RolloutBudgets  # noqa: E402
from durable_rollouts.docker_sandbox.image_settings import ImageSettings  # noqa: E402
from durable_rollouts.logprob_check.recompute import check_log_probs  # noqa: E402
from durable_rollouts.logprob_check.sequences import TrainedSequence  # noqa: E402
from durable_rollouts.paths import EXAMPLE_DATASET  # noqa: E402
from durable_rollouts.task_sources.dataset_rows import task_from_row  # noqa: E402
from durable_rollouts.vllm_engine.local_engine import MAX_MODEL_LEN, SMOLLM2, LocalEngine  # noqa: E402
from tests.against_slime.slime_code import args_for, slime_conversion  # noqa: E402
from tests.local_cluster import local_cluster  # noqa: E402
from tests.real_engine import require_engine  # noqa: E402

BUDGETS = RolloutBudgets(agent_budget_s=420, eval_timeout_s=120, guard_s=900)


async def samples_on_the_real_engine(tmp_path, monkeypatch) -> list[Sample]:
    engine = LocalEngine(log_path=tmp_path / "vllm.log")
    await engine.start()
    try:
        async with local_cluster(
            None, tmp_path / "results", BUDGETS, tokenizer_dir=SMOLLM2, images=ImageSettings(pull_policy="never")
        ) as (
            env,
            settings,
        ):
            monkeypatch.setenv("TEMPORAL_ADDRESS", settings.temporal_address)
            monkeypatch.setenv("ROLLOUT_TASK_QUEUE", settings.task_queue)
            monkeypatch.setenv("ROLLOUT_POLICY_ENGINE", "vllm")
            args = args_for(
                sglang_router_ip="127.0.0.1",
                sglang_router_port=engine.port,
                rollout_max_context_len=MAX_MODEL_LEN,
                hf_checkpoint=str(SMOLLM2),
            )
            # This venv has no swebench package (the worker extra only), so the SWE-bench row is not gradable here.
            rows = [
                row
                for row in map(json.loads, EXAMPLE_DATASET.read_text().splitlines())
                if task_from_row(row).grader != "swebench"
            ]
            params = {"temperature": 1.0, "max_new_tokens": 48}
            made = await asyncio.gather(
                *(
                    slime_generate.generate(
                        args,
                        Sample(index=i, group_index=i, prompt=row["prompt"], metadata=dict(row["metadata"])),
                        params,
                    )
                    for i, row in enumerate(rows)
                )
            )
            slime_generate._clients.clear()  # the client belongs to this event loop
            return list(itertools.chain.from_iterable(made))
    finally:
        await engine.stop()


def test_slimes_conversion_and_the_log_prob_check_take_samples_made_on_the_real_engine(tmp_path, monkeypatch):
    require_engine()
    monkeypatch.setenv("ROLLOUT_SLIME_SAMPLE_CONTRACT", "auto")
    samples = asyncio.run(samples_on_the_real_engine(tmp_path, monkeypatch))
    assert samples and all(isinstance(s, Sample) and not s.remove_sample for s in samples), [
        s.metadata for s in samples
    ]
    data = slime_conversion(args_for(rollout_max_context_len=MAX_MODEL_LEN))._convert_samples_to_train_data(samples)
    assert [sum(mask) for mask in data["loss_masks"]] == [sum(s.loss_mask) for s in samples] and data["tokens"] == [
        s.tokens for s in samples
    ]
    # The check reads what slime hands its trainer: the converted tokens, masks and log-probs; versions from metadata.
    trained = [
        {
            "tokens": tokens,
            "response_length": length,
            "loss_mask": mask,
            "rollout_log_probs": log_probs,
            "metadata": sample.metadata,
        }
        for tokens, length, mask, log_probs, sample in zip(
            data["tokens"],
            data["response_lengths"],
            data["loss_masks"],
            data["rollout_log_probs"],
            samples,
            strict=True,
        )
    ]
    report = check_log_probs(
        [TrainedSequence.from_slime(fields, f"sample {i}") for i, fields in enumerate(trained)], {"default": SMOLLM2}
    )
    print("\n".join(report.lines()))
    assert report.passed and report.tokens == sum(sum(mask) for mask in data["loss_masks"]), report.lines()
