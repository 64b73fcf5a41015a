"""The picture on the member's memory page: stacked bars, drawn as SVG text on the server.

Pure: plain values in, a string of SVG out, no Django and no script, so the page works
with JavaScript off and the drawing is unit-tested on its own. A dozen bars do not need a
charting library (the choice is in docs/accessibility.md, "The memory picture"). The
counting is `memory.selectors.memory_picture`; every number drawn here is also in the
table the page puts beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from xml.sax.saxutils import escape  # nosec B406 - escapes what Iris writes; parses nothing

# Colours are CSS classes (static/iris/iris.css, .fill-0 to .fill-5): no inline style,
# which the Content-Security-Policy would refuse. Series past the sixth reuse them.
PALETTE_SIZE = 6

MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    counts: tuple[int, ...]  # one per period, in period order


@dataclass(frozen=True)
class Chart:
    title: str
    periods: tuple[str, ...]  # the bar labels, oldest first
    series: tuple[Series, ...]

    def total(self, index: int) -> int:
        return sum(s.counts[index] for s in self.series)


def months_ending(today: date, count: int) -> list[date]:
    """The first day of each of the `count` months up to and including `today`'s."""
    months = []
    year, month = today.year, today.month
    for _ in range(count):
        months.append(date(year, month, 1))
        month -= 1
        if month == 0:
            year, month = year - 1, 12
    return list(reversed(months))


def month_label(month: date) -> str:
    return f"{MONTH_NAMES[month.month - 1]} {month.year}"


def cumulative(counts_by_month: Mapping[date, int], months: Sequence[date]) -> tuple[int, ...]:
    """Running totals at the end of each month: what was remembered by then.

    Counts dated before the first month are carried into it.
    """
    totals = []
    running = sum(n for m, n in counts_by_month.items() if m < months[0])
    for month in months:
        running += counts_by_month.get(month, 0)
        totals.append(running)
    return tuple(totals)


def _nice_max(value: int) -> int:
    """The axis top: the smallest of 1, 2, 5 times a power of ten at or above `value`."""
    if value <= 0:
        return 1
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def stacked_bars(chart: Chart, *, width: int = 420, height: int = 220, label_id: str) -> str:
    """The chart as one <svg> element; `label_id` names the element that describes it."""
    left, right, top, bottom = 44, 12, 12, 32
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(chart.periods)
    axis_max = _nice_max(max((chart.total(i) for i in range(n)), default=0))
    slot = plot_w / max(n, 1)
    bar_w = slot * 0.6
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="{escape(label_id)}" '
        'focusable="false">'
    ]
    # Axis: zero, half and the top, with light grid lines.
    for fraction in (0.0, 0.5, 1.0):
        value = axis_max * fraction
        if fraction == 0.5 and value != int(value):
            continue
        y = top + plot_h - plot_h * fraction
        parts.append(
            f'<line class="picture__grid" x1="{left}" y1="{y:.1f}" x2="{width - right}" '
            f'y2="{y:.1f}" stroke="#6b7280" stroke-width="{2 if fraction == 0 else 0.5}"/>'
        )
        parts.append(
            f'<text class="picture__axis" x="{left - 6}" y="{y + 5:.1f}" '
            f'text-anchor="end">{int(value)}</text>'
        )
    for i, period in enumerate(chart.periods):
        x = left + slot * i + (slot - bar_w) / 2
        base = float(top + plot_h)
        for index, series in enumerate(chart.series):
            count = series.counts[i]
            if count <= 0:
                continue
            h = plot_h * count / axis_max
            base -= h
            parts.append(
                f'<rect class="fill-{index % PALETTE_SIZE}" x="{x:.1f}" y="{base:.1f}" '
                f'width="{bar_w:.1f}" height="{h:.1f}"><title>{escape(period)}: '
                f"{escape(series.label)}, {count}</title></rect>"
            )
        parts.append(
            f'<text class="picture__label" x="{x + bar_w / 2:.1f}" y="{height - 10}" '
            f'text-anchor="middle">{escape(period.split(" ")[0])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
