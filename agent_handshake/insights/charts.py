"""Charts for the insights pages as plain geometry (bars, lines, axes, legend) that a template draws as SVG: no
JavaScript, no chart library. Every chart carries its numbers as a table too, for screen readers and for copying.

Labels may come from agents (capability names, agent names): they are plain strings here and escaped by the
template that renders them, never marked safe.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Series colours, readable on white and distinct for the common kinds of colour blindness (Okabe-Ito).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
OTHER_COLOUR = "#999999"
#: Each outcome keeps its colour whatever the range shows (the palette's order would follow traffic size).
OUTCOME_COLOURS = {
    "success": "#009E73",
    "clarification": "#56B4E9",
    "no_answer": "#E69F00",
    "refused": "#CC79A7",
    "rate_limited": "#D55E00",
    "error": "#000000",
}

WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 28  # the plot area's margins: y labels left, day labels below
LEGEND_ROW = 18


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    colour: str
    label: str  # the bar's own tooltip (<title>): "2024-03-10, ahp: 12"


@dataclass
class Line:
    points: str  # "x,y x,y ..." for <polyline>
    colour: str
    name: str
    dots: list[tuple[float, float, str]] = field(default_factory=list)  # x, y, tooltip


@dataclass
class Chart:
    title: str
    description: str
    width: int
    height: int
    plot_left: float
    plot_right: float
    plot_bottom: float
    y_ticks: list[tuple[float, str]]  # y position, label
    x_labels: list[tuple[float, str]]  # x centre, label
    legend: list[tuple[float, float, str, str]]  # x, y, colour, name
    bars: list[Bar] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    rows: list[list[object]] = field(default_factory=list)
    slug: str = ""


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at least ``value`` (1 for nothing)."""
    if value <= 0:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power  # pragma: no cover


def short_number(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def day_label(day: datetime.date, count: int) -> str:
    return day.strftime("%b %d") if count <= 16 else day.strftime("%m-%d")


def frame(
    title: str,
    description: str,
    days: Sequence[datetime.date],
    names: Sequence[str],
    top: float,
    slug: str,
    colours: dict[str, str] | None = None,
):
    legend_rows = math.ceil(len(names) / 4) if names else 0
    height = HEIGHT + legend_rows * LEGEND_ROW
    plot_top, plot_bottom = TOP + legend_rows * LEGEND_ROW, height - BOTTOM
    chart = Chart(
        title=title,
        description=description,
        width=WIDTH,
        height=height,
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        plot_bottom=plot_bottom,
        y_ticks=[],
        x_labels=[],
        legend=[],
        slug=slug,
    )
    for n, name in enumerate(names):
        chart.legend.append((LEFT + (n % 4) * 165, TOP + (n // 4) * LEGEND_ROW, colour_of(n, name, colours), name))
    for step in range(5):
        value = top * step / 4
        chart.y_ticks.append((round(plot_bottom - (plot_bottom - plot_top) * step / 4, 1), short_number(value)))
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(days))
    every = max(1, math.ceil(len(days) / 12))  # at most a dozen day labels
    for n, day in enumerate(days):
        if n % every == 0:
            chart.x_labels.append((round(LEFT + slot * (n + 0.5), 1), day_label(day, len(days))))
    return chart, plot_top, plot_bottom, slot


def colour_of(index: int, name: str = "", colours: dict[str, str] | None = None) -> str:
    """The series' own colour when ``colours`` names it, else the palette's ``index``-th."""
    if colours and name in colours:
        return colours[name]
    return PALETTE[index] if index < len(PALETTE) else OTHER_COLOUR


def stacked_bars(
    title: str,
    days: Sequence[datetime.date],
    series: dict[str, Sequence[float]],
    description: str = "",
    slug: str = "",
    colours: dict[str, str] | None = None,
) -> Chart:
    """One bar per day, stacked by series (e.g. requests per day by protocol); ``colours`` fixes some series'."""
    names = list(series)
    totals = [sum(values[n] for values in series.values()) for n in range(len(days))]
    top = nice_ceiling(max(totals, default=0))
    legend = names if len(names) > 1 else []
    chart, plot_top, plot_bottom, slot = frame(title, description, days, legend, top, slug, colours)
    scale = (plot_bottom - plot_top) / top
    width = max(1.0, slot * 0.7)
    for n, day in enumerate(days):
        y = plot_bottom
        for index, name in enumerate(names):
            value = series[name][n]
            if not value:
                continue
            height = value * scale
            y -= height
            chart.bars.append(
                Bar(
                    x=round(LEFT + slot * n + (slot - width) / 2, 1),
                    y=round(y, 1),
                    width=round(width, 1),
                    height=round(height, 1),
                    colour=colour_of(index, name, colours),
                    label=f"{day.isoformat()}, {name}: {short_number(value)}"
                    if len(names) > 1
                    else f"{day.isoformat()}: {short_number(value)}",
                )
            )
    chart.headers = ["day", *names, "total"] if len(names) > 1 else ["day", title]
    chart.rows = [
        [day.isoformat(), *[series[name][n] for name in names], *([totals[n]] if len(names) > 1 else [])]
        for n, day in enumerate(days)
    ]
    return chart


def lines(
    title: str,
    days: Sequence[datetime.date],
    series: dict[str, Sequence[float | None]],
    description: str = "",
    slug: str = "",
    unit: str = "",
) -> Chart:
    """One line per series over the days; None leaves a gap in the line (no data that day)."""
    names = list(series)
    top = nice_ceiling(max((v for values in series.values() for v in values if v is not None), default=0))
    chart, plot_top, plot_bottom, slot = frame(title, description, days, names, top, slug)
    scale = (plot_bottom - plot_top) / top
    for index, name in enumerate(names):
        points, dots = [], []
        for n, value in enumerate(series[name]):
            if value is None:
                continue
            x, y = round(LEFT + slot * (n + 0.5), 1), round(plot_bottom - value * scale, 1)
            points.append(f"{x},{y}")
            dots.append((x, y, f"{days[n].isoformat()}, {name}: {short_number(value)}{unit}"))
        chart.lines.append(Line(" ".join(points), colour_of(index), name, dots))
    chart.headers = ["day", *names]
    chart.rows = [
        [day.isoformat(), *["-" if series[name][n] is None else series[name][n] for name in names]]
        for n, day in enumerate(days)
    ]
    return chart
