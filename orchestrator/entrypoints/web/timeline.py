"""The saga timeline's layout: intervals on rows, drawn to scale, with a broken axis. Pure: no I/O.

`layout(intervals, width=…)` places each `Interval` (a row label, a kind,
start and end in milliseconds on any common clock) as a `Bar` in pixels.
Time is drawn to one scale, except that a long idle stretch (typically the
wait for a person's approval) is cut out of the axis and drawn as a fixed
`BREAK_PX`-wide break that names how long it was, so the milliseconds of
the agents' work are not squeezed to nothing beside minutes of waiting.

Which stretches are cut: the gaps between the busy clusters, where busy means
covered by an interval that is not `elastic` (waits are elastic: they may be
drawn across a break). The longest gap is cut while it is longer than
`BREAK_RATIO` of the time still shown and longer than `MIN_BREAK_MS`. An
elastic bar that spans a break is drawn across it; its title keeps its true
duration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

BREAK_RATIO: Final = 0.2
MIN_BREAK_MS: Final = 200.0
BREAK_PX: Final = 44.0
LABEL_PX: Final = 190.0
ROW_PX: Final = 20.0
BAR_PX: Final = 12.0
AXIS_PX: Final = 34.0
MIN_BAR_PX: Final = 2.0
PAD_PX: Final = 12.0


@dataclass(frozen=True)
class Interval:
    row: str
    kind: str  # proposal, authorization, send, ack, queue, approval, ...
    start: float  # ms
    end: float  # ms, >= start
    title: str = ""
    elastic: bool = False  # a wait: may be drawn across a break


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str
    title: str
    row: int


@dataclass(frozen=True)
class Break:
    x: float  # left edge
    width: float
    hidden_ms: float
    label: str


@dataclass(frozen=True)
class Tick:
    x: float
    label: str
    anchor: str = "middle"  # SVG text-anchor: start, middle or end


@dataclass(frozen=True)
class Layout:
    width: float
    height: float
    plot_left: float
    rows: tuple[tuple[str, float], ...]  # label, baseline y
    bars: tuple[Bar, ...]
    breaks: tuple[Break, ...]
    ticks: tuple[Tick, ...]
    total_ms: float


def human(ms: float) -> str:
    """A duration for people: `0.4 ms`, `120 ms`, `2.4 s`, `3 min 12 s`, `2 h 5 min`."""
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {sec} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def cut_gaps(intervals: list[Interval]) -> list[tuple[float, float]]:
    """The idle stretches to cut out of the axis, in time order (see the module docstring)."""
    if not intervals:
        return []
    busy = [(i.start, i.end) for i in intervals if not i.elastic] or [(i.start, i.end) for i in intervals]
    clusters = _merged(busy)
    first = min(i.start for i in intervals)
    last = max(i.end for i in intervals)
    gaps = [(a[1], b[0]) for a, b in zip(clusters, clusters[1:], strict=False)]
    if clusters[-1][1] < last:  # an elastic wait still running after the last work
        gaps.append((clusters[-1][1], last))
    if first < clusters[0][0]:
        gaps.append((first, clusters[0][0]))
    cut: list[tuple[float, float]] = []
    remaining = sorted(gaps, key=lambda g: g[1] - g[0], reverse=True)
    for gap in remaining:
        shown = (last - first) - sum(e - s for s, e in cut)
        length = gap[1] - gap[0]
        if length > MIN_BREAK_MS and length > BREAK_RATIO * shown:
            cut.append(gap)
        else:
            break
    return sorted(cut)


class _Axis:
    """Time to x: one scale, with each cut stretch drawn BREAK_PX wide."""

    def __init__(self, first: float, last: float, cuts: list[tuple[float, float]], left: float, width: float):
        self.first, self.cuts, self.left = first, cuts, left
        shown = (last - first) - sum(e - s for s, e in cuts)
        room = max(width - BREAK_PX * len(cuts), 10.0)
        self.scale = room / shown if shown > 0 else 0.0

    def x(self, t: float) -> float:
        x = self.left
        at = self.first
        for start, end in self.cuts:
            if t <= start:
                break
            x += (start - at) * self.scale
            if t < end:
                return x + BREAK_PX * (t - start) / (end - start)
            x += BREAK_PX
            at = end
        return x + (t - at) * self.scale


def layout(intervals: list[Interval], *, width: float = 960.0) -> Layout:
    """Bars, breaks, ticks and row labels for `intervals` in an SVG `width` pixels wide."""
    rows: list[str] = []
    for interval in intervals:
        if interval.row not in rows:
            rows.append(interval.row)
    height = AXIS_PX + ROW_PX * len(rows) + PAD_PX
    if not intervals:
        return Layout(width, height, LABEL_PX, (), (), (), (), 0.0)
    first = min(i.start for i in intervals)
    last = max(i.end for i in intervals)
    cuts = cut_gaps(intervals)
    plot_width = width - LABEL_PX - PAD_PX
    axis = _Axis(first, last, cuts, LABEL_PX, plot_width)
    bars = []
    for interval in intervals:
        index = rows.index(interval.row)
        x0, x1 = axis.x(interval.start), axis.x(interval.end)
        y = AXIS_PX + index * ROW_PX + (ROW_PX - BAR_PX) / 2
        title = interval.title or f"{interval.kind} {human(interval.end - interval.start)}"
        bars.append(Bar(x0, y, max(x1 - x0, MIN_BAR_PX), BAR_PX, interval.kind, title, index))
    breaks = tuple(Break(axis.x(start), BREAK_PX, end - start, human(end - start)) for start, end in cuts)
    ticks = _ticks(first, last, cuts, axis)
    labelled = tuple((label, AXIS_PX + i * ROW_PX + ROW_PX / 2) for i, label in enumerate(rows))
    return Layout(width, height, LABEL_PX, labelled, tuple(bars), breaks, ticks, last - first)


def _ticks(first: float, last: float, cuts: list[tuple[float, float]], axis: _Axis) -> tuple[Tick, ...]:
    """A tick at each end of every stretch shown, labelled with its offset from the first moment."""
    edges: list[tuple[float, str]] = [(first, "start")]
    for start, end in cuts:
        edges += [(start, "end"), (end, "start")]
    edges.append((last, "end"))
    ticks: list[Tick] = []
    for t, anchor in edges:
        x = axis.x(t)
        clash = ticks and abs(ticks[-1].x - x) < 70 and not (ticks[-1].anchor == "end" and anchor == "start")
        if clash and anchor == "end" and t == last:
            ticks.pop()  # the end of the axis wins over a tick just before it
        elif clash:
            continue
        ticks.append(Tick(x, "+" + human(t - first), anchor))
    return tuple(ticks)


__all__ = ["BREAK_PX", "Bar", "Break", "Interval", "Layout", "Tick", "cut_gaps", "human", "layout"]
