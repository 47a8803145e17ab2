"""The pages in a real browser (Debian's Chromium, headless, over DevTools): a rollout page made of real Claude Code
requests (main, compaction, continuation, sub-agent; weight versions 1, 2, 2, 3; a tampered grading) and a run's
index, checked in the DOM, by hovering a token and by switching the shading; neither page asks the network for
anything."""

from __future__ import annotations

import os

import pytest

from durable_rollouts.contracts.rollout_group import ChildRun, GroupResult, GroupSample
from durable_rollouts.contracts.tokens import SegmentSummary
from durable_rollouts.policy.trajectory_packing import read_trajectory
from durable_rollouts.trajectory_view.run_report import RunReport, render_run_report
from testbed.headless_chromium import HeadlessChromium
from tests.trajectory_view.captured_pages import captured_result, captured_session, write_captured_page
from tests.waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
PNG = b"\x89PNG\r\n\x1a\n"


async def test_a_rollout_page_shows_turns_shading_hover_samples_and_verdict(adapter, renderer, tmp_path):
    result = captured_result(await captured_session(adapter, renderer))
    trajectory = read_trajectory(result.trajectory)
    path = tmp_path / "rollout.html"
    write_captured_page(result, path)
    async with HeadlessChromium() as browser:
        await browser.open(path)
        replies = await browser.evaluate(
            "[...document.querySelectorAll('.reply')].map(r => [r.id, r.querySelectorAll('.toks > span').length, "
            "r.querySelector('.reply-head').textContent])"
        )
        sampled = [[t.end - t.prompt_end] for t in trajectory.turn_log.turns]
        assert [[count] for _, count, _ in replies] == sampled and [r[0] for r in replies] == [
            "turn-1",
            "turn-2",
            "turn-3",
            "turn-4",
        ]
        assert "realigned" in replies[0][2] and "older than the newest" in replies[0][2], (
            "turn 1: realigned, sampled by an old policy"
        )
        assert "trains in sample 1" in replies[1][2]
        headings = await browser.evaluate("[...document.querySelectorAll('#conversation h3')].map(h => h.textContent)")
        assert [h.split(":")[1].split("·")[0].strip() for h in headings] == [
            "main",
            "compaction",
            "continuation",
            "subagent",
        ]
        assert await browser.evaluate("document.querySelector('details.role-system').open") is False, (
            "the system prompt is folded"
        )
        assert await browser.evaluate("document.querySelectorAll('details.role-tool').length") == 1
        assert "TAMPERED" in await browser.evaluate("document.querySelector('.banner.tampered').textContent")

        # The scripted log-probs hang on each request's random id, so a run may have no token of a class: read those
        # present.
        backgrounds = await browser.evaluate(
            "Object.fromEntries(['p0','p1','p2','p3'].filter(c => document.querySelector('.toks > .' + c))"
            ".map(c => [c, getComputedStyle(document.querySelector('.toks > .' + c)).backgroundColor]))"
        )
        assert backgrounds.get("p0", "rgba(0, 0, 0, 0)") == "rgba(0, 0, 0, 0)", (
            "a likely token (also loss mask 1, a version) is left plain"
        )
        shaded = [backgrounds[c] for c in ("p1", "p2", "p3") if c in backgrounds]
        assert len(shaded) >= 2 and len(set(shaded)) == len(shaded), "shaded by log-prob, less likely darker"

        target = await browser.evaluate(
            "(() => { const s = document.querySelector('#turn-2 .toks > span'); const r = s.getBoundingClientRect(); "
            "s.scrollIntoView({block: 'center'});"
            " const q = s.getBoundingClientRect(); return [q.x + q.width / 2, q.y + q.height / 2, "
            "window.tokenInfo(s)]; })()"
        )
        x, y, info = target
        await browser.hover(x, y)
        tip = await browser.evaluate(
            "[getComputedStyle(document.getElementById('tip')).display, document.getElementById('tip').textContent]"
        )
        compaction = trajectory.segments[1]
        first = trajectory.turn_log.turns[1].prompt_end
        assert (
            tip[0] == "block"
            and f"id {compaction.tokens[first]} " in tip[1]
            and "version 2" in tip[1]
            and "loss mask 1" in tip[1]
        ), tip
        assert (
            info["logprob"] == pytest.approx(compaction.rollout_log_probs[first], abs=1e-5)
            and info["position"] == first
        )
        calls = await browser.evaluate(
            "[...document.querySelectorAll('#turn-4 .part.tool_call .toks > span')].slice(-3).map(s => "
            "window.tokenInfo(s))"
        )
        subagent, last = trajectory.segments[3], trajectory.turn_log.turns[3]
        assert [c["position"] for c in calls] == [last.end - 4, last.end - 3, last.end - 2], (
            "the tool call ends just before <|im_end|>\n"
        )
        assert [c["id"] for c in calls] == subagent.tokens[last.end - 4 : last.end - 1] and calls[-1][
            "text"
        ] == '"</tool_call>"'

        for mode, expected in (("mask", "rgb(201, 236, 210)"), ("ver", None)):
            box = await browser.evaluate(
                f"(() => {{ const i = document.querySelector('input[value={mode}]'); i.scrollIntoView(); const r = "
                f"i.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
            )
            await browser.click(*box)
            assert await browser.evaluate("document.body.className") == f"shade-{mode}"
            shades = await browser.evaluate(
                "['#turn-1','#turn-2','#turn-4'].map(t => getComputedStyle(document.querySelector(t + ' .toks > "
                "span')).backgroundColor)"
            )
            if expected:
                assert shades[1:] == [expected] * 2, "loss mask 1, trained by the contract"
                assert shades[0] == "rgb(227, 213, 247)", (
                    "loss mask 1 in its segment, but realigned: the contract does not train turn 1"
                )
            else:
                assert len(set(shades)) == 3, f"versions 1, 2 and 3 in three colours: {shades}"
        await browser.screenshot(tmp_path / "rollout.png")
        assert browser.network_requests == []
    assert (tmp_path / "rollout.png").read_bytes().startswith(PNG)


async def test_a_run_index_plots_its_groups_and_links_every_rollout(adapter, renderer, tmp_path):
    rollout = captured_result(await captured_session(adapter, renderer))
    rollout = rollout.model_copy(
        update={"segments": [SegmentSummary.of(s) for s in read_trajectory(rollout.trajectory).segments]}
    )
    second = rollout.model_copy(
        update={
            "workflow_id": "rollout-captures-calc-1-0",
            "sample_index": 1,
            "reward": 1.0,
            "evaluation": None,
            "elapsed_s": 30.0,
        }
    )
    groups = [
        GroupResult(
            workflow_id="group-captures-calc-0",
            run_id="captures",
            prompt_key="calc",
            status="completed",
            kept=True,
            refilled=1,
            refill_budget=2,
            samples=[
                GroupSample(
                    sample_index=0,
                    valid=True,
                    outcome="model",
                    rollout=rollout,
                    runs=[ChildRun(workflow_id=rollout.workflow_id, status="completed", outcome="model")],
                ),
                GroupSample(
                    sample_index=1,
                    valid=True,
                    outcome="model",
                    rollout=second,
                    runs=[
                        ChildRun(
                            workflow_id="rollout-captures-calc-1-0-x",
                            status="aborted",
                            abort_reason="sandbox_boot_failed",
                            outcome="infrastructure",
                        ),
                        ChildRun(workflow_id=second.workflow_id, status="completed", outcome="model"),
                    ],
                ),
            ],
        ),
        GroupResult(
            workflow_id="group-captures-calc-1",
            run_id="captures",
            group_index=1,
            prompt_key="calc",
            status="cut",
            samples=[],
        ),
    ]
    path = tmp_path / "index.html"
    pages = {rollout.workflow_id: "pages/a.html", second.workflow_id: "pages/b.html"}
    path.write_text(render_run_report(RunReport("captures", groups, []), pages))
    async with HeadlessChromium() as browser:
        await browser.open(path)
        charts = await browser.evaluate(
            "[...document.querySelectorAll('svg.chart > text:first-of-type')].map(t => t.textContent)"
        )
        assert charts == [
            "mean reward of valid samples, per group",
            "valid share, per group",
            "time to finish per sample (s), per group",
            "weight version lag of the oldest token (samples)",
        ]
        links = await browser.evaluate(
            "[...document.querySelectorAll('#group-0 a')].map(a => [a.getAttribute('href'), a.textContent])"
        )
        assert [href for href, _ in links] == ["pages/a.html", "pages/b.html"], (
            "each sample links to its final run's page"
        )
        assert "rollout-captures-calc-1-0-x: sandbox_boot_failed" in await browser.evaluate(
            "document.getElementById('group-0').textContent"
        )
        badges = await browser.evaluate(
            "[...document.querySelectorAll('#group-0 .badge')].map(b => [b.className, b.title])"
        )
        status, tampered, clean, count = badges
        assert (
            status == ["badge ok", ""]
            and tampered[0] == "badge bad"
            and "tampered" in tampered[1]
            and "versions 1, 2, 3" in tampered[1]
        ), badges
        assert clean == ["badge ok", "sample 1; valid; reward 1; 30.0 s; versions 1, 2, 3; lag 2"] and count == [
            "badge bad",
            "",
        ]
        assert "cut" in await browser.evaluate("document.getElementById('group-1').textContent")
        dots = await browser.evaluate("document.querySelectorAll('svg.chart circle').length")
        assert dots == 2 and browser.network_requests == []


async def test_the_browser_keeps_its_files_in_its_own_folder_and_leaves_nothing_behind():
    async with HeadlessChromium() as browser:
        profile, group = browser.profile, browser.process_group
        assert list(profile.glob("tmp/org.chromium.Chromium.*")), (
            "Chromium's singleton folder is under the profile, not the machine's /tmp"
        )
    assert not profile.exists()
    await until(lambda: not group_alive(group))


def group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True
