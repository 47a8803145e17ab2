"""What the adapter adds to a turn on a real engine: latency and CPU, against calling vLLM directly, in one run.

A real vLLM (the CPU build, SmolLM2-135M-Instruct, ``durable_rollouts.vllm_engine.local_engine``) serves both arms:
**direct**, the baseline (``VLLMClient.generate`` with the token ids the adapter sends for the same conversation:
the engine's own time plus one HTTP call), and **adapter** (``POST /v1/messages`` to an ``AdapterServer`` in this
process, a fresh session per turn). Both ask for ``--reply-tokens`` tokens greedily from the same cached prompt, so
the engine does the same work in each; turns alternate between the arms. Per context (a short conversation and one of
``--long`` tokens) it prints the median wall time per turn of each arm, the adapter's added milliseconds, the ratio
adapter / direct, and this process's CPU per turn in each arm. Method and results: docs/benchmarks.md, "The adapter
on a real engine". Run from the repository root after ``make setup``::

    .venv/bin/python -m bench.vllm_adapter_bench [--turns 12] [--long 4000] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from durable_rollouts.contracts.session import SamplingParams, SessionConfig
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.vllm_client import VLLMClient
from durable_rollouts.vllm_engine.local_engine import SMOLLM2, LocalEngine, engine_missing

SHORT_TEXT = "Say hello in one short sentence."
FILLER = "The quick brown fox jumps over the lazy dog while the river keeps running past the old mill. "


def conversation(tokens: int, renderer: PromptRenderer) -> str:
    """A user message whose rendered prompt is at least ``tokens`` tokens long (the short one when 0)."""
    text = SHORT_TEXT
    while len(renderer.encode(renderer.render([{"role": "user", "content": text}], None, True))) < tokens:
        text = FILLER * 16 + text
    return text


async def direct_turn(
    client: VLLMClient, url: str, ids: list[int], reply_tokens: int, end_of_turn: int
) -> tuple[float, float, int]:
    """The engine call the adapter makes for this turn (the same sampling parameters), timed."""
    params = {
        "max_new_tokens": reply_tokens,
        "temperature": 0.0,
        "stop_token_ids": [end_of_turn],
        "skip_special_tokens": False,
        "no_stop_trim": True,
    }
    wall, cpu = time.perf_counter(), time.process_time()
    generation = await client.generate(url, ids, params, f"direct-{time.monotonic_ns()}", "bench")
    return time.perf_counter() - wall, time.process_time() - cpu, len(generation.output_ids)


async def adapter_turn(
    http: aiohttp.ClientSession, adapter: AdapterServer, config: SessionConfig, text: str
) -> tuple[float, float, int]:
    assert adapter.registry is not None
    ticket = adapter.registry.open_session(config, durable=False)
    body = {
        "model": "slime-actor",
        "max_tokens": config.sampling.max_new_tokens,
        "messages": [{"role": "user", "content": text}],
    }
    headers = {"Authorization": f"Bearer {ticket.secret}", "anthropic-version": "2023-06-01"}
    wall, cpu = time.perf_counter(), time.process_time()
    async with http.post(f"{adapter.url}/v1/messages", json=body, headers=headers) as response:
        reply = await response.json()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert response.status == 200, reply
    await adapter.registry.finish_session(ticket.session_id, grace_s=0)
    return wall, cpu, reply["usage"]["output_tokens"]


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    renderer = PromptRenderer.from_folder(SMOLLM2)
    engine = LocalEngine()
    url = await engine.start()
    adapter = AdapterServer(renderer)
    await adapter.start()
    # Greedy: both arms sample the same reply, so the engine's work is the same in each.
    sampling = SamplingParams(temperature=0.0, max_new_tokens=args.reply_tokens)
    config = SessionConfig(policy_url=url, engine="vllm", sampling=sampling, context_budget=8192)
    results: dict[str, Any] = {}
    try:
        async with aiohttp.ClientSession() as http:
            client = VLLMClient(http, renderer.vocab_size)
            for name, size in (("short", 0), ("long", args.long)):
                text = conversation(size, renderer)
                ids = renderer.encode(renderer.render([{"role": "user", "content": text}], None, True))
                eot = renderer.end_of_turn_id
                await direct_turn(client, url, ids, args.reply_tokens, eot)  # warm the prefix cache (the long prefill)
                await adapter_turn(http, adapter, config, text)
                direct, through = [], []
                for _ in range(args.turns):
                    direct.append(await direct_turn(client, url, ids, args.reply_tokens, eot))
                    through.append(await adapter_turn(http, adapter, config, text))
                assert {n for *_, n in direct} == {n for *_, n in through}, "both arms sampled the same reply length"
                results[name] = summary(len(ids), direct[0][2], direct, through)
    finally:
        await adapter.stop()
        await engine.stop()
    return results


def summary(
    prompt_tokens: int,
    reply_tokens: int,
    direct: list[tuple[float, float, int]],
    through: list[tuple[float, float, int]],
) -> dict[str, float]:
    wall_d, wall_a = statistics.median(w for w, _, _ in direct), statistics.median(w for w, _, _ in through)
    cpu_d, cpu_a = statistics.median(c for _, c, _ in direct), statistics.median(c for _, c, _ in through)
    return {
        "prompt_tokens": prompt_tokens,
        "reply_tokens": reply_tokens,
        "direct_wall_ms": wall_d * 1000,
        "adapter_wall_ms": wall_a * 1000,
        "added_ms": (wall_a - wall_d) * 1000,
        "wall_ratio": wall_a / wall_d,
        "direct_cpu_ms": cpu_d * 1000,
        "adapter_cpu_ms": cpu_a * 1000,
        "cpu_ratio": cpu_a / cpu_d if cpu_d else float("inf"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--long", type=int, default=4000)
    parser.add_argument("--reply-tokens", type=int, default=16)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if (missing := engine_missing()) is not None:
        print(f"vllm_adapter_bench: {missing}", file=sys.stderr)
        return 2
    results = asyncio.run(measure(args))
    for name, r in results.items():
        print(
            f"{name:5} ({r['prompt_tokens']:>4} prompt tokens, {r['reply_tokens']} reply tokens): wall direct "
            f"{r['direct_wall_ms']:.0f} ms, "
            f"adapter {r['adapter_wall_ms']:.0f} ms, added {r['added_ms']:.0f} ms, ratio {r['wall_ratio']:.3f}; "
            f"CPU here direct {r['direct_cpu_ms']:.1f} ms, adapter {r['adapter_cpu_ms']:.1f} ms, ratio "
            f"{r['cpu_ratio']:.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
