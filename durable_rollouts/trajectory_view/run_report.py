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

from durable_rollouts.contracts.rollout import RolloutResult
from durable_rollouts.contracts.rollout_group import GroupResult
from durable_rollouts.trajectory_view.rollout_page import esc, page
from durable_rollouts.trajectory_view.svg_charts import bar_chart, dot_chart


@dataclass(frozen=True)
class RunReport:
    run_id: str
    groups: list[GroupResult]
    ungrouped: list[RolloutResult]


def _versions(rollout: RolloutResult | None) -> list[str]:
    if rollout is None:
        return []
    return list(dict.fromkeys(v for segment in rollout.segments for v in segment.weight_version_runs))


def _as_int(version: str) -> int | None:
    return int(version) if version.lstrip("-").isdigit() else None


def render_run_report(report: RunReport, pages: Mapping[str, str]) -> str:
    rollouts = [s.rollout for g in report.groups for s in g.samples if s.rollout is not None] + report.ungrouped
    numbers = [n for r in rollouts for v in _versions(r) if (n := _as_int(v)) is not None]
    newest = max(numbers, default=None)
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
    head = f'<h1>run {esc(report.run_id)}</h1><div class="facts">{"".join(f"<span>{esc(k)} <b>{esc(v)}</b></span>" for k, v in facts)}</div>'
    if tampered:
        head += f'<div class="banner tampered">{tampered} tampered gradings in this run (reward 0): see the groups marked below</div>'
    body = head + _plots(groups, rollouts, newest) + _groups_table(groups, pages, newest) + _ungrouped(report.ungrouped, pages)
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
                "time to finish per sample (s), per group", labels, [[s.rollout.elapsed_s for s in g.samples if s.rollout] for g in groups], " s"
            )
        )
    lags = [newest - oldest for r in rollouts if newest is not None and (oldest := _oldest(r)) is not None]
    if lags:
        counts = [lags.count(k) for k in range(max(lags) + 1)]
        plots.append(bar_chart("weight version lag of the oldest token (samples)", [str(k) for k in range(len(counts))], counts))
    return f'<h2>Plots</h2><div class="plots">{"".join(plots)}</div>'


def _oldest(rollout: RolloutResult) -> int | None:
    numbers = [n for v in _versions(rollout) if (n := _as_int(v)) is not None]
    return min(numbers, default=None)


def _link(workflow_id: str, pages: Mapping[str, str]) -> str:
    name = pages.get(workflow_id)
    return f'<a href="{esc(name)}">{esc(workflow_id)}</a>' if name else esc(workflow_id)


def _groups_table(groups: list[GroupResult], pages: Mapping[str, str], newest: int | None) -> str:
    if not groups:
        return ""
    out = ["<h2>Groups</h2>"]
    for group in groups:
        verdict = "kept" if group.kept else f"dropped ({group.dropped_by or '-'})"
        versions = sorted({v for s in group.samples for v in _versions(s.rollout)}, key=lambda v: (_as_int(v) is None, _as_int(v) or 0, v))
        badges = [
            f'<span class="badge {"ok" if group.status == "completed" else "bad"}">{esc(group.status)}</span>',
            f'<span class="badge">{esc(verdict)}</span>',
        ]
        if any(s.tampered for s in group.samples):
            badges.append(f'<span class="badge bad">tampered {sum(s.tampered for s in group.samples)}</span>')
        out.append(
            f'<h3 id="group-{group.group_index}">group {group.group_index}: {esc(group.prompt_key)} {" ".join(badges)}</h3>'
            f'<div class="facts"><span>valid <b>{sum(s.valid for s in group.samples)} / {len(group.samples)}</b></span>'
            f"<span>valid mask <b>{esc(''.join('1' if s.valid else '0' for s in group.samples))}</b></span>"
            f"<span>rewards <b>{esc(', '.join(f'{s.reward:g}' for s in group.samples))}</b></span>"
            f"<span>refilled <b>{group.refilled} / {group.refill_budget}</b></span><span>filter <b>{esc(group.filter.value)}</b></span>"
            f"<span>versions <b>{esc(', '.join(versions) or '-')}</b></span><span>elapsed <b>{group.elapsed_s:.1f} s</b></span></div>"
            + (f"<p>{esc(group.note)}</p>" if group.note else "")
        )
        rows = []
        for sample in group.samples:
            rollout = sample.rollout
            runs = sample.runs or ([] if rollout is None else [])
            run_links = ", ".join(
                _link(r.workflow_id, pages) + f" ({esc(r.status)}{', ' + esc(r.abort_reason) if r.abort_reason else ''})" for r in runs
            )
            if not run_links and rollout is not None:
                run_links = _link(rollout.workflow_id, pages)
            oldest = _oldest(rollout) if rollout else None
            lag = newest - oldest if newest is not None and oldest is not None else None
            tampered = '<span class="badge bad">tampered</span>' if sample.tampered else ""
            rows.append(
                f"<tr><td>{sample.sample_index}</td><td>{'valid' if sample.valid else esc('invalid: ' + (sample.invalid_reason or sample.outcome))}</td>"
                f'<td class="num">{sample.reward:g}</td><td class="num">{(rollout.elapsed_s if rollout else 0):.1f} s</td>'
                f'<td>{esc(", ".join(_versions(rollout)) or "-")}</td><td class="num">{"" if lag is None else lag}</td>'
                f"<td>{esc(rollout.evaluation.grader if rollout and rollout.evaluation else '-')} {tampered}</td><td>{run_links}</td></tr>"
            )
        out.append(
            '<table><tr><th>sample</th><th>validity</th><th class="num">reward</th><th class="num">time</th><th>versions</th>'
            f'<th class="num">lag</th><th>grader</th><th>runs (refills after the first)</th></tr>{"".join(rows)}</table>'
        )
    return "".join(out)


def _ungrouped(rollouts: list[RolloutResult], pages: Mapping[str, str]) -> str:
    if not rollouts:
        return ""
    rows = "".join(
        f'<tr><td>{_link(r.workflow_id, pages)}</td><td>{esc(r.status)}</td><td class="num">{r.reward:g}</td>'
        f'<td class="num">{r.elapsed_s:.1f} s</td><td>{esc(r.abort_reason or "")}</td></tr>'
        for r in sorted(rollouts, key=lambda r: r.workflow_id)
    )
    return f'<h2>Rollouts outside groups</h2><table><tr><th>rollout</th><th>status</th><th class="num">reward</th><th class="num">time</th><th>abort</th></tr>{rows}</table>'
