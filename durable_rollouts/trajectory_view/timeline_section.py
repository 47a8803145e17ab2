"""A rollout page's time line: the time bar of its activities, each stage's running time, why each attempt
ended, and every activity in a folded table.

Invariants: a running workflow's bars end at the moment it was read (``Timeline.observed``), a finished one's at
its close; an attempt's line names the first activity of it that did not complete (stage other than picking a
host or cleaning up), else how its agent ended (the result's own reason for the last attempt).
"""

from __future__ import annotations

from datetime import datetime

from durable_rollouts.contracts.agent_runs import AgentRun
from durable_rollouts.trajectory_view.activity_timeline import ActivitySpan, Timeline
from durable_rollouts.trajectory_view.markup import esc
from durable_rollouts.trajectory_view.svg_charts import STAGE_COLOURS, time_bar


def timeline_section(timeline: Timeline | None, last_agent: AgentRun | None) -> str:
    if timeline is None or timeline.started is None or not timeline.spans:
        return "<p>No activity in the workflow's history.</p>"
    ended = timeline.ended or timeline.observed or max(s.ended or s.started or s.scheduled for s in timeline.spans)
    totals: dict[str, float] = {}
    for span in timeline.spans:
        if span.started is not None:
            totals[span.stage] = totals.get(span.stage, 0.0) + ((span.ended or ended) - span.started).total_seconds()
    legend = " ".join(
        f'<span class="badge" style="background:{STAGE_COLOURS[stage]}">{stage} {totals.get(stage, 0.0):.1f} s</span>'
        for stage in STAGE_COLOURS
    )
    rows = "".join(_span_row(span, timeline.started) for span in timeline.spans)
    return (
        time_bar(timeline.spans, timeline.started, ended)
        + f'<p class="legend-row">{legend} (time running; a lighter bar before one is its wait to be picked up)</p>'
        + _attempts(timeline, last_agent)
        + "<details><summary>every activity</summary><table><tr><th>activity</th><th>summary</th><th>attempt</th>"
        + '<th class="num">queued at</th><th class="num">waited</th><th class="num">ran</th><th>outcome</th></tr>'
        + rows
        + "</table></details>"
    )


def _seconds(a: datetime | None, b: datetime | None) -> str:
    return f"{(b - a).total_seconds():.2f} s" if a is not None and b is not None else "-"


def _span_row(span: ActivitySpan, origin: datetime) -> str:
    outcome = span.outcome + (f": {span.failure}" if span.failure and span.failure != span.outcome else "")
    return (
        f"<tr><td>{esc(span.activity)}</td><td>{esc(span.summary)}</td><td>{span.rollout_attempt}.{span.attempt}</td>"
        f'<td class="num">+{(span.scheduled - origin).total_seconds():.2f} s</td>'
        f'<td class="num">{_seconds(span.scheduled, span.started)}</td><td '
        f'class="num">{_seconds(span.started, span.ended)}</td>'
        f"<td>{esc(outcome)}</td></tr>"
    )


def _attempts(timeline: Timeline, last_agent: AgentRun | None) -> str:
    attempts: dict[int, list[ActivitySpan]] = {}
    for span in timeline.spans:
        attempts.setdefault(span.rollout_attempt, []).append(span)
    items = []
    for number, spans in sorted(attempts.items()):
        agent = next((s for s in spans if s.stage == "agent"), None)
        failed = next((s for s in spans if s.outcome not in ("completed", "running") and s.stage != "other"), None)
        if failed is not None:
            why = f"{failed.activity} {failed.outcome}: {failed.failure}"
        elif agent is not None and agent.outcome == "completed":
            run = last_agent if number == max(attempts) else None
            why = "agent completed"
            if run is not None:
                why = f"agent ended: {run.reason}" + (
                    f" ({run.terminal_reason})" if run.terminal_reason not in ("", run.reason) else ""
                )
                why += f", {run.turns} turns, exit code {run.exit_code}"
        elif agent is not None:
            why = "agent running"
        else:
            why = "no agent run"
        items.append(f"<li>attempt {number}: {esc(why)}</li>")
    return f"<h3>Attempts</h3><ul>{''.join(items)}</ul>"
