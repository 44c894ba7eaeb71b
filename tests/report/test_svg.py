"""report/svg.py: round ticks covering the data, data mapped into the margins,
well-formed SVG."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from report.svg import Chart, nice_ticks, padded


@pytest.mark.parametrize(
    ("low", "high"), [(0.0, 1.0), (0.0, 0.37), (0.68, 0.97), (-87.7, -87.6), (1.0, 4.0), (0.0, 1561.0), (3.0, 3e6)]
)
def test_ticks_are_round_steps_inside_the_range(low, high):
    ticks = nice_ticks(low, high)
    assert 2 <= len(ticks) <= 11
    assert all(low - 1e-9 <= tick <= high + 1e-9 for tick in ticks)
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1
    (step,) = steps
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 6) in (1.0, 2.0, 5.0)
    # No room for another step on either side.
    assert ticks[0] - step < low - 1e-9 and ticks[-1] + step > high + 1e-9


def test_a_flat_range_has_one_tick_and_bad_ones_are_refused():
    assert nice_ticks(2.0, 2.0) == [2.0]
    with pytest.raises(ValueError, match="finite"):
        nice_ticks(0.0, math.inf)


def test_padding_widens_both_sides_and_opens_a_flat_range():
    assert padded(0.0, 10.0, 0.1) == pytest.approx((-1.0, 11.0))
    assert padded(3.0, 3.0) == (2.5, 3.5)


def test_data_maps_into_the_margins_with_y_upwards():
    chart = Chart(200, 100, (0.0, 10.0), (0.0, 1.0), margins=(20, 10, 5, 15))
    assert (chart.x(0.0), chart.x(10.0), chart.x(5.0)) == (20, 190, 105)
    assert (chart.y(0.0), chart.y(1.0)) == (85, 5)


def test_marks_and_text_make_well_formed_svg():
    chart = Chart(200, 100, (0.0, 10.0), (0.0, 1.0))
    chart.bar(1.0, 2.0, 0.0, 0.5, "#123456")
    chart.line([(0.0, 0.0), (10.0, 1.0)], "#654321", dotted=True, markers=True)
    chart.x_ticks([0.0, 5.0, 10.0], slanted=True)
    chart.y_ticks([0.0, 1.0])
    chart.titles(x="x & y", y="<share>", top="title")
    chart.legend([("train", "#123456")])
    root = ET.fromstring(chart.svg())
    texts = [element.text for element in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"0", "5", "10", "x & y", "<share>", "title", "train"} <= set(texts)
    assert chart.uri().startswith("data:image/svg+xml;base64,")
