"""The trajectory pages' screenshots in docs/images/ (headless Debian Chromium over DevTools, no downloads).

The rollout page is the one the browser test checks: real Claude Code requests (main, compaction, continuation,
sub-agent) answered through the real adapter by the scripted policy, whose weight version moves 1, 2, 2, 3, with
a tampered grading. It is shot at its top (facts, time line, samples) and with a token hovered in each shading
(log-prob, loss mask, policy version). With ``--run-id R`` (after ``make demo``, which prints R) the
run's index from ``starter.py report`` is shot too, and the top of its first rollout's page (its time line).

    .venv/bin/python -m scripts.trajectory_screenshots [--run-id R] [--out docs/images]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from durable_rollouts.paths import PROJECT_ROOT
from durable_rollouts.policy.adapter_server import AdapterServer
from durable_rollouts.policy.prompt_renderer import PromptRenderer
from durable_rollouts.policy.tokenizer_cache import ensure_qwen_tokenizer
from testbed.headless_chromium import HeadlessChromium
from tests.trajectory_view.captured_pages import captured_result, captured_session, write_captured_page

# Per shading, the token hovered: in turn 2 for log-prob and version; in the realigned turn 1 for the loss mask.
HOVERED = {
    mode: f"[...document.querySelectorAll('#turn-{turn} .toks > span')].find(s => s.textContent.includes('{word}'))"
    for mode, turn, word in (("lp", 2, "recogn"), ("mask", 1, "problem"), ("ver", 2, "recogn"))
}


async def shoot_rollout(page: Path, out: Path) -> None:
    async with HeadlessChromium(1280, 860) as browser:
        await browser.open(page)
        await browser.screenshot(out / "trajectory-page-top.png")
        for mode in ("lp", "mask", "ver"):
            await browser.evaluate(f"document.querySelector('input[value={mode}]').click()")
            x, y = await browser.evaluate(
                f"(() => {{ const s = {HOVERED[mode]}; s.scrollIntoView({{block: 'center'}});"
                " const r = s.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
            )
            await browser.hover(x, y)
            await browser.screenshot(out / f"trajectory-page-{mode}.png")


async def shoot_index(run_id: str, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="report-") as folder:
        subprocess.run(
            [sys.executable, str(PROJECT_ROOT / "starter.py"), "report", "--run-id", run_id, "--html", folder],
            check=True,
        )
        async with HeadlessChromium(1280, 860) as browser:
            await browser.open(Path(folder) / "index.html")
            await browser.screenshot(out / "trajectory-run-index.png")
            first = await browser.evaluate("document.querySelector('tr[id^=group-] a').getAttribute('href')")
            await browser.open(Path(folder) / first)
            await browser.screenshot(out / "trajectory-demo-rollout.png")


async def main(args: argparse.Namespace) -> None:
    out = Path(args.out)
    renderer = PromptRenderer.from_folder(ensure_qwen_tokenizer())
    adapter = AdapterServer(renderer, keepalive_s=0.2)
    await adapter.start()
    try:
        result = captured_result(await captured_session(adapter, renderer))
    finally:
        await adapter.stop()
    with tempfile.TemporaryDirectory(prefix="pages-") as folder:
        page = Path(folder) / "rollout.html"
        write_captured_page(result, page)
        await shoot_rollout(page, out)
    if args.run_id:
        await shoot_index(args.run_id, out)
    print(f"screenshots in {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run-id", help="also shoot this run's index (a run on the configured server, or the demo's stored one)"
    )
    parser.add_argument("--out", default=str(PROJECT_ROOT / "docs" / "images"))
    asyncio.run(main(parser.parse_args()))
