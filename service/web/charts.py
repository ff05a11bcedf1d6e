"""Charts as inline SVG, rendered on the server: line charts (linear or log axes) and bar charts.

Every chart is plain SVG markup with a <title> and <desc>, drawn with presentation
attributes only (no style attributes, no script), so it renders with JavaScript off and
under a strict Content-Security-Policy. Colours come from the Okabe-Ito palette, which
stays distinguishable for the common colour-vision deficiencies.

Deliberately not handled: interactivity (zoom, hover), dates on axes, stacked bars, and
legends that wrap: a chart with many series gets a tall legend instead.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999999")
MARK = "#C0392B"  # regressions and other points that must stand out
FONT = 'font-family="system-ui, sans-serif" font-size="12"'


@dataclass(frozen=True)
class Series:
    """One line: its label, (x, y) points, and the indices of points to flag."""

    label: str
    points: Sequence[tuple[float, float]]
    marked: frozenset[int] = frozenset()
    dashed: bool = False


@dataclass(frozen=True)
class Axis:
    label: str
    log: bool = False
    integer: bool = False


@dataclass(frozen=True)
class Frame:
    """The canvas: a plot area with room for tick labels, and legend rows below it."""

    width: int = 640
    plot_height: int = 320
    legend_rows: int = 0
    left: int = 64
    right: int = 16
    top: int = 16
    bottom: int = 48

    @property
    def height(self) -> int:
        return self.plot_height + 20 * self.legend_rows

    @property
    def x0(self) -> float:
        return self.left

    @property
    def x1(self) -> float:
        return self.width - self.right

    @property
    def y0(self) -> float:
        return self.plot_height - self.bottom

    @property
    def y1(self) -> float:
        return self.top


class Scale:
    """Maps data values onto pixels, linearly or in log10."""

    def __init__(self, lo: float, hi: float, start: float, end: float, log: bool = False) -> None:
        self.log = log
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        self.start, self.end = start, end

    def __call__(self, value: float) -> float:
        v = math.log10(value) if self.log else value
        share = (v - self.lo) / (self.hi - self.lo) if self.hi != self.lo else 0.5
        return round(self.start + share * (self.end - self.start), 2)


def nice_step(span: float, target: int = 5) -> float:
    """A step of 1, 2 or 5 times a power of ten giving about `target` intervals."""
    raw = span / max(target, 1)
    power = 10 ** math.floor(math.log10(raw))
    for multiple in (1, 2, 5, 10):
        if raw <= multiple * power:
            return multiple * power
    return 10 * power


def linear_domain(lo: float, hi: float, integer: bool = False) -> tuple[float, float, list[float]]:
    """A padded domain around [lo, hi] that starts and ends on ticks, and those ticks."""
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo)
    if integer:
        step = max(1.0, round(step))
    start = math.floor(lo / step) * step
    end = math.ceil(hi / step) * step
    count = round((end - start) / step)
    return start, end, [round(start + i * step, 10) for i in range(count + 1)]


def log_domain(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """A log domain around [lo, hi] (lo > 0): whole decades, or the data itself when it spans one decade or less."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if last - first > 1:
        multiples = (1, 2, 5) if last - first <= 2 else (1,)
        ticks = [m * 10.0**d for d in range(first, last + 1) for m in multiples if m * 10.0**d <= 10.0**last]
        return 10.0**first, 10.0**last, ticks
    pad = max(0.05 * (math.log10(hi) - math.log10(lo)), 0.02)
    start, end = 10 ** (math.log10(lo) - pad), 10 ** (math.log10(hi) + pad)
    ticks = [m * 10.0**d for d in range(first - 1, last + 1) for m in (1, 2, 5) if start <= m * 10.0**d <= end]
    if len(ticks) < 2:
        ticks = sorted(set(ticks) | {lo, hi})
    return start, end, ticks


def tick_label(value: float) -> str:
    """1, 2.5, 10k, 1.5M: short labels for axis ticks."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def line_chart(series: Sequence[Series], x: Axis, y: Axis, *, title: str, chart_id: str,
               width: int = 640, height: int = 320) -> Markup:
    """An SVG line chart with markers; flagged points get a red ring."""
    drawn = [Series(s.label, _plottable(s.points, x, y), s.marked, s.dashed) for s in series]
    points = [p for s in drawn for p in s.points]
    if not points:
        return empty_chart(title, chart_id, width)
    frame = Frame(width=width, plot_height=height, legend_rows=_legend_rows(len(drawn)))
    sx, x_ticks = _scale([p[0] for p in points], x, frame.x0, frame.x1)
    sy, y_ticks = _scale([p[1] for p in points], y, frame.y0, frame.y1)
    parts = _axes(frame, sx, sy, x_ticks, y_ticks, x, y)
    radius = 3 if len(points) <= 60 else 1.6
    for index, line in enumerate(drawn):
        colour = PALETTE[index % len(PALETTE)]
        coords = " ".join(f"{sx(px)},{sy(py)}" for px, py in line.points)
        dash = ' stroke-dasharray="6 4"' if line.dashed else ""
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for i, (px, py) in enumerate(line.points):
            if not line.dashed:
                parts.append(f'<circle cx="{sx(px)}" cy="{sy(py)}" r="{radius}" fill="{colour}">'
                             f'<title>{escape(line.label)}: {tick_label(px)}, {py:.4g}</title></circle>')
            if i in line.marked:
                parts.append(f'<circle cx="{sx(px)}" cy="{sy(py)}" r="8" fill="none" stroke="{MARK}" stroke-width="2.5"/>')
    parts += _legend([(s.label, PALETTE[i % len(PALETTE)], s.dashed) for i, s in enumerate(drawn)], frame)
    return _svg(parts, title, chart_id, frame)


BAR_WIDTH = 400  # bar charts are drawn for a phone's width: at 390 px their 12 px text stays about 10 px
BAR_LEGEND_COLUMNS = 2
LEGEND_CHARS = 26  # longer legend labels are cut (the bars' tooltips keep the whole name)


def bar_chart(groups: Sequence[tuple[str, Sequence[tuple[str, float]]]], *, value_label: str, title: str,
              chart_id: str, width: int = BAR_WIDTH, reference: float | None = None) -> Markup:
    """Horizontal bars, one group per category (named above its bars) and one bar per subject,
    with an optional reference line."""
    subjects = list(dict.fromkeys(name for _, bars in groups for name, _ in bars))
    values = [v for _, bars in groups for _, v in bars]
    if not values:
        return empty_chart(title, chart_id, width)
    bar, gap, label = 14, 8, 16
    plot = sum(label + len(bars) * bar + gap for _, bars in groups)
    frame = Frame(width=width, plot_height=plot + 16 + 48, legend_rows=_legend_rows(len(subjects), BAR_LEGEND_COLUMNS),
                  left=16, right=24)
    axis = Axis(value_label)
    sx, ticks = _scale([0.0, max(values + ([reference] if reference else []))], axis, frame.x0, frame.x1)
    parts = _x_axis(frame, sx, ticks, axis)
    top = frame.y1
    for category, bars in groups:
        parts.append(f'<text x="{frame.x0}" y="{top + 12}" font-weight="600" {FONT}>{escape(category)}</text>')
        top += label
        for name, value in bars:
            colour = PALETTE[subjects.index(name) % len(PALETTE)]
            parts.append(f'<rect x="{frame.x0}" y="{top}" width="{max(sx(value) - frame.x0, 1):.2f}" height="{bar - 2}" '
                         f'fill="{colour}"><title>{escape(category)}, {escape(name)}: {value:.3f}</title></rect>')
            top += bar
        top += gap
    if reference is not None:
        parts.append(f'<line x1="{sx(reference)}" y1="{frame.y1}" x2="{sx(reference)}" y2="{frame.y0}" '
                     f'stroke="#333" stroke-dasharray="4 3"/>')
    parts += _legend([(s, PALETTE[i % len(PALETTE)], False) for i, s in enumerate(subjects)], frame, BAR_LEGEND_COLUMNS,
                     LEGEND_CHARS)
    return _svg(parts, title, chart_id, frame, "chart bars")


def empty_chart(title: str, chart_id: str, width: int = 640, message: str = "No data yet") -> Markup:
    """A placeholder of the same width, for a chart with nothing to draw (yet, or ever: say why in `message`)."""
    frame = Frame(width=width, plot_height=60)
    parts = [f'<text x="{width / 2}" y="34" text-anchor="middle" fill="#666" {FONT}>{escape(message)}</text>']
    return _svg(parts, title, chart_id, frame)


def _plottable(points: Sequence[tuple[float, float]], x: Axis, y: Axis) -> list[tuple[float, float]]:
    # Log axes cannot place zero or negative values; finite values only.
    return [(float(px), float(py)) for px, py in points
            if math.isfinite(px) and math.isfinite(py) and (not x.log or px > 0) and (not y.log or py > 0)]


def _scale(values: list[float], axis: Axis, start: float, end: float) -> tuple[Scale, list[float]]:
    if axis.log:
        lo, hi, ticks = log_domain(min(values), max(values))
    else:
        lo, hi, ticks = linear_domain(min(values), max(values), axis.integer)
    return Scale(lo, hi, start, end, axis.log), ticks


def _legend_rows(entries: int, columns: int = 3) -> int:
    return math.ceil(entries / columns)


def _x_axis(frame: Frame, sx: Scale, ticks: list[float], x: Axis) -> list[str]:
    """Vertical grid lines with their tick labels, and the axis label under the plot."""
    parts = [f'<line x1="{sx(t)}" y1="{frame.y1}" x2="{sx(t)}" y2="{frame.y0}" stroke="#e3e3e3"/>'
             f'<text x="{sx(t)}" y="{frame.y0 + 16}" text-anchor="middle" {FONT}>{tick_label(t)}</text>'
             for t in ticks]
    parts.append(f'<text x="{(frame.x0 + frame.x1) / 2}" y="{frame.y0 + 36}" text-anchor="middle" {FONT}>'
                 f'{escape(x.label)}{" (log scale)" if x.log else ""}</text>')
    return parts


def _axes(frame: Frame, sx: Scale, sy: Scale, x_ticks: list[float], y_ticks: list[float], x: Axis, y: Axis) -> list[str]:
    parts = _x_axis(frame, sx, x_ticks, x)
    for t in y_ticks:
        parts.append(f'<line x1="{frame.x0}" y1="{sy(t)}" x2="{frame.x1}" y2="{sy(t)}" stroke="#e3e3e3"/>'
                     f'<text x="{frame.x0 - 6}" y="{sy(t) + 4}" text-anchor="end" {FONT}>{tick_label(t)}</text>')
    parts.append(f'<rect x="{frame.x0}" y="{frame.y1}" width="{frame.x1 - frame.x0}" height="{frame.y0 - frame.y1}" '
                 f'fill="none" stroke="#999"/>')
    middle = (frame.y1 + frame.y0) / 2
    parts.append(f'<text x="14" y="{middle}" text-anchor="middle" transform="rotate(-90 14 {middle})" {FONT}>'
                 f'{escape(y.label)}{" (log scale)" if y.log else ""}</text>')
    return parts


def _legend(entries: list[tuple[str, str, bool]], frame: Frame, columns: int = 3, cut: int | None = None) -> list[str]:
    parts = []
    column = (frame.width - 2 * frame.right) / columns
    for i, (label, colour, dashed) in enumerate(entries):
        lx = frame.right + (i % columns) * column
        ly = frame.plot_height + 4 + (i // columns) * 20
        if cut and len(label) > cut:
            label = label[:cut - 1] + "…"
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        parts.append(f'<line x1="{lx:.1f}" y1="{ly}" x2="{lx + 18:.1f}" y2="{ly}" stroke="{colour}" stroke-width="3"{dash}/>'
                     f'<text x="{lx + 24:.1f}" y="{ly + 4}" {FONT}>{escape(label)}</text>')
    return parts


def _svg(parts: list[str], title: str, chart_id: str, frame: Frame, css_class: str = "chart") -> Markup:
    head = (f'<svg class="{css_class}" role="img" aria-labelledby="{chart_id}-title" viewBox="0 0 {frame.width} {frame.height}" '
            f'xmlns="http://www.w3.org/2000/svg" id="{chart_id}"><title id="{chart_id}-title">{escape(title)}</title>')
    return Markup(head + "".join(parts) + "</svg>")
