"""A rollout result as a worker returns it, built from random tokens: what the payload benches carry and pack.

Deterministic: the same arguments give the same bytes. The shape is a long agent run's: 10 % prompt and 90 %
sampled tokens (random ids in Qwen's vocabulary, log-probs drawn like a sampler's), one weight version, 60 turns.
"""

from __future__ import annotations

import random

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.tokens import SegmentSummary, TokenSegment
from durable_rollouts.contracts.weight_versions import WeightVersionSpan
from durable_rollouts.policy.trajectory_packing import pack_trajectory

VOCAB = 151_936


def trajectory_segment(tokens: int, seed: int) -> TokenSegment:
    """One ``tokens``-token segment: the first tenth prompt (masked out), the rest sampled under weight version 17."""
    rng = random.Random(seed)
    prompt = tokens // 10
    return TokenSegment(
        kind="main",
        tokens=[rng.randrange(VOCAB) for _ in range(tokens)],
        loss_mask=[0] * prompt + [1] * (tokens - prompt),
        rollout_log_probs=[0.0] * prompt + [-rng.expovariate(2.0) for _ in range(tokens - prompt)],
        prompt_length=prompt,
        turns=60,
        finish_reason="stop",
        weight_version_spans=[WeightVersionSpan(start=prompt, end=tokens, version="17")],
    )


def rollout_result(segment: TokenSegment, log_kib: int, seed: int) -> RolloutResult:
    """A completed, solved rollout carrying ``segment`` packed and about ``log_kib`` KiB of stream-json agent log;
    ``seed`` makes the log (and so the payload) differ between results."""
    log = "".join(
        f'{{"type":"assistant","n":{seed},"i":{i},"text":"{"x" * 90}"}}\n' for i in range(log_kib * 1024 // 110)
    )
    agent = AgentRun(session_id=f"s{seed}", exit_code=0, reason="completed", is_error=False, turns=60, log=log)
    return RolloutResult(
        workflow_id=f"rollout-bench-{seed}",
        instance_id="bench",
        sample_index=0,
        group_index=0,
        status="completed",
        reward=1.0,
        agent=agent,
        trajectory=pack_trajectory([segment]),
        segments=[SegmentSummary.of(segment)],
    )
