"""Trajectory pages: how big a long rollout's page is and how fast headless Chromium opens it.

A 64k-token rollout (``bench.harness.long_trajectory``: ~60 turns over a ~20k-token system prompt, every reply
sampled) is made into its page (``trajectory_view.rollout_page``) and opened in Debian's Chromium, headless,
over DevTools; so is a short rollout's page (the same system prompt, a few turns: 22k tokens). Per page, over
``--rounds`` rounds in rotated order:

* **render**: Python seconds from the trajectory to the HTML (token texts, conversation, samples, page);
* **size**: bytes on disk and gzip-compressed;
* **open**: seconds from navigation to the page laid out (its load event, then its height asked for, which
  forces the layout of every token), then the first hover's answer (``tokenInfo`` of the last token);
* **spans**: sampled tokens drawn one ``<span>`` each.

**Baseline**, measured in the same run: the same conversation as plain text (one ``<pre>`` per message, no token
spans, no script), so the ratio is what the per-token shading and hover cost over showing the text at all; the
small page's numbers show the fixed cost. No thresholds. From the repository root (about a minute)::

    flock /tmp/bench.lock .venv/bin/python -m bench.trajectory_page_bench [--tokens 65536] [--rounds 3]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.harness.long_trajectory import long_trajectory
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from durable_rollouts.policy.trajectory_packing import read_trajectory
from durable_rollouts.slime_samples.registry import ContractChoice
from durable_rollouts.trajectory_view.conversation import conversations
from durable_rollouts.trajectory_view.markup import esc, page
from durable_rollouts.trajectory_view.rollout_page import PageSettings, RolloutView, render_rollout, with_conversation
from durable_rollouts.trajectory_view.token_text import TokenTexts
from testbed.headless_chromium import HeadlessChromium


def rollout_page(result: RolloutResult, settings: PageSettings) -> tuple[str, float]:
    """The page as ``starter.py show --html`` makes it from a finished result, and the seconds it took."""
    began = time.perf_counter()
    assert result.trajectory is not None
    view = with_conversation(
        RolloutView(result.workflow_id, "COMPLETED", result, trajectory=read_trajectory(result.trajectory)), settings
    )
    text = render_rollout(view, settings.texts)
    return text, time.perf_counter() - began


def plain_page(result: RolloutResult, texts: TokenTexts) -> str:
    """The baseline: every message's text in a ``<pre>``, nothing per token."""
    assert result.trajectory is not None
    trajectory = read_trajectory(result.trajectory)
    read = conversations(trajectory.segments, trajectory.turn_log, texts)
    blocks = [f"<pre>{esc(texts.text(c.segment.tokens[b.start : b.end]))}</pre>" for c in read for b in c.blocks]
    return page(result.workflow_id, "".join(blocks))


async def open_page(browser: HeadlessChromium, path: Path, hover: bool) -> tuple[float, float | None]:
    began = time.perf_counter()
    await browser.open(path)
    await browser.evaluate("document.documentElement.scrollHeight")
    loaded = time.perf_counter() - began
    if not hover:
        return loaded, None
    began = time.perf_counter()
    await browser.evaluate("window.tokenInfo([...document.querySelectorAll('.toks > span')].pop()).id")
    return loaded, time.perf_counter() - began


async def main(args: argparse.Namespace) -> dict:
    folder = ensure_qwen_tokenizer()
    renderer, texts = PromptRenderer.from_folder(folder), TokenTexts.from_dir(folder)
    settings = PageSettings(texts, ContractChoice("current", "bench"))
    results = {"long": long_trajectory(renderer, args.tokens), "small": long_trajectory(renderer, 22_000)}
    work = Path(tempfile.mkdtemp(prefix="page-bench-"))
    pages: dict[str, dict] = {}
    for name, result in results.items():
        text, render_s = rollout_page(result, settings)
        renders = [render_s] + [rollout_page(result, settings)[1] for _ in range(args.rounds - 1)]
        (work / f"{name}.html").write_text(text)
        assert result.trajectory is not None
        pages[name] = {
            "tokens": result.trajectory.n_tokens,
            "turns": result.turns,
            "render_s": statistics.median(renders),
            "bytes": len(text.encode()),
            "gzip_bytes": len(gzip.compress(text.encode())),
            "hover": True,
        }
    plain = plain_page(results["long"], texts)
    (work / "plain.html").write_text(plain)
    pages["plain"] = {
        "tokens": pages["long"]["tokens"],
        "bytes": len(plain.encode()),
        "gzip_bytes": len(gzip.compress(plain.encode())),
        "hover": False,
    }
    opened: dict[str, list[tuple[float, float | None]]] = {name: [] for name in pages}
    async with HeadlessChromium() as browser:
        order = list(pages)
        for round_ in range(args.rounds):
            for name in order[round_ % len(order) :] + order[: round_ % len(order)]:
                opened[name].append(await open_page(browser, work / f"{name}.html", pages[name]["hover"]))
        spans = {name: await _spans(browser, work / f"{name}.html") for name in ("long", "small")}
    for name, runs in opened.items():
        pages[name]["open_s"] = statistics.median(r[0] for r in runs)
        hovers = [r[1] for r in runs if r[1] is not None]
        pages[name]["hover_s"] = statistics.median(hovers) if hovers else None
        pages[name]["spans"] = spans.get(name, 0)
    for path in work.iterdir():
        path.unlink()
    work.rmdir()
    return pages


async def _spans(browser: HeadlessChromium, path: Path) -> int:
    await browser.open(path)
    return await browser.evaluate("document.querySelectorAll('.toks > span').length")


def report(pages: dict) -> None:
    print(f"{'page':<8}{'tokens':>9}{'spans':>8}{'render s':>10}{'MB':>8}{'gzip MB':>9}{'open s':>8}{'hover s':>9}")
    for name, p in pages.items():
        render = f"{p['render_s']:.2f}" if "render_s" in p else "-"
        hover = f"{p['hover_s']:.3f}" if p.get("hover_s") is not None else "-"
        print(
            f"{name:<8}{p['tokens']:>9,}{p['spans']:>8,}{render:>10}"
            f"{p['bytes'] / 1e6:>8.2f}{p['gzip_bytes'] / 1e6:>9.2f}{p['open_s']:>8.2f}{hover:>9}"
        )
    long, plain = pages["long"], pages["plain"]
    print(
        f"\nlong page vs the plain text of the same conversation: size {long['bytes'] / plain['bytes']:.2f}x, open "
        f"{long['open_s'] / plain['open_s']:.2f}x"
    )
    print(
        f"long page vs the small page: tokens {long['tokens'] / pages['small']['tokens']:.1f}x, open "
        f"{long['open_s'] / pages['small']['open_s']:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=65536, help="the long rollout's tokens (at least)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the numbers here too")
    arguments = parser.parse_args()
    numbers = asyncio.run(main(arguments))
    report(numbers)
    if arguments.json:
        Path(arguments.json).write_text(json.dumps(numbers, indent=2))
