"""The dashboards' SVG charts and the fertility page's arithmetic: scales, ticks, escaping, regressions."""

import itertools
import math
import xml.etree.ElementTree as ET

import pytest

from service.web.charts import (
    CHAR_WIDTH,
    FONT_SIZE,
    NARROW,
    PALETTE,
    WIDE,
    Axis,
    Bar,
    Scale,
    Series,
    Style,
    bar_chart,
    line_chart,
    linear_domain,
    log_domain,
    nice_step,
    tick_label,
)
from service.web.fertility import compared_versions, count, heat_step, premium_groups, regressions, trend_series

SVG = "{http://www.w3.org/2000/svg}"


def parse(markup, size: str = "wide") -> ET.Element:
    """One of a chart's two drawings (the box holds one for wide boxes and one for phones)."""
    box = ET.fromstring(str(markup))
    return next(svg for svg in box.iter(f"{SVG}svg") if f"chart-{size}" in svg.get("class", "").split())


@pytest.mark.parametrize(("span", "step"), [(10, 2), (1, 0.2), (0.37, 0.1), (730, 200), (5, 1)])
def test_nice_steps_are_one_two_or_five_times_a_power_of_ten(span, step):
    assert nice_step(span) == pytest.approx(step)


def test_linear_domain_starts_and_ends_on_ticks_around_the_data():
    lo, hi, ticks = linear_domain(1.23, 2.87)
    assert lo <= 1.23 and hi >= 2.87 and ticks[0] == lo and ticks[-1] == hi
    assert all(b > a for a, b in itertools.pairwise(ticks))
    lo, hi, _ = linear_domain(2.0, 2.0)  # one value still gets a visible range
    assert lo < 2.0 < hi


def test_integer_axes_tick_whole_numbers_only():
    assert all(float(t).is_integer() for t in linear_domain(1, 2, integer=True)[2])


def test_log_domain_covers_decades_or_fits_a_narrow_range():
    lo, hi, ticks = log_domain(3, 4500)
    assert (lo, hi) == (1, 10_000) and ticks == [1, 10, 100, 1000, 10_000]
    lo, hi, ticks = log_domain(1000, 1500)  # within one decade: the data itself, ticked at both ends
    assert lo < 1000 and hi > 1500 and len(ticks) >= 2 and all(lo <= t <= hi for t in ticks)


def test_scales_map_ends_to_pixels_and_log_scales_evenly_per_decade():
    assert Scale(0, 10, 100, 300)(5) == 200
    log = Scale(1, 100, 0, 200, log=True)
    assert (log(1), log(10), log(100)) == (0, 100, 200)


@pytest.mark.parametrize(("value", "label"), [(1000, "1k"), (1500, "1.5k"), (2_000_000, "2M"), (0.5, "0.5"), (12, "12")])
def test_tick_labels_are_short(value, label):
    assert tick_label(value) == label


def test_line_chart_is_valid_svg_with_one_polyline_per_series_and_escaped_labels():
    chart = line_chart([Series("<b>news</b> & co", [(1, 1.5), (2, 1.4)]), Series("code", [(1, 2.0), (2, 2.2)], frozenset({1}))],
                       Axis("version", integer=True), Axis("fertility"), title="t <x>", chart_id="c")
    box = ET.fromstring(str(chart))
    assert box.get("id") == "c" and len(box) == 2  # a drawing for wide boxes, one for phones
    root = parse(chart)
    assert root.get("role") == "img" and root.find(f"{SVG}title").text == "t <x>"
    assert root.get("viewBox") == f"0 0 {WIDE} {root.get('height')}" and parse(chart, "narrow").get("width") == str(NARROW)
    assert len(root.findall(f"{SVG}polyline")) == 2
    assert "<b>" not in str(chart) and "&lt;b&gt;news&lt;/b&gt; &amp; co" in str(chart)
    rings = [c for c in root.iter(f"{SVG}circle") if c.get("r") == "8"]
    assert len(rings) == 1  # the flagged point
    assert "style=" not in str(chart)  # presentation attributes only: the pages' CSP forbids inline styles


def test_log_axes_drop_points_they_cannot_place():
    root = parse(line_chart([Series("zipf", [(0, 5), (1, 100), (10, 10), (100, -1), (1000, 1)])],
                            Axis("rank", log=True), Axis("frequency", log=True), title="z", chart_id="z"))
    assert len(root.find(f"{SVG}polyline").get("points").split()) == 3


def test_a_chart_without_data_says_so():
    assert "No data yet" in str(line_chart([Series("a", [])], Axis("x"), Axis("y"), title="t", chart_id="e"))
    assert "No data yet" in str(bar_chart([], value_label="v", title="t", chart_id="b"))


def test_bar_chart_draws_a_bar_per_subject_with_its_value_and_the_reference_line():
    chart = bar_chart([("deu_Latn", [Bar("v1", 1.2, "1.2k tokens"), Bar("gpt2", 1.6)]), ("eng_Latn", [("v1", 1.0)])],
                      value_label="premium", title="p", chart_id="p", reference=1.0)
    for size in ("wide", "narrow"):
        root = parse(chart, size)
        widths = [float(r.get("width")) for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
        assert len(widths) == 3 and widths[1] > widths[0] > 0
        assert any(line.get("stroke-dasharray") == "4 3" for line in root.iter(f"{SVG}line"))
        texts = [t.text for t in root.iter(f"{SVG}text")]
        assert "1.20 · 1.2k tokens" in texts and "1.60" in texts  # every bar says its value, and its tokens when given
        assert [t.text for t in root.iter(f"{SVG}text") if t.text in ("v1", "gpt2")] == ["v1", "gpt2"]  # the legend


def test_no_two_series_look_alike_past_the_palette():
    styles = [Style.of(i) for i in range(2 * len(PALETTE))]
    assert len(set(styles)) == len(styles)
    bars = [(f"s{i}", float(i + 1)) for i in range(len(PALETTE) + 2)]
    root = parse(bar_chart([("deu", bars)], value_label="v", title="t", chart_id="many"))
    fills = [r.get("fill") for r in root.iter(f"{SVG}rect") if r.get("data-subject")]
    assert len(set(fills)) == len(fills)
    assert fills[len(PALETTE)] == "url(#many-wide-h8)" and root.find(f".//{SVG}pattern[@id='many-wide-h8']") is not None
    lines = [Series(f"s{i}", [(1, i), (2, i + 1)]) for i in range(len(PALETTE) + 1)]
    polylines = list(parse(line_chart(lines, Axis("x"), Axis("y"), title="t", chart_id="l")).iter(f"{SVG}polyline"))
    looks = {(p.get("stroke"), p.get("stroke-dasharray")) for p in polylines}
    assert len(looks) == len(polylines)


def test_text_stays_inside_each_drawing():
    # Labels are laid out with CHAR_WIDTH per character: a long category, subject and value still fit.
    long = "a-tokenizer-with-a-long-name v12 (parity)"
    chart = bar_chart([("hin_Deva · flores (corpus-level)", [Bar(long, 7.23, "47.4k tokens"), Bar("gpt2", 0.5)])],
                      value_label="premium (tokens / tokens of the pivot language)", title="t", chart_id="b", reference=1.0)
    for size, width in (("wide", WIDE), ("narrow", NARROW)):
        for text in parse(chart, size).iter(f"{SVG}text"):
            x, label = float(text.get("x")), text.text or ""  # a cut label's <title> holds it whole, not drawn
            extent = len(label) * CHAR_WIDTH
            start = x - extent / 2 if text.get("text-anchor") == "middle" else x - extent if text.get("text-anchor") == "end" else x
            assert start >= 0 and start + extent <= width + 1, (size, label)
    assert FONT_SIZE * 330 / NARROW >= 11  # on a 390 px phone the box is about 330 px wide


def test_heat_steps_span_the_scale():
    assert heat_step(1.0, (1.0, 3.0)) == 0 and heat_step(3.0, (1.0, 3.0)) == 7 and heat_step(2.0, (1.0, 3.0)) == 4
    assert heat_step(2.0, (2.0, 2.0)) == 0


def test_regressions_flag_versions_worse_than_the_one_before():
    assert regressions([2.0, 1.8, 1.9, 1.9, 2.5]) == frozenset({2, 4})
    assert regressions([2.0, 2.001]) == frozenset()  # within the tolerance


def row(kind, name, version, domains, premium=None):
    return {"kind": kind, "name": name, "version": version, "label": f"{name} v{version}" if version else name,
            "domains": {d: {"fertility": f} for d, f in domains.items()}, "premium": premium or {}}


def test_trend_series_follow_one_name_in_version_order():
    rows = [row("version", "a", 2, {"news": 1.5, "code": 2.5}), row("version", "a", 1, {"news": 1.4}),
            row("version", "b", 1, {"news": 9.0}), row("reference", "gpt2", None, {"news": 1.2})]
    series = {s.label: s for s in trend_series(rows, "a")}
    assert series["news"].points == [(1, 1.4), (2, 1.5)] and series["news"].marked == frozenset({1})
    assert series["code"].points == [(2, 2.5)]


def test_premium_groups_name_the_group_only_when_there_are_several():
    one = [row("version", "a", 1, {}, {"g": {"deu": 1.3, "eng": 1.0}})]
    assert premium_groups(one) == [("deu", [Bar("a v1", 1.3)]), ("eng", [Bar("a v1", 1.0)])]
    two = [row("version", "a", 1, {}, {"g": {"deu": 1.3}, "h": {"deu": 1.1}})]
    assert [label for label, _ in premium_groups(two)] == ["deu · g", "deu · h"]


def test_premium_bars_carry_their_tokens_and_a_corpus_level_premium_says_so():
    detailed = row("version", "a", 1, {}, {"g": {"deu": 1.3, "fra": 0.7}})
    detailed["premium_detail"] = {"g": {"deu": {"tokens": 1300, "measure": "line-aligned"},
                                        "fra": {"tokens": 22_348, "measure": "corpus-level"}}}
    assert premium_groups([detailed]) == [("deu", [Bar("a v1", 1.3, "1.3k tokens")]),
                                          ("fra (corpus-level)", [Bar("a v1", 0.7, "22.3k tokens")])]
    assert (count(950), count(1_250_000)) == ("950", "1.2M")


def test_a_trend_needs_two_versions():
    single = trend_series([row("version", "a", 1, {"news": 1.5, "code": 2.0})], "a")
    assert compared_versions(single) == 1
    assert compared_versions(trend_series([row("version", "a", 1, {"news": 1.5}), row("version", "a", 2, {"news": 1.4})], "a")) == 2


def test_charts_have_finite_coordinates():
    root = parse(line_chart([Series("a", [(1, 1.0)])], Axis("x"), Axis("y"), title="t", chart_id="one"))
    for circle in root.iter(f"{SVG}circle"):
        assert math.isfinite(float(circle.get("cx"))) and math.isfinite(float(circle.get("cy")))
