"""Claude Code settings: what each setting or flag does to the CLI's own CPU, per run and per turn.

The real Claude Code binary (the project's pinned version) runs headless on this host in a throw-away git repository,
against the real adapter and the scripted oracle: a **short** run is 2 turns, a **long** run ``--explore-turns`` + 2
(read-only Bash commands in between); the oracle's answers do not depend on the settings, so every variant does the
same work. Per variant, over ``--rounds`` rounds in a rotated order, it prints the short run's CPU (mostly start-up),
the CPU per turn ((long - short) / ``--explore-turns``) and the ``/generate`` calls per run.

**Baseline:** the shipped settings (``claude_code_argv`` / ``claude_code_env``), measured in the same rounds; each
variant adds one setting to them. Method and results: docs/benchmarks.md, "Claude Code settings". No thresholds.
From the repository root (about 6 minutes)::

    flock /tmp/bench.lock .venv/bin/python -m bench.claude_code_settings_bench [--rounds 4] [--explore-turns 20] [--json
    out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_rollouts.claude_code.binary import find_claude_binary
from durable_rollouts.claude_code.harness import ClaudeCodeSettings, claude_code_argv, claude_code_env
from durable_rollouts.contracts.session import PolicySpec, SamplingParams
from durable_rollouts.docker_sandbox.container_layout import CLAUDE_CONFIG
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.session_config import session_config_for
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.scripted_policy.completions import PROBLEM_STATEMENT_FILE
from durable_rollouts.scripted_policy.server import ScriptedPolicyServer

POLICY = PolicySpec(sampling=SamplingParams(temperature=1.0, max_new_tokens=2048), context_budget=65536)


@dataclass(frozen=True)
class Variant:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    api_key: bool = False  # pass the session token as ANTHROPIC_API_KEY (``--bare`` reads no other)


VARIANTS = (
    Variant("shipped"),
    Variant("DISABLE_TELEMETRY=1", {"DISABLE_TELEMETRY": "1"}),
    Variant("DISABLE_ERROR_REPORTING=1", {"DISABLE_ERROR_REPORTING": "1"}),
    Variant("DISABLE_NON_ESSENTIAL_MODEL_CALLS=1", {"DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1"}),
    Variant("hooks off (disableAllHooks)", args=("--settings", '{"disableAllHooks": true}')),
    Variant("--no-session-persistence", args=("--no-session-persistence",)),
    Variant("--bare", args=("--bare",), api_key=True),
)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def workdir(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    (repo / PROBLEM_STATEMENT_FILE).write_text("The function `area` returns the perimeter.\n")
    (repo / "shapes.py").write_text("def area(w, h):\n    return 2 * (w + h)\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base"], cwd=repo, check=True)
    return repo


async def one_run(
    adapter: AdapterServer, policy_url: str, variant: Variant, repo: Path, binary: str
) -> dict[str, float]:
    assert adapter.registry is not None
    label = f"cc-settings-{uuid.uuid4().hex[:8]}"
    ticket = adapter.registry.open_session(session_config_for(POLICY, policy_url, True, label), durable=False)
    settings = ClaudeCodeSettings(extra_args=list(variant.args), extra_env=variant.env)
    with tempfile.TemporaryDirectory(prefix="cc-home-") as home:
        Path(home, ".claude.json").write_text(json.dumps(CLAUDE_CONFIG))
        env = claude_code_env(f"http://127.0.0.1:{adapter.port}", ticket.secret, home, POLICY.context_budget, settings)
        if variant.api_key:
            env["ANTHROPIC_API_KEY"] = env.pop("ANTHROPIC_AUTH_TOKEN")
        before = _children_cpu_s()
        proc = await asyncio.create_subprocess_exec(
            *claude_code_argv(binary, settings),
            cwd=repo,
            env={"PATH": os.environ["PATH"], "CLAUDE_CODE_TMPDIR": home, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        output, _ = await proc.communicate()
        cpu_s = _children_cpu_s() - before
    merged = await adapter.registry.finish_session(ticket.session_id, grace_s=0)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant.name}: claude exited {proc.returncode}: {output.decode(errors='replace')[-800:]}")
    return {"cpu_s": cpu_s, "turns": float(len(merged.turns))}


async def main_async(args: argparse.Namespace) -> int:
    binary = str(await asyncio.to_thread(find_claude_binary))
    renderer = await asyncio.to_thread(PromptRenderer.from_folder, ensure_qwen_tokenizer())
    short_policy = ScriptedPolicyServer(renderer, "oracle")
    long_policy = ScriptedPolicyServer(renderer, "oracle", oracle_explore_turns=args.explore_turns)
    adapter = AdapterServer(renderer, spool=None)
    runs: dict[str, dict[str, list[dict[str, float]]]] = {v.name: {"short": [], "long": []} for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="cc-settings-bench-") as root:
        repo = workdir(Path(root))
        urls = {short_policy: await short_policy.start(), long_policy: await long_policy.start()}
        await adapter.start("127.0.0.1", 0)
        try:
            await one_run(adapter, urls[short_policy], VARIANTS[0], repo, binary)  # warm the page cache, unmeasured
            for round_index in range(args.rounds):
                shift = round_index % len(VARIANTS)
                for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                    for kind, policy in (("short", short_policy), ("long", long_policy)):
                        requests = len(policy.records)
                        run = await one_run(adapter, urls[policy], variant, repo, binary)
                        run["requests"] = float(len(policy.records) - requests)
                        runs[variant.name][kind].append(run)
                    short, long = runs[variant.name]["short"][-1], runs[variant.name]["long"][-1]
                    print(
                        f"round {round_index + 1} {variant.name:36s} short {short['cpu_s']:.2f} core-s "
                        f"({short['turns']:.0f} turns), "
                        f"long {long['cpu_s']:.2f} ({long['turns']:.0f} turns)",
                        flush=True,
                    )
        finally:
            await adapter.stop()
            for server in (short_policy, long_policy):
                await server.stop()
    report = summarize(runs, args.explore_turns)
    print_report(report)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": report, "runs": runs}, indent=1))
    return 0


def summarize(runs: dict[str, dict[str, list[dict[str, float]]]], explore_turns: int) -> dict[str, dict[str, Any]]:
    out = {}
    for name, kinds in runs.items():
        short = statistics.median(r["cpu_s"] for r in kinds["short"])
        long = statistics.median(r["cpu_s"] for r in kinds["long"])
        out[name] = {
            "per_run_s": short,
            "per_turn_s": (long - short) / explore_turns,
            "long_run_s": long,
            "requests_short": statistics.fmean(r["requests"] for r in kinds["short"]),
            "requests_long": statistics.fmean(r["requests"] for r in kinds["long"]),
        }
    return out


def print_report(report: dict[str, dict[str, Any]]) -> None:
    base = report["shipped"]
    print("\nmedians over the rounds; ratios against the shipped settings in the same run:\n")
    print(
        "| variant | short run core-s | vs shipped | per turn core-s | vs shipped | long run core-s | requests short / "
        "long |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in report.items():
        print(
            f"| {name} | {r['per_run_s']:.3f} | {r['per_run_s'] / base['per_run_s']:.2f}x | {r['per_turn_s']:.4f} | "
            f"{r['per_turn_s'] / base['per_turn_s']:.2f}x | {r['long_run_s']:.2f} | {r['requests_short']:.0f} / "
            f"{r['requests_long']:.0f} |"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="rounds; each runs every variant short and long")
    parser.add_argument("--explore-turns", type=int, default=20, help="extra read-only turns of a long run")
    parser.add_argument("--json", help="also write the summary and every run here")
    return parser.parse_args(argv)


def main() -> None:
    raise SystemExit(asyncio.run(main_async(parse_args())))


if __name__ == "__main__":
    main()
