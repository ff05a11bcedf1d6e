"""Charts as inline SVG, rendered on the server: line charts (linear or log axes) and bar charts.

Every chart is plain SVG markup with a <title>, drawn with presentation attributes only (no
style attributes, no script), so it renders with JavaScript off and under a strict
Content-Security-Policy. An SVG scales its text with its width, so each chart is drawn twice,
for a wide box and for a phone's, inside one `div.chart-box` (its id is the chart's): a
container query in app.css shows the drawing whose width is nearest the box's, so that tick
and legend labels stay at 11 px or more on a 390 px phone and at 1280 px alike.

Colours come from the Okabe-Ito palette, which stays distinguishable for the common
colour-vision deficiencies; a ninth series and after take the same colours again, dashed
(lines) or hatched (bars), so no two series of a chart look alike. Every chart with more than
one series has a legend.

Deliberately not handled: interactivity (zoom, hover), dates on axes, stacked bars.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999999")
MARK = "#C0392B"  # regressions and other points that must stand out
FONT_SIZE = 12
FONT = f'font-family="system-ui, sans-serif" font-size="{FONT_SIZE}"'
HALO = 'paint-order="stroke" stroke="#fff" stroke-width="3" stroke-linejoin="round"'  # text legible over lines
CHAR_WIDTH = 7.0  # about how wide a character of FONT is (digits and capitals, bold a little more), to lay out labels
WIDE, NARROW = 600, 340  # the two drawings; app.css switches at 550 px of box (12 px text, drawn at 11 px or more)


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
class Style:
    """How one series is drawn: its colour, and a second look once the palette has gone round."""

    colour: str
    alternate: bool = False  # dashed line, hatched bar

    @classmethod
    def of(cls, index: int) -> "Style":
        return cls(PALETTE[index % len(PALETTE)], bool(index // len(PALETTE) % 2))


@dataclass(frozen=True)
class Frame:
    """The canvas: a plot area with room for tick labels, and legend rows below it."""

    width: int = WIDE
    plot_height: int = 320
    legend_rows: int = 0
    left: int = 64
    right: int = 16
    top: int = 16
    bottom: int = 48

    @property
    def height(self) -> int:
        return self.plot_height + 20 * self.legend_rows + (8 if self.legend_rows else 0)

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
    power: float = 10 ** math.floor(math.log10(raw))  # an int from 1 up, a float below 1
    for multiple in (1, 2, 5, 10):
        if raw <= multiple * power:
            return multiple * power
    return 10 * power


def linear_domain(lo: float, hi: float, integer: bool = False, target: int = 5) -> tuple[float, float, list[float]]:
    """A padded domain around [lo, hi] that starts and ends on ticks, and those ticks."""
    if lo == hi:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    step = nice_step(hi - lo, target)
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


def responsive(chart_id: str, draw: Callable[[int, str], str], css_class: str = "") -> Markup:
    """The chart's box: its drawing for a wide box and its drawing for a phone's (see the module docstring)."""
    return Markup(f'<div class="chart-box{" " + css_class if css_class else ""}" id="{chart_id}">'
                  f'{draw(WIDE, "wide")}{draw(NARROW, "narrow")}</div>')


def line_chart(series: Sequence[Series], x: Axis, y: Axis, *, title: str, chart_id: str) -> Markup:
    """An SVG line chart with markers; flagged points get a red ring."""
    drawn = [Series(s.label, _plottable(s.points, x, y), s.marked, s.dashed) for s in series]
    points = [p for s in drawn for p in s.points]
    if not points:
        return empty_chart(title, chart_id)

    def draw(width: int, size: str) -> str:
        narrow = size == "narrow"
        labels = [s.label for s in drawn]
        columns = legend_columns(labels, width)
        frame = Frame(width=width, plot_height=300 if narrow else 320, left=52 if narrow else 64,
                      legend_rows=_legend_rows(len(drawn), columns) if len(drawn) > 1 else 0)
        ticks = 4 if narrow else 6
        sx, x_ticks = _scale([p[0] for p in points], x, frame.x0, frame.x1, ticks)
        sy, y_ticks = _scale([p[1] for p in points], y, frame.y0, frame.y1, ticks)
        parts = _axes(frame, sx, sy, x_ticks, y_ticks, x, y)
        radius = 3 if len(points) <= 60 else 1.6
        styles = [Style.of(i) for i in range(len(drawn))]
        for line, style in zip(drawn, styles):
            coords = " ".join(f"{sx(px)},{sy(py)}" for px, py in line.points)
            dash = ' stroke-dasharray="6 4"' if line.dashed or style.alternate else ""
            parts.append(f'<polyline points="{coords}" fill="none" stroke="{style.colour}" stroke-width="2"{dash}/>')
            for i, (px, py) in enumerate(line.points):
                if not line.dashed:
                    parts.append(f'<circle cx="{sx(px)}" cy="{sy(py)}" r="{radius}" fill="{style.colour}">'
                                 f'<title>{escape(line.label)}: {tick_label(px)}, {py:.4g}</title></circle>')
                if i in line.marked:
                    parts.append(f'<circle cx="{sx(px)}" cy="{sy(py)}" r="8" fill="none" stroke="{MARK}" stroke-width="2.5"/>')
        if len(drawn) > 1:
            parts += _legend([(s.label, st, s.dashed or st.alternate) for s, st in zip(drawn, styles)], frame, columns)
        return _svg(parts, title, f"{chart_id}-{size}", frame, size)

    return responsive(chart_id, draw)


BAR, BAR_GAP, GROUP_LABEL = 14, 8, 18


@dataclass(frozen=True)
class Bar:
    """One bar: its series (the legend's name), its value, and what to write after it."""

    subject: str
    value: float
    note: str = ""


def bar_chart(groups: Sequence[tuple[str, Sequence[Bar | tuple[str, float]]]], *, value_label: str, title: str,
              chart_id: str, reference: float | None = None) -> Markup:
    """Horizontal bars, one group per category (named above its bars) and one bar per subject,
    each followed by its value (and its note), with an optional reference line."""
    rows = [(category, [b if isinstance(b, Bar) else Bar(*b) for b in bars]) for category, bars in groups]
    subjects = list(dict.fromkeys(b.subject for _, bars in rows for b in bars))
    values = [b.value for _, bars in rows for b in bars]
    if not values:
        return empty_chart(title, chart_id)
    styles = {s: Style.of(i) for i, s in enumerate(subjects)}

    def draw(width: int, size: str) -> str:
        written = max(len(_bar_text(b)) for _, bars in rows for b in bars)
        columns = legend_columns(subjects, width)
        plot = sum(GROUP_LABEL + len(bars) * BAR + BAR_GAP for _, bars in rows)
        frame = Frame(width=width, plot_height=plot + 16 + 48, left=12,
                      right=12 + math.ceil(written * CHAR_WIDTH) + 6,
                      legend_rows=_legend_rows(len(subjects), columns) if len(subjects) > 1 else 0)
        axis = Axis(value_label)
        sx, ticks = _scale([0.0, max(values + ([reference] if reference else []))], axis, frame.x0, frame.x1,
                           4 if size == "narrow" else 6)
        parts = _patterns(chart_id, size, [styles[s] for s in subjects])
        parts += _x_axis(frame, sx, ticks, axis, centre=width / 2)
        if reference is not None:  # under the bars and their values
            parts.append(f'<line x1="{sx(reference)}" y1="{frame.y1}" x2="{sx(reference)}" y2="{frame.y0}" '
                         f'stroke="#333" stroke-dasharray="4 3"/>')
        top = frame.y1
        for category, bars in rows:
            parts.append(f'<text x="{frame.x0}" y="{top + 13}" font-weight="600" {FONT}>{escape(category)}</text>')
            top += GROUP_LABEL
            for bar in bars:
                end = max(sx(bar.value), frame.x0 + 1)
                fill = _fill(chart_id, size, subjects.index(bar.subject), styles[bar.subject])
                parts.append(f'<rect x="{frame.x0}" y="{top}" width="{end - frame.x0:.2f}" height="{BAR - 2}" '
                             f'fill="{fill}" data-subject="{escape(bar.subject)}"><title>{escape(category)}, '
                             f'{escape(bar.subject)}: {escape(_bar_text(bar))}</title></rect>'
                             f'<text x="{end + 4:.2f}" y="{top + BAR - 3}" {HALO} {FONT}>{escape(_bar_text(bar))}</text>')
                top += BAR
            top += BAR_GAP
        if len(subjects) > 1:
            parts += _legend([(s, styles[s], False) for s in subjects], frame, columns,
                             fills=[_fill(chart_id, size, i, styles[s]) for i, s in enumerate(subjects)])
        return _svg(parts, title, f"{chart_id}-{size}", frame, size)

    return responsive(chart_id, draw, "bars")


def _bar_text(bar: Bar) -> str:
    return f"{bar.value:.2f}" + (f" · {bar.note}" if bar.note else "")


def empty_chart(title: str, chart_id: str, message: str = "No data yet") -> Markup:
    """A placeholder in the chart's place, for a chart with nothing to draw (yet, or ever: say why in `message`)."""
    return Markup(f'<div class="chart-box chart-empty" id="{chart_id}" role="img" aria-label="{escape(title)}">'
                  f'<p>{escape(message)}</p></div>')


def legend_columns(labels: Sequence[str], width: int) -> int:
    """As many legend columns as the longest label lets fit across the drawing (one at least)."""
    longest = max((len(label) for label in labels), default=0)
    return max(1, min(3, int((width - 24) // (longest * CHAR_WIDTH + 40))))


def _plottable(points: Sequence[tuple[float, float]], x: Axis, y: Axis) -> list[tuple[float, float]]:
    # Log axes cannot place zero or negative values; finite values only.
    return [(float(px), float(py)) for px, py in points
            if math.isfinite(px) and math.isfinite(py) and (not x.log or px > 0) and (not y.log or py > 0)]


def _scale(values: list[float], axis: Axis, start: float, end: float, ticks: int = 5) -> tuple[Scale, list[float]]:
    if axis.log:
        lo, hi, marks = log_domain(min(values), max(values))
        if len(marks) > ticks + 2:  # a narrow drawing keeps every other decade
            marks = marks[::2]
    else:
        lo, hi, marks = linear_domain(min(values), max(values), axis.integer, ticks)
    return Scale(lo, hi, start, end, axis.log), marks


def _legend_rows(entries: int, columns: int) -> int:
    return math.ceil(entries / columns)


def _x_axis(frame: Frame, sx: Scale, ticks: list[float], x: Axis, centre: float | None = None) -> list[str]:
    """Vertical grid lines with their tick labels, and the axis label under the plot (centred on
    the plot, or on `centre`)."""
    parts = [f'<line x1="{sx(t)}" y1="{frame.y1}" x2="{sx(t)}" y2="{frame.y0}" stroke="#e3e3e3"/>'
             f'<text x="{sx(t)}" y="{frame.y0 + 16}" text-anchor="middle" {FONT}>{tick_label(t)}</text>'
             for t in ticks]
    middle = (frame.x0 + frame.x1) / 2 if centre is None else centre
    parts.append(f'<text x="{middle}" y="{frame.y0 + 36}" text-anchor="middle" {FONT}>'
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


def _legend(entries: list[tuple[str, Style, bool]], frame: Frame, columns: int,
            fills: list[str] | None = None) -> list[str]:
    """A line (or, with `fills`, a swatch) and a label per series, in rows under the plot."""
    parts = []
    column = (frame.width - 24) / columns
    cut = max(8, int((column - 30) / CHAR_WIDTH))
    for i, (label, style, dashed) in enumerate(entries):
        lx = 12 + (i % columns) * column
        ly = frame.plot_height + 8 + (i // columns) * 20
        shown = label if len(label) <= cut else label[:cut - 1] + "…"
        if fills:
            mark = f'<rect x="{lx:.1f}" y="{ly - 6}" width="18" height="12" fill="{fills[i]}"/>'
        else:
            dash = ' stroke-dasharray="6 4"' if dashed else ""
            mark = f'<line x1="{lx:.1f}" y1="{ly}" x2="{lx + 18:.1f}" y2="{ly}" stroke="{style.colour}" stroke-width="3"{dash}/>'
        parts.append(f'<g class="legend-entry">{mark}<text x="{lx + 24:.1f}" y="{ly + 4}" {FONT}>{escape(shown)}'
                     f'{f"<title>{escape(label)}</title>" if shown != label else ""}</text></g>')
    return parts


def _patterns(chart_id: str, size: str, styles: Sequence[Style]) -> list[str]:
    """Hatched fills for the series past the palette's first round (one <pattern> each, ids of this drawing)."""
    defs = [f'<pattern id="{chart_id}-{size}-h{i}" patternUnits="userSpaceOnUse" width="6" height="6" '
            f'patternTransform="rotate(45)"><rect width="6" height="6" fill="{style.colour}"/>'
            f'<line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="3"/></pattern>'
            for i, style in enumerate(styles) if style.alternate]
    return [f"<defs>{''.join(defs)}</defs>"] if defs else []


def _fill(chart_id: str, size: str, index: int, style: Style) -> str:
    return f"url(#{chart_id}-{size}-h{index})" if style.alternate else style.colour


def _svg(parts: list[str], title: str, svg_id: str, frame: Frame, size: str) -> str:
    return (f'<svg class="chart chart-{size}" role="img" aria-labelledby="{svg_id}-title" '
            f'viewBox="0 0 {frame.width} {frame.height}" width="{frame.width}" height="{frame.height}" '
            f'xmlns="http://www.w3.org/2000/svg" id="{svg_id}"><title id="{svg_id}-title">{escape(title)}</title>'
            + "".join(parts) + "</svg>")
