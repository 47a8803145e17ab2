"""The pages' plots as inline SVG: a time bar of a rollout's activities, bars per group, dots per group, a
histogram. Each function returns one ``<svg>`` element with its own axis labels and a ``<title>`` per mark (the
browser's hover), sized in pixels; no script, no external resource."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from durable_rollouts.trajectory_view.activity_timeline import ActivitySpan
from durable_rollouts.trajectory_view.markup import esc

STAGE_COLOURS = {
    "boot": "#8da0cb",
    "agent": "#66c2a5",
    "diff": "#fc8d62",
    "grading": "#e78ac3",
    "merge": "#a6d854",
    "other": "#c7cbd3",
}
WIDTH = 960
ROW = 22


def _ticks(top: float, count: int = 5) -> list[float]:
    """Round steps from 0 to the first at or above ``top``."""
    if top <= 0:
        return [0.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks: list[float] = []
    value = 0.0
    while not ticks or ticks[-1] < top * 0.9999:
        ticks.append(round(value, 10))
        value += step
    return ticks


def time_bar(spans: Sequence[ActivitySpan], start: datetime, end: datetime) -> str:
    """One row per rollout attempt; per activity a light bar for its wait and a solid one, in its stage's colour,
    for its run (outlined red when it did not complete)."""
    total = max((end - start).total_seconds(), 1e-6)
    left, right = 70, 20
    scale = (WIDTH - left - right) / total
    rows = sorted({s.rollout_attempt for s in spans})
    height = 30 + ROW * len(rows)
    marks = []
    for span in spans:
        y = 8 + ROW * rows.index(span.rollout_attempt)
        colour = STAGE_COLOURS.get(span.stage, STAGE_COLOURS["other"])
        began = span.started or end
        x0 = left + (span.scheduled - start).total_seconds() * scale
        x1 = left + (began - start).total_seconds() * scale
        x2 = left + ((span.ended or end) - start).total_seconds() * scale
        what = (
            f"{span.activity}: {span.summary} "
            f"({span.outcome}{': ' + span.failure if span.failure and span.failure != span.outcome else ''})"
        )
        if x1 - x0 >= 0.5:
            marks.append(
                f'<rect x="{x0:.1f}" y="{y}" width="{x1 - x0:.1f}" height="{ROW - 6}" fill="{colour}" '
                f'opacity="0.3"><title>{esc("waiting: " + what)}</title></rect>'
            )
        if span.started is not None:
            outline = ' stroke="#c0262d" stroke-width="2"' if span.outcome not in ("completed", "running") else ""
            marks.append(
                f'<rect class="stage-{span.stage}" x="{x1:.1f}" y="{y}" width="{max(x2 - x1, 1.0):.1f}" '
                f'height="{ROW - 6}" fill="{colour}"{outline}>'
                f"<title>{esc(what + f' ran {(span.ended or end) - began}')}</title></rect>"
            )
    labels = "".join(f'<text x="4" y="{8 + ROW * i + 12}">attempt {r}</text>' for i, r in enumerate(rows))
    axis_y = 12 + ROW * len(rows)
    ticks = "".join(
        f'<line x1="{left + t * scale:.1f}" y1="4" x2="{left + t * scale:.1f}" y2="{axis_y - 4}" stroke="#e3e6eb"/>'
        f'<text x="{left + t * scale:.1f}" y="{axis_y + 10}" text-anchor="middle">{t:g} s</text>'
        for t in _ticks(total)
        if t <= total
    )
    return (
        f'<svg class="time-bar" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} '
        f'{height}">{ticks}{labels}{"".join(marks)}</svg>'
    )


@dataclass(frozen=True)
class _Plot:
    """A chart's geometry: ``columns`` slots across, values from 0 to ``top`` (rounded up to a tick) upwards."""

    title: str
    columns: int
    top: float
    unit: str = ""
    width: int = 460
    height: int = 200
    left: int = 44
    bottom: int = 34

    @property
    def slot(self) -> float:
        return (self.width - self.left - 8) / max(self.columns, 1)

    @property
    def scale(self) -> float:
        return (self.height - self.bottom - 24) / (self.top or 1)

    def y(self, value: float) -> float:
        return self.height - self.bottom - max(value, 0) * self.scale

    def label(self, centre: float, text: str) -> str:
        """A column's label under the axis (none when there are too many columns to read them)."""
        return (
            f'<text x="{centre:.1f}" y="{self.height - self.bottom + 13}" text-anchor="middle">{esc(text)}</text>'
            if self.columns <= 40
            else ""
        )

    def svg(self, marks: str) -> str:
        base = self.height - self.bottom
        grid = "".join(
            f'<line x1="{self.left}" y1="{self.y(t):.1f}" x2="{self.width - 8}" y2="{self.y(t):.1f}" stroke="#e3e6eb"/>'
            f'<text x="{self.left - 4}" y="{self.y(t) + 4:.1f}" text-anchor="end">{t:g}{esc(self.unit)}</text>'
            for t in _ticks(self.top, 4)
        )
        return (
            f'<svg class="chart" width="{self.width}" height="{self.height}" viewBox="0 0 {self.width} {self.height}">'
            f'<text x="{self.left}" y="14" font-weight="600">{esc(self.title)}</text>{grid}'
            f'<line x1="{self.left}" y1="{base}" x2="{self.width - 8}" y2="{base}" stroke="#6b7280"/>{marks}</svg>'
        )


def bar_chart(
    title: str, labels: Sequence[str], values: Sequence[float], top: float | None = None, unit: str = ""
) -> str:
    """Vertical bars, one per label, from 0 to ``top`` (default: the largest value)."""
    plot = _Plot(title, len(values), _ticks(top if top is not None else max([*values, 1e-9]), 4)[-1], unit)
    marks = []
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        x = plot.left + i * plot.slot + plot.slot * 0.15
        marks.append(
            f'<rect x="{x:.1f}" y="{plot.y(value):.1f}" width="{plot.slot * 0.7:.1f}" '
            f'height="{plot.y(0) - plot.y(value):.1f}" fill="#5b8def">'
            f"<title>{esc(f'{label}: {value:g}{unit}')}</title></rect>" + plot.label(x + plot.slot * 0.35, label)
        )
    return plot.svg("".join(marks))


def dot_chart(title: str, labels: Sequence[str], series: Sequence[Sequence[float]], unit: str = "") -> str:
    """One column of dots per label (a group's samples), from 0 to the largest value."""
    plot = _Plot(title, len(series), _ticks(max([v for s in series for v in s] + [1e-9]), 4)[-1], unit)
    marks = []
    for i, (label, values) in enumerate(zip(labels, series, strict=True)):
        x = plot.left + i * plot.slot + plot.slot / 2
        marks += [
            f'<circle cx="{x:.1f}" cy="{plot.y(value):.1f}" r="3.5" fill="#e7743b" '
            f'opacity="0.8"><title>{esc(f"{label}: {value:.1f}{unit}")}</title></circle>'
            for value in values
        ]
        marks.append(plot.label(x, label))
    return plot.svg("".join(marks))
