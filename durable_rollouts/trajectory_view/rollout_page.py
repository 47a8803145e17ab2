"""One rollout as one self-contained HTML page: facts and verdict, time line and attempts, segments and the
samples the contract makes of them, the conversation with every sampled token shaded, the patch and the logs.

Invariants:

* the page needs nothing beside itself: its style, script and data are inline, it names no network address;
* every sampled token of every reply is one ``<span>`` inside its part's ``.toks`` element, with classes for
  all three shadings: ``p0``-``p4`` by its probability (``P_BUCKETS``), ``m1`` / ``m0`` by its loss mask (a
  reply's ``fate-<kind>`` class tells the mask shading whether the sample contract trains it),
  ``v0``-``v7`` by its weight version (``vx``: none); the page's JSON (``#token-data``) holds each reply's ids,
  log-probs, versions and mask, read by position, for the hover;
* context is text: folded when it is a system prompt (tool definitions included) or long (``FOLD_LINES``); the
  blank text between two messages is not drawn, nor is the label of a reply's blank part (its tokens are);
* a rollout without a trajectory (running, aborted before its merge) still gets its facts and time line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from durable_rollouts.contracts.rollouts import RolloutProgress, RolloutResult
from durable_rollouts.contracts.weight_versions import order_weight_versions
from durable_rollouts.policy.trajectory_packing import Trajectory
from durable_rollouts.slime_samples.options import SampleOptions
from durable_rollouts.slime_samples.registry import ContractChoice
from durable_rollouts.trajectory_view.activity_timeline import Timeline
from durable_rollouts.trajectory_view.conversation import ContextMessage, Reply, SegmentConversation, conversations
from durable_rollouts.trajectory_view.markup import count, esc, page
from durable_rollouts.trajectory_view.timeline_section import timeline_section
from durable_rollouts.trajectory_view.token_text import TokenTexts
from durable_rollouts.trajectory_view.training_samples import SamplePlan, SampleView, sample_plan
from durable_rollouts.trajectory_view.verdict_sections import agent_log_section, grading_section, patch_section

P_BUCKETS = (0.9, 0.5, 0.1, 0.01)
VERSION_CLASSES = 8
FOLD_LINES = 40
FOLD_CHARS = 4000


@dataclass(frozen=True)
class RolloutView:
    """What a page shows of one rollout: its state, its result (finished) or progress (running), the time line
    of its history and its trajectory (``trajectory_note`` says why there is none)."""

    workflow_id: str
    state: str
    result: RolloutResult | None = None
    progress: RolloutProgress | None = None
    timeline: Timeline | None = None
    trajectory: Trajectory | None = None
    conversations: list[SegmentConversation] | None = None
    plan: SamplePlan | None = None
    trajectory_note: str = ""


@dataclass(frozen=True)
class PageSettings:
    """How tokens are read (``texts``) and which contract and options turn them into samples."""

    texts: TokenTexts
    contract: ContractChoice
    options: SampleOptions = SampleOptions()


def with_conversation(view: RolloutView, settings: PageSettings) -> RolloutView:
    """``view`` with its trajectory read as conversations and the samples ``settings``' contract makes of them."""
    if view.trajectory is None:
        return view
    read = conversations(view.trajectory.segments, view.trajectory.turn_log, settings.texts)
    plan = sample_plan(
        read, view.trajectory.turn_log, settings.contract.name, settings.contract.log_line, settings.options
    )
    return replace(view, conversations=read, plan=plan)


def render_rollout(view: RolloutView, texts: TokenTexts | None) -> str:
    """The page of ``view``; ``texts`` reads the tokens (needed only when the view has a trajectory)."""
    segments = view.trajectory.segments if view.trajectory else []
    versions = order_weight_versions(span.version for s in segments for span in s.weight_version_spans)
    data: dict = {"versions": versions, "replies": []}
    sections = [
        ("timeline", "Time line", timeline_section(view.timeline, view.result.agent if view.result else None)),
        ("segments", "Segments and samples", _segments_section(view)),
        ("conversation", "Conversation", _conversation_section(view, texts, versions, data) if texts else ""),
        ("patch", "Patch", patch_section(view.result)),
        ("grading", "Grading", grading_section(view.result)),
        ("agent-log", "Agent log", agent_log_section(view.result)),
    ]
    nav = "".join(f'<a href="#{key}">{title}</a>' for key, title, _ in sections)
    if view.conversations:
        nav += (
            '<span class="modes">shade by '
            '<label><input type="radio" name="shade" value="lp" checked> log-prob</label>'
            '<label><input type="radio" name="shade" value="mask"> loss mask</label>'
            '<label><input type="radio" name="shade" value="ver"> policy version</label></span>'
        )
    body = (
        _header(view)
        + f"<nav>{nav}</nav>"
        + "".join(f'<section id="{key}"><h2>{title}</h2>{content}</section>' for key, title, content in sections)
    )
    return page(f"rollout {view.workflow_id}", body, data)


def _header(view: RolloutView) -> str:
    result, progress = view.result, view.progress
    facts: list[tuple[str, object]] = [("state", view.state)]
    banners = ""
    if result is not None:
        facts += [
            ("task", result.instance_id),
            ("sample", f"{result.sample_index} of group {result.group_index}"),
            ("status", result.status + (f" ({result.abort_reason})" if result.abort_reason else "")),
            ("reward", f"{result.reward:g}"),
            ("solved", result.solved),
            ("attempts", result.attempts),
            ("turns", result.turns),
            ("elapsed", f"{result.elapsed_s:.1f} s"),
        ]
        if result.agent is not None and result.agent.interruptions:
            facts.append(("interruptions", f"{result.agent.interruptions} (resumed, nothing thrown away)"))
        for run in result.discarded:
            text = (
                f"agent run {run.attempt} discarded: {run.turns} turns, {run.sampled_tokens} sampled tokens thrown "
                f"away ({run.reason})"
            )
            banners += f'<div class="banner aborted">{esc(text)}</div>'
        if result.evaluation is not None and result.evaluation.tampered:
            banners += (
                f'<div class="banner tampered">TAMPERED grading: reward 0 '
                f"({count(len(result.evaluation.tampered), 'line')} of evidence, see Grading)</div>"
            )
        if result.status != "completed":
            where = f" in stage {result.stopped_in}" if result.stopped_in else ""
            banners += (
                f'<div class="banner aborted">{esc(result.status)}{esc(where)}: '
                f"{esc(result.abort_reason or result.error or '-')}</div>"
            )
    elif progress is not None:
        facts += [
            ("stage", progress.stage),
            ("attempt", progress.attempt),
            ("turns", progress.turns),
            ("tokens", progress.tokens),
        ]
        banners += (
            f'<div class="banner running">still running, in stage {esc(progress.stage)}: the trajectory comes '
            f"with the result</div>"
        )
    elif view.state == "RUNNING":
        banners += f'<div class="banner running">still running; {esc(view.trajectory_note)}</div>'
    if view.trajectory is not None:
        n = sum(len(s.tokens) for s in view.trajectory.segments)
        sampled = sum(sum(s.loss_mask) for s in view.trajectory.segments)
        facts += [("tokens", f"{n:,} ({sampled:,} trained)"), ("segments", len(view.trajectory.segments))]
    row = "".join(f"<span>{esc(k)} <b>{esc(v)}</b></span>" for k, v in facts)
    return f'<h1>{esc(view.workflow_id)}</h1><div class="facts">{row}</div>{banners}'


def _segments_section(view: RolloutView) -> str:
    if view.trajectory is None:
        return f"<p>No trajectory: {esc(view.trajectory_note or 'none recorded')}.</p>"
    rows = "".join(
        f'<tr><td><a href="#segment-{i}">{i}</a></td><td>{esc(s.kind)}</td><td>{esc(s.lane)}</td><td '
        f'class="num">{len(s.tokens):,}</td>'
        f'<td class="num">{s.prompt_length:,}</td><td class="num">{sum(s.loss_mask):,}</td><td '
        f'class="num">{s.turns}</td>'
        f"<td>{esc(', '.join(s.weight_version_runs()) or '-')}</td><td>{esc(s.finish_reason)}</td></tr>"
        for i, s in enumerate(view.trajectory.segments)
    )
    table = (
        '<table><tr><th>segment</th><th>kind</th><th>lane</th><th class="num">tokens</th><th class="num">first '
        "prompt</th>"
        f'<th class="num">trained</th><th class="num">turns</th><th>versions</th><th>finish</th></tr>{rows}</table>'
    )
    return table + (_plan(view.plan) if view.plan else "")


def _plan(plan: SamplePlan) -> str:
    options = f"fork threshold {plan.options.fork_threshold} tokens" + (
        f", cut to {plan.options.max_sample_tokens} tokens" if plan.options.max_sample_tokens else ", no cut"
    )
    if plan.contract == "seed":
        options = "one sample per segment, no cut and no fork threshold (the seed knew neither)"
    rows = "".join(
        f'<tr><td>{s.index + 1}</td><td class="num">{s.n_tokens:,}</td><td class="num">{s.response_start:,}</td><td '
        f'class="num">{s.trained:,}</td>'
        f"<td>{esc(', '.join(map(str, s.segments)))}</td><td>{_turn_links(s.turns)}</td>"
        f'<td class="num">{s.reward_share:g}</td><td>{_sample_notes(s)}</td></tr>'
        for s in plan.samples
    )
    untrained = [
        f'<a href="#turn-{n}">turn {n}</a>: {esc(f.label)}'
        for n, f in sorted(plan.fates.items())
        if f.kind not in ("trains",)
    ]
    return (
        f"<h3>Training samples: contract <code>{esc(plan.contract)}</code></h3>"
        f"<p>{esc(plan.reason)}; {esc(options)}. {count(len(plan.samples), 'sample')}.</p>"
        '<table><tr><th>sample</th><th class="num">tokens</th><th class="num">response from</th><th '
        'class="num">trained</th>'
        f'<th>segments</th><th>turns trained</th><th class="num">reward share</th><th></th></tr>{rows}</table>'
        + (
            f"<p>Turns not trained as sampled: {'; '.join(untrained)}.</p>"
            if untrained
            else "<p>Every turn trains.</p>"
        )
    )


def _sample_notes(sample: SampleView) -> str:
    notes = (["cut at the cap"] if sample.at_cap else []) + (
        ["truncated (a turn finished by length)"] if sample.truncated else []
    )
    return esc(", ".join(notes))


def _turn_links(turns: list[int]) -> str:
    return " ".join(f'<a href="#turn-{t}">{t}</a>' for t in turns) or "-"


def _conversation_section(view: RolloutView, texts: TokenTexts, versions: list[str], data: dict) -> str:
    if not view.conversations:
        return "<p>No conversation without a trajectory.</p>"
    legends = (
        '<div class="legend lp">probability of the sampled token: '
        + " ".join(
            f'<span class="sw p{k}">{label}</span>'
            for k, label in enumerate(("≥ 0.9", "0.5–0.9", "0.1–0.5", "0.01–0.1", "< 0.01"))
        )
        + "</div>"
        '<div class="legend mask">loss mask: <span class="sw m1">1: trained</span> <span class="sw m0">0: sampled but '
        "masked</span>"
        ' <span class="sw m1 untrained">1, but the sample contract does not train this turn</span> (context is never '
        "trained)</div>"
        '<div class="legend ver">weight version that sampled it: '
        + " ".join(f'<span class="sw v{i % VERSION_CLASSES}">{esc(v)}</span>' for i, v in enumerate(versions))
        + ' <span class="sw vx">none reported</span></div>'
    )
    out = [legends]
    for conversation in view.conversations:
        segment = conversation.segment
        out.append(
            f'<h3 id="segment-{conversation.index}">segment {conversation.index}: {esc(segment.kind)}'
            f" · lane {esc(segment.lane)} · {len(segment.tokens):,} tokens</h3>"
        )
        per_token = segment.token_weight_versions()
        for block in conversation.blocks:
            if isinstance(block, ContextMessage):
                if block.role or block.body.strip():
                    out.append(_context_block(block))
            else:
                out.append(_reply_block(block, conversation, per_token, texts, versions, view.plan, data))
    return "".join(out)


def _context_block(message: ContextMessage) -> str:
    role = message.role or "context"
    lines = message.body.count("\n") + 1
    folded = role == "system" or lines > FOLD_LINES or len(message.body) > FOLD_CHARS
    first = message.body.strip().split("\n", 1)[0][:120]
    label = {"system": "system prompt and tool definitions", "tool": "tool result"}.get(role, role)
    return (
        f'<details class="msg role-{esc(role)}"{"" if folded else " open"}><summary><b>{esc(label)}</b> · '
        f"{message.end - message.start:,} tokens · {lines:,} "
        f"lines{(' · ' + esc(first)) if folded and first else ''}</summary>"
        f'<div class="body">{esc(message.body)}</div></details>'
    )


def _reply_block(
    reply: Reply,
    conversation: SegmentConversation,
    per_token: list[str | None],
    texts: TokenTexts,
    distinct: list[str],
    plan: SamplePlan | None,
    data: dict,
) -> str:
    """The reply's header (tokens, finish, fate, versions, unlikely tokens) and its parts' token spans; its ids,
    log-probs (None when not finite), versions and mask are appended to ``data``."""
    segment = conversation.segment
    ids = segment.tokens[reply.start : reply.end]
    log_probs = np.asarray(segment.rollout_log_probs[reply.start : reply.end], dtype=np.float64)
    mask = segment.loss_mask[reply.start : reply.end]
    index = {v: i for i, v in enumerate(distinct)}
    version_ids = [index[v] if v is not None else -1 for v in per_token[reply.start : reply.end]]
    buckets = len(P_BUCKETS) - np.searchsorted(np.log(np.asarray(P_BUCKETS[::-1])), log_probs, side="right")
    pieces = texts.pieces(ids)
    number = len(data["replies"])
    data["replies"].append(
        {
            "turn": reply.number,
            "segment": conversation.index,
            "start": reply.start,
            "ids": ids,
            "lp": [round(float(x), 5) if math.isfinite(x) else None for x in log_probs],
            "v": version_ids,
            "m": mask,
        }
    )
    parts = []
    for part in reply.parts:
        spans = "".join(
            f'<span class="p{buckets[k]} m{mask[k]} '
            f'{"vx" if version_ids[k] < 0 else f"v{version_ids[k] % VERSION_CLASSES}"}">{esc(pieces[k])}</span>'
            for k in range(part.start - reply.start, part.end - reply.start)
        )
        label = {"thinking": "thinking", "tool_call": "tool call", "text": "text"}[part.kind]
        blank = not "".join(pieces[part.start - reply.start : part.end - reply.start]).strip()
        heading = "" if blank else f'<span class="label">{label}</span>'
        parts.append(
            f'<div class="part {part.kind}{" blank" if blank else ""}">{heading}<div class="toks" data-r="{number}" '
            f'data-o="{part.start - reply.start}">{spans}</div></div>'
        )
    badges = []
    fate_kind = "unknown"
    if plan is not None and reply.number in plan.fates:
        fate = plan.fates[reply.number]
        fate_kind = fate.kind
        badges.append(f'<span class="badge {fate.kind}">{esc(fate.label)}</span>')
    used = sorted({v for v in version_ids if v >= 0})
    if used:
        names = ", ".join(distinct[v] for v in used)
        old = used[0] < len(distinct) - 1
        badges.append(
            f'<span class="badge{" old" if old else ""}">version '
            f"{esc(names)}{' (older than the newest)' if old else ''}</span>"
        )
    low = int((log_probs < math.log(P_BUCKETS[-1])).sum())
    if low:
        badges.append(f'<span class="badge bad">{low} tokens with p &lt; {P_BUCKETS[-1]}</span>')
    lead = f'<div class="lead">prompt ends: <code>{esc(reply.lead.strip())}</code></div>' if reply.lead.strip() else ""
    return (
        f'<div class="reply fate-{fate_kind}" id="turn-{reply.number}"><div class="reply-head"><b>assistant · turn '
        f"{reply.number}</b>"
        f"<span>{reply.end - reply.start:,} tokens · finish "
        f"{esc(reply.finish_reason or '-')}</span>{''.join(badges)}</div>"
        f"{lead}{''.join(parts)}</div>"
    )
