"""Fairness benchmark: a victim session's latency while another session floods the adapter.

Three processes on 127.0.0.1: the project's scripted policy server (``noop``), one fresh adapter process per variant
(``AdapterServer`` plus a control app, so its peak RSS belongs to that variant) and the clients in this process: a
*flooder* session running concurrent loops of large ``count_tokens`` and ``/v1/messages`` calls, each loop on its own
lane, and a *victim* session sending one small ``/v1/messages`` turn at a time, first alone, then under the flood.

Baseline: the victim's latency alone, in the same adapter process just before the flood; it prints the ratio of the
medians (flood / alone), the flooder's outcomes and the adapter's peak RSS. Variants: ``fair`` (as shipped),
``fair-1`` (a one-thread CPU pool) and ``unfair`` (the shared FIFO pool from before the fairness work, rebuilt in
the bench). Method and results: docs/benchmarks.md, "Fairness under a flood". No pass/fail thresholds. Run from the
repository root::

    .venv/bin/python -m bench.fairness_bench [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from bench.harness.child_roles import (
    READY_TIMEOUT_S,
    BenchError,
    announce_ready,
    read_ready,
    start_role,
    stop_process,
    until_told_to_stop,
)
from bench.harness.stats import percentile
from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.trainer_client.local_services import free_port

VARIANTS = ("fair", "fair-1", "unfair")


# --------------------------------------------------------------------------------------------
# adapter process
# --------------------------------------------------------------------------------------------


class FifoCPU:
    """The old CPU pool: one plain thread pool, first come first served, whoever asks."""

    def __init__(self, threads: int):
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fifo-cpu")

    async def run(self, key, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)


class NoIntake:
    """No per-session intake: every admitted request reads and parses its body at once."""

    async def acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


async def adapter_main(args: argparse.Namespace) -> None:
    from durable_rollouts.contracts.session import SamplingParams, SessionConfig
    from durable_rollouts.policy.adapter_server import MAX_BODY_BYTES, AdapterServer
    from durable_rollouts.policy.prompt_renderer import PromptRenderer

    renderer = PromptRenderer.from_folder(args.tokenizer)
    unfair = args.variant == "unfair"
    options: dict[str, Any] = {}
    if args.variant == "fair-1":
        options["cpu_threads"] = 1
    if unfair:
        options["count_tokens_max_body_bytes"] = MAX_BODY_BYTES
    server = AdapterServer(renderer, **options)
    url = await server.start()
    registry = server.registry
    if unfair:
        # Bench-only surgery: the shipped registry and sessions with the old, shared FIFO pool.
        registry.executor = FifoCPU(max(1, (os.cpu_count() or 2) - 1))

    async def open_session(request: web.Request) -> web.Response:
        body = await request.json()
        cap = (
            10**6
            if unfair and body["role"] == "flooder"
            else SessionConfig.model_fields["max_concurrent_requests"].default
        )
        config = SessionConfig(
            policy_url=body["policy_url"],
            sampling=SamplingParams(max_new_tokens=64),
            max_turns=10**6,
            max_concurrent_requests=cap,
        )
        ticket = registry.open_session(config, durable=False)
        if unfair:
            registry.get(ticket.session_id).intake = NoIntake()
        return web.json_response({"id": ticket.session_id, "secret": ticket.secret})

    control = web.Application()
    control.router.add_post("/open", open_session)
    runner = web.AppRunner(control, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    announce_ready(url, f"http://127.0.0.1:{runner.addresses[0][1]}")
    try:
        await until_told_to_stop()
    finally:
        await runner.cleanup()
        await server.stop()


# --------------------------------------------------------------------------------------------
# clients
# --------------------------------------------------------------------------------------------


def flood_text() -> str:
    return "".join(p.read_text() for p in sorted((PROJECT_ROOT / "activities").glob("*.py")))


def body_of(size: int, text: str) -> bytes:
    content = (text * (size // len(text) + 1))[:size]
    return json.dumps({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": content}]}).encode()


VICTIM_BODY = json.dumps({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}).encode()


async def victim_turns(http: aiohttp.ClientSession, url: str, secret: str, count: int, budget_s: float) -> list[float]:
    latencies: list[float] = []
    deadline = time.perf_counter() + budget_s
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    while len(latencies) < count and (not latencies or time.perf_counter() < deadline):
        started = time.perf_counter()
        async with http.post(f"{url}/v1/messages", data=VICTIM_BODY, headers=headers) as r:
            reply = await r.json()
            if r.status != 200:
                raise BenchError(f"victim turn answered {r.status}: {reply}")
        latencies.append(time.perf_counter() - started)
    return latencies


async def flood_loop(
    http: aiohttp.ClientSession,
    url: str,
    path: str,
    secret: str,
    body: bytes,
    lane: str | None,
    retry_after_s: float,
    outcomes: dict[str, int],
) -> None:
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    if lane:
        headers["x-claude-code-agent-id"] = lane
    while True:
        async with http.post(f"{url}{path}", data=body, headers=headers) as r:
            await r.read()
            key = f"{path.rsplit('/', 1)[-1]} {r.status}"
            outcomes[key] = outcomes.get(key, 0) + 1
            if r.status == 429:
                await asyncio.sleep(retry_after_s)


def peak_rss_mb(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def latency_stats(latencies: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in latencies]
    return {"n": len(ms), "median_ms": percentile(ms, 50), "p90_ms": percentile(ms, 90), "max_ms": max(ms)}


async def run_variant(
    args: argparse.Namespace, adapter_url: str, control_url: str, policy_url: str, pid: int
) -> dict[str, Any]:
    text = flood_text()
    count_body, messages_body = body_of(args.count_tokens_bytes, text), body_of(args.messages_bytes, text)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as http:

        async def open_session(role: str) -> dict[str, str]:
            async with http.post(f"{control_url}/open", json={"policy_url": policy_url, "role": role}) as r:
                return await r.json()

        victim, flooder = await open_session("victim"), await open_session("flooder")
        await victim_turns(http, adapter_url, victim["secret"], 3, 60)
        alone = await victim_turns(http, adapter_url, victim["secret"], args.victim_requests, args.victim_budget)
        rss_before = peak_rss_mb(pid)
        outcomes: dict[str, int] = {}
        loops = [
            flood_loop(
                http,
                adapter_url,
                "/v1/messages/count_tokens",
                flooder["secret"],
                count_body,
                None,
                args.retry_after,
                outcomes,
            )
            for _ in range(args.count_tokens_flood)
        ] + [
            flood_loop(
                http,
                adapter_url,
                "/v1/messages",
                flooder["secret"],
                messages_body,
                f"flood{i}",
                args.retry_after,
                outcomes,
            )
            for i in range(args.messages_flood)
        ]
        flood = [asyncio.ensure_future(loop) for loop in loops]
        try:
            await asyncio.sleep(args.flood_warmup)
            under_flood = await victim_turns(
                http, adapter_url, victim["secret"], args.victim_requests, args.victim_budget
            )
            for task in flood:
                if task.done():
                    task.result()
        finally:
            for task in flood:
                task.cancel()
            await asyncio.gather(*flood, return_exceptions=True)
        rss_after = peak_rss_mb(pid)
    return {
        "alone": latency_stats(alone),
        "flood": latency_stats(under_flood),
        "ratio": percentile(under_flood, 50) / percentile(alone, 50),
        "flooder": dict(sorted(outcomes.items())),
        "peak_rss_mb_before": rss_before["VmHWM"],
        "peak_rss_mb_after": rss_after["VmHWM"],
    }


def report(args: argparse.Namespace, results: dict[str, Any]) -> None:
    print()
    print(
        f"flood: {args.count_tokens_flood} x count_tokens {args.count_tokens_bytes / 2**20:.1f} MiB + "
        f"{args.messages_flood} x messages {args.messages_bytes / 2**20:.1f} MiB, one session, retry after 429: "
        f"{args.retry_after} s"
    )
    print(
        "| variant | victim alone median (p90) | under flood median (p90, max) | ratio | flooder outcomes | adapter "
        "peak RSS before -> after |"
    )
    print("|---|---|---|---|---|---|")
    for variant, r in results.items():
        a, f = r["alone"], r["flood"]
        outcomes = ", ".join(f"{k}: {v}" for k, v in r["flooder"].items())
        print(
            f"| {variant} | {a['median_ms']:.1f} ms ({a['p90_ms']:.1f}) | {f['median_ms']:.1f} ms ({f['p90_ms']:.1f}, "
            f"{f['max_ms']:.0f}; n={f['n']}) "
            f"| **{r['ratio']:.1f}x** | {outcomes} | {r['peak_rss_mb_before']:.0f} -> {r['peak_rss_mb_after']:.0f} MB |"
        )


# --------------------------------------------------------------------------------------------
# orchestration
# --------------------------------------------------------------------------------------------


async def wait_for_policy(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BenchError(f"policy server exited with {proc.returncode}")
            try:
                async with http.get(f"{url}/health") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise BenchError("policy server did not start")


def orchestrate(args: argparse.Namespace) -> int:
    from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer

    args.tokenizer = args.tokenizer or ensure_qwen_tokenizer()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    port = free_port()
    policy_url = f"http://127.0.0.1:{port}"
    policy = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable_rollouts.scripted_policy.server",
            "--policy",
            "noop",
            "--port",
            str(port),
            "--tokenizer",
            str(args.tokenizer),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        cwd=PROJECT_ROOT,
        start_new_session=True,
    )
    results: dict[str, Any] = {}
    try:
        asyncio.run(wait_for_policy(policy_url, policy))
        for variant in args.variants:
            adapter = start_role(
                "bench.fairness_bench", ["--role", "adapter", "--variant", variant, "--tokenizer", str(args.tokenizer)]
            )
            try:
                adapter_url, control_url = read_ready(adapter, "adapter")
                print(f"{variant}: adapter {adapter_url} (pid {adapter.pid})", flush=True)
                results[variant] = asyncio.run(run_variant(args, adapter_url, control_url, policy_url, adapter.pid))
            finally:
                stop_process(adapter)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BenchError as exc:
        print(f"bench failed: {exc}", file=sys.stderr)
        return 1
    finally:
        stop_process(policy)
    report(args, results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        print(f"raw results: {args.json}")
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["orchestrate", "adapter"], default="orchestrate", help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=VARIANTS, default="fair", help=argparse.SUPPRESS)
    parser.add_argument(
        "--variants",
        type=lambda s: s.split(","),
        default=list(VARIANTS),
        help="comma list of fair,fair-1,unfair (default: all)",
    )
    parser.add_argument(
        "--count-tokens-flood", type=int, default=16, help="concurrent count_tokens loops of the flooder (default 16)"
    )
    parser.add_argument(
        "--count-tokens-bytes",
        type=int,
        default=int(1.9 * 2**20),
        help="count_tokens body size (default 1.9 MiB, under its 2 MiB cap)",
    )
    parser.add_argument(
        "--messages-flood",
        type=int,
        default=8,
        help="concurrent /v1/messages loops of the flooder, one lane each (default 8)",
    )
    parser.add_argument("--messages-bytes", type=int, default=4 * 2**20, help="/v1/messages body size (default 4 MiB)")
    parser.add_argument(
        "--retry-after", type=float, default=0.5, help="seconds a flood loop waits after a 429 (default 0.5)"
    )
    parser.add_argument(
        "--flood-warmup", type=float, default=3.0, help="seconds of flood before the victim measures (default 3)"
    )
    parser.add_argument("--victim-requests", type=int, default=20, help="victim turns per measurement (default 20)")
    parser.add_argument(
        "--victim-budget",
        type=float,
        default=90.0,
        help="stop a measurement after this many seconds (default 90; at least one turn)",
    )
    parser.add_argument("--tokenizer", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write raw results here")
    args = parser.parse_args(argv)
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; choose from {','.join(VARIANTS)}")
    return args


def main() -> int:
    args = parse_args()
    if args.role == "adapter":
        asyncio.run(adapter_main(args))
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
