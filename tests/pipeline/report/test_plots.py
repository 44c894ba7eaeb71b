"""pipeline/report/plots.py: every plot is a well-formed SVG image whose marks stand for
the data it was given."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from pipeline.report import plots
from pipeline.report.read import Column

SVG = "{http://www.w3.org/2000/svg}"
ROC = [(0.0, 0.0), (0.2, 0.7), (1.0, 1.0)]


def _svg(uri: str) -> ET.Element:
    prefix = "data:image/svg+xml;base64,"
    assert uri.startswith(prefix)
    return ET.fromstring(base64.b64decode(uri[len(prefix) :]))


def _marks(root: ET.Element, kind: str) -> list[ET.Element]:
    return [element for element in root.iter() if element.get("class") == kind]


def _texts(root: ET.Element) -> list[str]:
    return [element.text for element in root.iter(f"{SVG}text")]


def _height(bar: ET.Element) -> float:
    return float(bar.get("height"))


def _width(bar: ET.Element) -> float:
    return float(bar.get("width"))


COMPONENTS = [
    SimpleNamespace(node_id="CsvExampleGen", state="complete", started=100.0, finished=102.0),
    SimpleNamespace(node_id="Transform", state="cached", started=102.0, finished=102.0),
    SimpleNamespace(node_id="Trainer", state="FAILED", started=102.5, finished=108.5),
]
TEXT = {
    "train": Column("payment_type", "text", 10, 0.0, top_values=[("Cash", 6.0), ("Card", 3.0), ("<none>", 1.0)]),
    "eval": Column("payment_type", "text", 4, 0.0, top_values=[("Card", 3.0), ("Cash", 1.0)]),
}
NUMBERS = {
    "train": Column("fare", "number", 10, 0.0, quantiles=[(0.0, 4.0, 5.0), (4.0, 12.0, 4.0), (12.0, 700.0, 1.0)]),
    "eval": Column("fare", "number", 5, 0.0, quantiles=[(1.0, 5.0, 3.0), (5.0, 9.0, 2.0)]),
}

EVERY_PLOT = {
    "timeline": lambda: plots.timeline(COMPONENTS),
    "text": lambda: plots.distribution(TEXT),
    "numbers": lambda: plots.distribution(NUMBERS),
    "curve": lambda: plots.curve("auc", {"train": [(0, 0.8), (1, 0.9)], "validation": [(0, 0.82), (1, 0.85)]}),
    "roc": lambda: plots.roc(ROC),
    "calibration": lambda: plots.calibration([(0.1, 0.05, 4000.0), (0.5, 0.6, 1000.0), (0.9, 0.95, 100.0)]),
    "confusion": lambda: plots.confusion({"tn": 50.0, "fp": 5.0, "fn": 10.0, "tp": 35.0, "threshold": 0.5}),
}


@pytest.mark.parametrize("draw", EVERY_PLOT.values(), ids=EVERY_PLOT.keys())
def test_every_plot_is_an_svg_image_with_a_size(draw):
    root = _svg(draw())
    assert root.tag == f"{SVG}svg"
    assert int(root.get("width")) >= 200 and int(root.get("height")) >= 100


def test_the_timeline_has_a_bar_per_component_as_long_as_it_ran():
    root = _svg(plots.timeline(COMPONENTS))
    bars = _marks(root, "bar")
    # Drawn bottom-up: the last component first; an instant one still shows a sliver.
    assert [bar.get("fill") for bar in bars] == [plots.STATE_COLOURS[s] for s in ("FAILED", "cached", "complete")]
    assert _width(bars[0]) / _width(bars[2]) == pytest.approx(6.0 / 2.0, rel=0.02)
    assert 0 < _width(bars[1]) < _width(bars[2]) / 10
    assert {"CsvExampleGen", "Transform", "Trainer", "seconds since the run started"} <= set(_texts(root))


def test_text_columns_show_each_splits_share_of_the_first_splits_top_values():
    root = _svg(plots.distribution(TEXT))
    bars = _marks(root, "bar")
    eval_bars = [bar for bar in bars if bar.get("fill") == plots.SPLIT_COLOURS["eval"]]
    train_bars = [bar for bar in bars if bar.get("fill") == plots.SPLIT_COLOURS["train"]]
    # The first split (eval) orders the values: Card, Cash.
    assert [_height(bar) for bar in train_bars] == pytest.approx(
        [_height(train_bars[1]) * 0.3 / 0.6, _height(train_bars[1])], rel=0.01
    )
    assert _height(eval_bars[0]) / _height(eval_bars[1]) == pytest.approx((3 / 4) / (1 / 4), rel=0.01)
    assert {"Card", "Cash", "eval", "train", "share of rows"} <= set(_texts(root))


def test_number_columns_are_drawn_on_buckets_every_split_shares():
    root = _svg(plots.distribution(NUMBERS))
    boundaries = plots.shared_boundaries(NUMBERS)
    bars = _marks(root, "bar")
    assert len(bars) == 2 * (len(boundaries) + 1)
    for split in NUMBERS:
        counts = plots._counts(NUMBERS[split].quantiles, boundaries)
        heights = [_height(bar) for bar in bars if bar.get("fill") == plots.SPLIT_COLOURS[split]]
        tallest = max(range(len(counts)), key=counts.__getitem__)
        assert heights == pytest.approx([heights[tallest] * c / counts[tallest] for c in counts], abs=0.15)
    assert f"<{boundaries[0]:.4g}" in _texts(root) and f">{boundaries[-1]:.4g}" in _texts(root)


def test_a_curve_is_a_line_with_a_dot_per_epoch_for_each_phase():
    root = _svg(plots.curve("auc", {"train": [(0, 0.8), (1, 0.9), (2, 0.95)], "validation": [(0, 0.82)]}))
    lines = _marks(root, "line")
    assert [len(line.get("points").split()) for line in lines] == [3, 1]
    assert len(_marks(root, "point")) == 4
    ys = [float(point.split(",")[1]) for point in lines[0].get("points").split()]
    assert ys[0] > ys[1] > ys[2]  # rising AUC: upwards on the page
    assert {"1", "2", "3", "epoch", "auc"} <= set(_texts(root))


def test_the_roc_curve_runs_from_corner_to_corner_beside_the_diagonal():
    root = _svg(plots.roc(ROC))
    diagonal, curve = _marks(root, "line")
    assert diagonal.get("stroke-dasharray")
    points = curve.get("points").split()
    assert points[0] == diagonal.get("points").split()[0] and points[-1] == diagonal.get("points").split()[-1]


def test_calibration_dots_grow_with_their_examples():
    root = _svg(plots.calibration([(0.1, 0.05, 4000.0), (0.5, 0.6, 1000.0), (0.9, 0.95, 100.0)]))
    radii = [float(point.get("r")) for point in _marks(root, "point")]
    assert radii[0] > radii[1] > radii[2]


def test_the_confusion_matrix_shades_cells_by_count_and_prints_them():
    root = _svg(plots.confusion({"tn": 50.0, "fp": 5.0, "fn": 10.0, "tp": 35.0, "threshold": 0.5}))
    cells = _marks(root, "cell")
    assert [cell.get("fill") for cell in cells][0] == plots._shade(1.0)
    assert len({cell.get("fill") for cell in cells}) == 4
    assert {"50", "5", "10", "35", "threshold 0.50", "predicted 1", "actual 0"} <= set(_texts(root))


def test_shades_run_from_the_lightest_to_the_darkest_colour():
    assert plots._shade(0.0) == "#{:02x}{:02x}{:02x}".format(*plots.LIGHTEST)
    assert plots._shade(1.0) == "#{:02x}{:02x}{:02x}".format(*plots.DARKEST)
    assert plots._shade(2.0) == plots._shade(1.0)


def test_text_in_a_plot_is_escaped():
    column = Column("company", "text", 2, 0.0, top_values=[("A & <B>", 2.0)])
    assert "A & <B>" in _texts(_svg(plots.distribution({"train": column})))
