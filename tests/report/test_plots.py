"""report/plots.py: every plot is a well-formed SVG image whose marks stand for
the data it was given."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from report import plots
from report.read import ClassConfusion, Column

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

CLASSES = ClassConfusion(
    actual=["north", "south", "west"],
    predicted=["north", "south", "west"],
    counts=[[40.0, 8.0, 2.0], [1.0, 9.0, 0.0], [0.0, 0.0, 5.0]],
)
ACTUAL = [10.0, 12.0, 15.0, 20.0, 31.0]
PREDICTED = [11.0, 12.5, 13.0, 22.0, 27.0]

EVERY_PLOT = {
    "timeline": lambda: plots.timeline(COMPONENTS),
    "text": lambda: plots.distribution(TEXT),
    "numbers": lambda: plots.distribution(NUMBERS),
    "curve": lambda: plots.curve("auc", {"train": [(0, 0.8), (1, 0.9)], "validation": [(0, 0.82), (1, 0.85)]}),
    "roc": lambda: plots.roc(ROC),
    "calibration": lambda: plots.calibration([(0.1, 0.05, 4000.0), (0.5, 0.6, 1000.0), (0.9, 0.95, 100.0)]),
    "confusion": lambda: plots.confusion({"tn": 50.0, "fp": 5.0, "fn": 10.0, "tp": 35.0, "threshold": 0.5}),
    "class_confusion": lambda: plots.class_confusion(CLASSES),
    "predicted_against_actual": lambda: plots.predicted_against_actual(ACTUAL, PREDICTED, "size"),
    "residuals": lambda: plots.residual_histogram([a - p for a, p in zip(ACTUAL, PREDICTED, strict=True)], "size"),
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


def test_the_class_matrix_has_a_cell_per_pair_shaded_by_its_share_of_the_row():
    root = _svg(plots.class_confusion(CLASSES))
    cells = _marks(root, "cell")
    assert len(cells) == 9
    # Row by row: a cell's shade is its share of its (actual) class's examples.
    shares = [count / sum(row) for row in CLASSES.counts for count in row]
    assert [cell.get("fill") for cell in cells] == [plots._shade(share) for share in shares]
    texts = _texts(root)
    assert [t for t in texts if t.isdigit()] == ["40", "8", "2", "1", "9", "0", "0", "0", "5"]
    assert ["80%", "16%", "4%", "10%", "90%", "0%", "0%", "0%", "100%"] == [t for t in texts if t.endswith("%")]
    assert {"north", "south", "west", "predicted class", "actual class"} <= set(texts)


def test_a_no_prediction_column_widens_the_matrix():
    matrix = ClassConfusion(["a", "b", "c"], ["a", "b", "c", "no prediction"], [[1.0, 0.0, 0.0, 1.0]] * 3)
    root = _svg(plots.class_confusion(matrix))
    assert len(_marks(root, "cell")) == 12 and "no prediction" in _texts(root)
    assert int(root.get("width")) > int(_svg(plots.class_confusion(CLASSES)).get("width"))


def test_predicted_against_actual_has_a_dot_per_example_on_one_scale():
    root = _svg(plots.predicted_against_actual(ACTUAL, PREDICTED, "size"))
    dots = _marks(root, "point")
    assert len(dots) == len(ACTUAL)
    (diagonal,) = _marks(root, "line")
    (x0, y0), (x1, y1) = (map(float, point.split(",")) for point in diagonal.get("points").split())
    # The diagonal runs corner to corner of the plot area: one scale on both axes.
    assert (x0, y1) == (64.0, 16.0) and (x1, y0) == (float(root.get("width")) - 14, float(root.get("height")) - 44)
    for dot, actual, predicted in zip(dots, ACTUAL, PREDICTED, strict=True):
        x, y = float(dot.get("cx")), float(dot.get("cy"))
        on_diagonal = y0 + (x - x0) * (y1 - y0) / (x1 - x0)
        # Over-predicted: above the diagonal (y grows downwards on the page).
        assert (y < on_diagonal) == (predicted > actual)
    assert {"actual size", "predicted size"} <= set(_texts(root))


@pytest.mark.parametrize("spread", [0.01, 10.0, 3e4])
def test_residual_buckets_are_round_equal_and_count_every_residual_once(spread):
    import numpy as np

    residuals = list(np.random.default_rng(0).normal(3.0, spread, 500))
    edges, counts = plots.residual_buckets(residuals)
    assert sum(counts) == len(residuals)
    assert edges[0] <= min(residuals) and max(residuals) <= edges[-1]
    steps = np.diff(edges)
    assert steps == pytest.approx([steps[0]] * len(steps), rel=1e-6)
    assert 10 <= len(counts) <= 30


def test_the_residual_histogram_draws_a_bar_per_bucket_as_tall_as_its_count():
    import numpy as np

    residuals = list(np.random.default_rng(0).normal(3.0, 10.0, 500))
    _, counts = plots.residual_buckets(residuals)
    root = _svg(plots.residual_histogram(residuals, "size"))
    heights = [_height(bar) for bar in _marks(root, "bar")]
    tallest = max(range(len(counts)), key=counts.__getitem__)
    assert heights == pytest.approx([heights[tallest] * c / counts[tallest] for c in counts], abs=0.15)
    assert "actual minus predicted size" in _texts(root) and "examples" in _texts(root)
    # The dotted line at zero.
    assert any(line.get("stroke-dasharray") for line in _marks(root, "line"))


def test_the_residual_histogram_of_one_value_still_draws():
    root = _svg(plots.residual_histogram([2.0, 2.0, 2.0], "size"))
    assert sum(_height(bar) > 0 for bar in _marks(root, "bar")) == 1


def test_calibration_names_the_label():
    root = _svg(plots.calibration([(0.5, 0.5, 10.0)], "churned"))
    assert "observed share of churned = 1" in _texts(root)
