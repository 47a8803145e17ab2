"""Weight-update benchmark: continuing an aborted generation versus failing the turn, in one run.

A weight update in SGLang's ``abort`` mode ends every running generation with the tokens sampled so far. Real
``PolicySession`` turns run over HTTP against the project's scripted SGLang stand-in in this process; in an update
round a driver pauses generation (``abort``) part-way through the answers, bumps the weight version, holds the pause
``--hold`` seconds and continues. Two variants, alternating, with rounds without an update as each one's reference:

* ``continuation`` (shipped, ``continue_after_abort=True``): the session resubmits the cut generation with the
  tokens it already has and joins the pieces (``durable_rollouts.policy.continuation``);
* ``baseline`` (the old behaviour): the abort fails the turn, and the client waits ``--retry-delay`` seconds (Claude
  Code's first backoff step on a 529) and sends the whole turn again.

Per variant it prints the wasted tokens per update and the added wall time per turn per update, and the ratio
baseline / continuation of both. Method and results: docs/benchmarks.md, "Weight updates". No thresholds. Run from
the repository root::

    .venv/bin/python -m bench.weight_update_bench [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from durable_rollouts.contracts.session import SamplingParams, SessionConfig
from durable_rollouts.policy.fair_executor import FairExecutor
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.session import PolicySession, assistant_reply
from durable_rollouts.policy.sglang_client import PolicyServerError, SGLangClient
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.scripted_policy.completions import final_answer
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer

VARIANTS = ("continuation", "baseline")
SYSTEM = {"role": "system", "content": "You are a careful coding assistant."}
USER = {"role": "user", "content": "Explain how you would fix the failing test, step by step."}


class PacedServer(ScriptedPolicyServer):
    """The scripted server with every policy answering ``text``, one token per ``token_s`` (bench-only)."""

    def __init__(self, renderer: PromptRenderer, text: str, token_s: float):
        super().__init__(renderer, default_policy="noop", delay_s=0.0, token_delay_s=token_s)
        self._completions["noop"] = lambda prompt, max_new_tokens: text


class Bench:
    def __init__(
        self,
        args: argparse.Namespace,
        renderer: PromptRenderer,
        server: PacedServer,
        http: aiohttp.ClientSession,
        cpu: FairExecutor,
    ):
        self.args, self.renderer, self.server, self.http, self.cpu = args, renderer, server, http, cpu
        self.client = SGLangClient(http, vocab_size=renderer.vocab_size)
        self.version = 0
        self.answer_tokens = 0

    def config(self, variant: str) -> SessionConfig:
        return SessionConfig(
            policy_url=self.server.url,
            sampling=SamplingParams(max_new_tokens=self.args.tokens * 2),
            continue_after_abort=variant == "continuation",
        )

    async def turn(self, session: PolicySession) -> tuple[float, int, int]:
        """One turn as the client sees it: (seconds, completion tokens, re-sends); a baseline turn re-sends on a
        retryable error."""
        started, resends = time.monotonic(), 0
        while True:
            try:
                outcome = await session.run_turn("main", "main", [SYSTEM, USER], [], None, assistant_reply)
                return time.monotonic() - started, outcome.output_tokens, resends
            except PolicyServerError:
                resends += 1
                await asyncio.sleep(self.args.retry_delay)

    async def update_when(self, fraction: float, session_ids: list[str]) -> None:
        """Once every session's running generation has sampled ``fraction`` of the answer: pause (abort), update, hold,
        continue."""
        need = max(1, round(fraction * self.answer_tokens))

        def ready() -> bool:
            live = [g for g in self.server.control.live if any(g.rid.startswith(f"{sid}-") for sid in session_ids)]
            return len(live) == len(session_ids) and all(len(g.output_ids) >= need for g in live)

        while not ready():
            await asyncio.sleep(0.001)
        url = self.server.url
        self.version += 1
        for path, body in (
            ("/pause_generation", {"mode": "abort"}),
            ("/update_weight_version", {"new_version": str(self.version), "abort_all_requests": False}),
        ):
            async with self.http.post(url + path, json=body) as response:
                assert response.status == 200, await response.text()
        await asyncio.sleep(self.args.hold)
        async with self.http.post(url + "/continue_generation", json={}) as response:
            assert response.status == 200, await response.text()

    async def round(self, variant: str, fraction: float | None) -> dict[str, Any]:
        sessions = [
            PolicySession(
                f"{variant[:4]}-{uuid.uuid4().hex[:8]}", self.config(variant), self.renderer, self.client, self.cpu
            )
            for _ in range(self.args.sessions)
        ]
        turns = asyncio.gather(*(self.turn(s) for s in sessions))
        if fraction is not None:
            await self.update_when(fraction, [s.session_id for s in sessions])
        outcomes = await turns
        ids = {s.session_id for s in sessions}
        sampled = sum(len(r.output_ids) for r in self.server.records if r.routing_key in ids)
        kept = sum(tokens for _, tokens, _ in outcomes)
        if self.answer_tokens:
            assert all(tokens == self.answer_tokens for _, tokens, _ in outcomes), (
                variant,
                outcomes,
                self.answer_tokens,
            )
        return {
            "variant": variant,
            "fraction": fraction,
            "turn_s": [seconds for seconds, _, _ in outcomes],
            "kept": kept,
            "wasted": sampled - kept,
            "resends": sum(resends for _, _, resends in outcomes),
            "aborts_continued": sum(t.aborts_continued for s in sessions for t in s.turns),
        }


def summarise(rounds: list[dict[str, Any]], variant: str) -> dict[str, Any]:
    plain = [s for r in rounds if r["variant"] == variant and r["fraction"] is None for s in r["turn_s"]]
    updated = [r for r in rounds if r["variant"] == variant and r["fraction"] is not None]
    updated_s = [s for r in updated for s in r["turn_s"]]
    return {
        "updates": len(updated),
        "turns_per_update": len(updated[0]["turn_s"]) if updated else 0,
        "wasted_per_update": sum(r["wasted"] for r in updated) / len(updated),
        "wasted_without_update": sum(r["wasted"] for r in rounds if r["variant"] == variant and r["fraction"] is None),
        "turn_s_plain": statistics.mean(plain),
        "turn_s_updated": statistics.mean(updated_s),
        "added_s_per_turn_per_update": statistics.mean(updated_s) - statistics.mean(plain),
        "resends_per_update": sum(r["resends"] for r in updated) / len(updated),
        "aborts_continued_per_update": sum(r["aborts_continued"] for r in updated) / len(updated),
    }


def ratio(a: float, b: float) -> str:
    if b <= 0:
        return "inf" if a > 0 else "n/a"
    return f"{a / b:.1f}x"


def report(args: argparse.Namespace, answer_tokens: int, summary: dict[str, dict[str, Any]]) -> None:
    print(
        f"\n{args.sessions} sessions per round, answer {answer_tokens} tokens at {args.token_ms:g} ms/token, "
        f"abort-mode update at {','.join(f'{f:g}' for f in args.at)} of the answer, held {args.hold:g} s, "
        f"client re-send after {args.retry_delay:g} s, {args.rounds} update rounds + {args.rounds} plain rounds per "
        f"variant\n"
    )
    header = (
        "| variant | wasted tokens / update | added s / turn / update | turn s (no update) | turn s (update) | "
        "re-sends / update | aborts continued / update |"
    )
    print(header)
    print("|" + "---|" * header.count(" | ") + "---|")
    for variant in VARIANTS:
        s = summary[variant]
        print(
            f"| {variant} | {s['wasted_per_update']:.1f} | {s['added_s_per_turn_per_update']:.3f} | "
            f"{s['turn_s_plain']:.3f} | "
            f"{s['turn_s_updated']:.3f} | {s['resends_per_update']:.1f} | {s['aborts_continued_per_update']:.1f} |"
        )
    base, cont = summary["baseline"], summary["continuation"]
    print(
        f"| baseline / continuation | {ratio(base['wasted_per_update'], cont['wasted_per_update'])} | "
        f"{ratio(base['added_s_per_turn_per_update'], cont['added_s_per_turn_per_update'])} | | | | |"
    )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    renderer = await asyncio.to_thread(PromptRenderer.from_folder, args.tokenizer or ensure_qwen_tokenizer())
    words = " ".join(
        f"Step {i}: check the failing assertion and the value it compares." for i in range(args.tokens // 12 + 1)
    )
    text = final_answer("I should explain the fix.", words)
    server = PacedServer(renderer, text, args.token_ms / 1000)
    server.url = await server.start()
    cpu = FairExecutor(1)
    rounds: list[dict[str, Any]] = []
    try:
        async with aiohttp.ClientSession() as http:
            bench = Bench(args, renderer, server, http, cpu)
            warm = await bench.round("continuation", None)
            bench.answer_tokens = warm["kept"] // args.sessions
            for i in range(args.rounds):
                fraction = args.at[i % len(args.at)]
                for variant in VARIANTS if i % 2 == 0 else VARIANTS[::-1]:
                    rounds.append(await bench.round(variant, None))
                    rounds.append(await bench.round(variant, fraction))
                print(f"round {i + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        cpu.shutdown()
        await server.stop()
    summary = {variant: summarise(rounds, variant) for variant in VARIANTS}
    report(args, bench.answer_tokens, summary)
    return {
        "args": {k: str(v) for k, v in vars(args).items()},
        "answer_tokens": bench.answer_tokens,
        "summary": summary,
        "rounds": rounds,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=400, help="about how long the answer is, in tokens (default 400)")
    parser.add_argument("--token-ms", type=float, default=5.0, help="sampling time per token (default 5 ms)")
    parser.add_argument(
        "--sessions",
        type=int,
        default=2,
        help="sessions per round, each running one turn; an update hits all (default 2)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=6,
        help="update rounds per variant, each with one plain round beside it (default 6)",
    )
    parser.add_argument(
        "--at",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[0.25, 0.5, 0.75],
        help="where updates land, as fractions of the answer",
    )
    parser.add_argument(
        "--hold", type=float, default=0.5, help="seconds the pause is held (the weight load; default 0.5)"
    )
    parser.add_argument(
        "--retry-delay",
        type=float,
        default=0.6,
        help="baseline client's wait before re-sending (Claude Code's first backoff ~0.6 s)",
    )
    parser.add_argument("--tokenizer", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write raw results here")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    results = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
