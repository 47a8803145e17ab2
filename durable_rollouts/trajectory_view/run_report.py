"""A run's groups as one self-contained index page: a table per group (reward, valid mask, refills, filter,
cut, weight versions, tampered) with plots where a table would not do (mean reward and valid share per group,
time to finish per sample, version lag), every sample linking to its rollout's page.

Invariants: the page is built from ``GroupResult`` s and the rollouts not in any group alone (no I/O);
``pages`` maps a rollout's workflow id to its page's file name, a sample whose page was not written shows its
id without a link; a weight version lag is the run's newest version minus the sample's oldest, for integer
versions only (other versions show but are not plotted).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from durable_rollouts.contracts.rollout_group import GroupResult, GroupSample
from durable_rollouts.contracts.rollouts import RolloutResult
from durable_rollouts.contracts.weight_versions import is_integer_version, order_weight_versions
from durable_rollouts.trajectory_view.markup import esc, page
from durable_rollouts.trajectory_view.svg_charts import bar_chart, dot_chart


@dataclass(frozen=True)
class RunReport:
    run_id: str
    groups: list[GroupResult]
    ungrouped: list[RolloutResult]


def _versions(rollout: RolloutResult | None) -> list[str]:
    """The weight versions that sampled ``rollout``'s tokens, oldest first."""
    return (
        order_weight_versions(v for segment in rollout.segments for v in segment.weight_version_runs) if rollout else []
    )


def _number(version: str | None) -> int | None:
    """An integer version's number (the lag is counted in those only)."""
    return int(version) if version is not None and is_integer_version(version) else None


def render_run_report(report: RunReport, pages: Mapping[str, str]) -> str:
    rollouts = [s.rollout for g in report.groups for s in g.samples if s.rollout is not None] + report.ungrouped
    newest = max((n for r in rollouts if (n := _number(r.newest_weight_version)) is not None), default=None)
    groups = sorted(report.groups, key=lambda g: g.group_index)
    samples = sum(len(g.samples) for g in groups)
    valid = sum(s.valid for g in groups for s in g.samples)
    tampered = sum(s.tampered for g in groups for s in g.samples)
    facts = [
        ("groups", len(groups)),
        ("samples valid", f"{valid} / {samples}"),
        ("kept groups", sum(g.kept for g in groups)),
        ("refilled", sum(g.refilled for g in groups)),
        ("cut", sum(g.status == "cut" for g in groups)),
        ("tampered", tampered),
        ("rollouts outside groups", len(report.ungrouped)),
    ]
    head = (
        f"<h1>run {esc(report.run_id)}</h1><div "
        f'class="facts">{"".join(f"<span>{esc(k)} <b>{esc(v)}</b></span>" for k, v in facts)}</div>'
    )
    if tampered:
        head += (
            f'<div class="banner tampered">{tampered} tampered gradings in this run (reward 0): see the groups '
            f"marked below</div>"
        )
    body = (
        head
        + _plots(groups, rollouts, newest)
        + _groups_table(groups, pages, newest)
        + _ungrouped(report.ungrouped, pages)
    )
    return page(f"run {report.run_id}", body)


def _plots(groups: list[GroupResult], rollouts: list[RolloutResult], newest: int | None) -> str:
    if not groups and not rollouts:
        return "<p>No groups or rollouts found for this run.</p>"
    labels = [str(g.group_index) for g in groups]
    plots = []
    if groups:
        means = [sum(s.reward for s in g.samples if s.valid) / max(sum(s.valid for s in g.samples), 1) for g in groups]
        shares = [sum(s.valid for s in g.samples) / max(len(g.samples), 1) for g in groups]
        plots.append(bar_chart("mean reward of valid samples, per group", labels, means, top=max([1.0, *means])))
        plots.append(bar_chart("valid share, per group", labels, shares, top=1.0))
        plots.append(
            dot_chart(
                "time to finish per sample (s), per group",
                labels,
                [[s.rollout.elapsed_s for s in g.samples if s.rollout] for g in groups],
                " s",
            )
        )
    lags = [
        newest - oldest
        for r in rollouts
        if newest is not None and (oldest := _number(r.oldest_weight_version)) is not None
    ]
    if lags:
        counts = [lags.count(k) for k in range(max(lags) + 1)]
        plots.append(
            bar_chart("weight version lag of the oldest token (samples)", [str(k) for k in range(len(counts))], counts)
        )
    return f'<h2>Plots</h2><div class="plots">{"".join(plots)}</div>'


def _link(workflow_id: str, pages: Mapping[str, str]) -> str:
    name = pages.get(workflow_id)
    return f'<a href="{esc(name)}">{esc(workflow_id)}</a>' if name else esc(workflow_id)


def _groups_table(groups: list[GroupResult], pages: Mapping[str, str], newest: int | None) -> str:
    """One row per group; each sample a badge (green: valid, red: not) linking to its final run's page, with its
    reward, time, versions and lag on hover, and the runs a refill replaced listed after it."""
    if not groups:
        return ""
    rows = []
    for group in groups:
        verdict = "kept" if group.kept else f"dropped ({group.dropped_by or '-'})"
        versions = order_weight_versions(v for s in group.samples for v in _versions(s.rollout))
        samples = " ".join(_sample_badge(sample, pages, newest) for sample in group.samples) or "-"
        tampered = sum(s.tampered for s in group.samples)
        tampered_cell = f'<span class="badge bad">{tampered}</span>' if tampered else "0"
        status = f'<span class="badge {"ok" if group.status == "completed" else "bad"}">{esc(group.status)}</span>'
        rows.append(
            f'<tr id="group-{group.group_index}"><td>{group.group_index}</td><td>{esc(group.prompt_key)}</td>'
            f"<td>{status}</td><td>{esc(verdict)}</td>"
            f"<td>{samples}</td><td>{esc(', '.join(f'{s.reward:g}' for s in group.samples))}</td>"
            f'<td class="num">{group.refilled} / '
            f"{group.refill_budget}</td><td>{esc(group.filter.value)}</td><td>{esc(', '.join(versions) or '-')}</td>"
            f'<td>{tampered_cell}</td><td class="num">{group.elapsed_s:.1f} s</td>'
            f"<td>{esc(group.note)}</td></tr>"
        )
    return (
        "<h2>Groups</h2><table><tr><th>group</th><th>prompt</th><th>status</th><th>filter verdict</th><th>samples "
        "(valid mask)</th>"
        '<th>rewards</th><th class="num">refilled</th><th>filter</th><th>versions</th><th>tampered</th><th '
        'class="num">elapsed</th><th>note</th></tr>' + "".join(rows) + "</table>"
    )


def _sample_badge(sample: GroupSample, pages: Mapping[str, str], newest: int | None) -> str:
    rollout = sample.rollout
    oldest = _number(rollout.oldest_weight_version) if rollout else None
    facts = [
        f"sample {sample.sample_index}",
        "valid" if sample.valid else f"invalid: {sample.invalid_reason or sample.outcome}",
        f"reward {sample.reward:g}",
    ]
    if rollout is not None:
        facts += [f"{rollout.elapsed_s:.1f} s", f"versions {', '.join(_versions(rollout)) or '-'}"]
    if newest is not None and oldest is not None:
        facts.append(f"lag {newest - oldest}")
    if sample.tampered:
        facts.append("tampered")
    kind = "bad" if sample.tampered or not sample.valid else "ok"
    label = f"{sample.sample_index}: {sample.reward:g}"
    final = rollout.workflow_id if rollout is not None else (sample.runs[-1].workflow_id if sample.runs else "")
    badge = f'<span class="badge {kind}" title="{esc("; ".join(facts))}">{esc(label)}</span>'
    if final in pages:
        badge = f'<a href="{esc(pages[final])}">{badge}</a>'
    replaced = [r for r in sample.runs if r.workflow_id != final]
    if replaced:
        badge += (
            " ("
            + ", ".join(_link(r.workflow_id, pages) + f": {esc(r.abort_reason or r.status)}" for r in replaced)
            + ")"
        )
    return badge


def _ungrouped(rollouts: list[RolloutResult], pages: Mapping[str, str]) -> str:
    if not rollouts:
        return ""
    rows = "".join(
        f'<tr><td>{_link(r.workflow_id, pages)}</td><td>{esc(r.status)}</td><td class="num">{r.reward:g}</td>'
        f'<td class="num">{r.elapsed_s:.1f} s</td><td>{esc(r.abort_reason or "")}</td></tr>'
        for r in sorted(rollouts, key=lambda r: r.workflow_id)
    )
    return (
        f'<h2>Rollouts outside groups</h2><table><tr><th>rollout</th><th>status</th><th class="num">reward</th><th '
        f'class="num">time</th><th>abort</th></tr>{rows}</table>'
    )
