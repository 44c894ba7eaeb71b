"""The report's plots, each an SVG chart (``svg.Chart``) as a data URI: the page needs no
script and no other file."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from report.svg import Chart, nice_ticks, padded

SPLIT_COLOURS = {"train": "#4c72b0", "eval": "#dd8452"}
PHASE_COLOURS = {"train": "#4c72b0", "validation": "#dd8452"}
STATE_COLOURS = {"complete": "#55a868", "cached": "#8c8c8c", "FAILED": "#c44e52"}
OTHER_COLOUR = "#937860"
DIAGONAL_COLOUR = "#8c8c8c"
# What the confusion matrix's cells shade from (none) to (the largest count).
LIGHTEST, DARKEST = (247, 251, 255), (8, 48, 107)


def timeline(components: Sequence) -> str:
    """Each component as a bar from its start to its end, coloured by its state."""
    start = min(c.started for c in components)
    end = max(max(c.finished - start, 0.05) for c in components)
    rows = len(components)
    chart = Chart(720, 26 * rows + 56, (0.0, end * 1.02), (-0.6, rows - 0.4), margins=(200, 16, 10, 44))
    for row, component in enumerate(reversed(components)):
        left = component.started - start
        chart.bar(
            left,
            left + max(component.finished - component.started, 0.05),
            row - 0.35,
            row + 0.35,
            STATE_COLOURS.get(component.state, OTHER_COLOUR),
        )
    chart.y_ticks(range(rows), [c.node_id for c in reversed(components)], grid=False)
    chart.x_ticks(nice_ticks(0.0, end))
    chart.titles(x="seconds since the run started")
    return chart.uri()


def distribution(columns_by_split: dict) -> str:
    """One column, split by split: a histogram for numbers, the top values for text."""
    splits = sorted(columns_by_split)
    width = 0.8 / max(len(splits), 1)
    first = columns_by_split[splits[0]]
    if first.kind == "number":
        boundaries = shared_boundaries(columns_by_split)
        labels = [f"<{boundaries[0]:.4g}"] + [f"{b:.4g}" for b in boundaries[:-1]] + [f">{boundaries[-1]:.4g}"]
        shares = {}
        for split in splits:
            counts = _counts(columns_by_split[split].quantiles, boundaries)
            total = sum(counts) or 1.0
            shares[split] = [count / total for count in counts]
    else:
        labels = [value for value, _ in first.top_values[:8]]
        shares = {}
        for split in splits:
            counts = dict(columns_by_split[split].top_values)
            total = max(columns_by_split[split].rows, 1)
            shares[split] = [counts.get(value, 0.0) / total for value in labels]
        labels = [value[:14] for value in labels]
    highest = max((share for values in shares.values() for share in values), default=0.0) or 1.0
    chart = Chart(380, 230, (-0.5, len(labels) - 0.5), (0.0, highest * 1.05), margins=(56, 12, 24, 70))
    for index, split in enumerate(splits):
        offset = (index - (len(splits) - 1) / 2) * width
        for position, share in enumerate(shares[split]):
            chart.bar(
                position + offset - width / 2,
                position + offset + width / 2,
                0.0,
                share,
                SPLIT_COLOURS.get(split, OTHER_COLOUR),
            )
    chart.x_ticks(range(len(labels)), labels, slanted=True)
    chart.y_ticks(nice_ticks(0.0, highest, 4))
    chart.titles(y="share of rows")
    chart.legend([(split, SPLIT_COLOURS.get(split, OTHER_COLOUR)) for split in splits])
    return chart.uri()


def shared_boundaries(columns_by_split: dict, bins: int = 8) -> list[float]:
    """Bucket boundaries every split is drawn on: equal widths between the first split's
    10th and 90th percentiles (its quantile histogram's first and last interior bounds),
    with everything below and above in an open bucket at each end, so one extreme value
    does not squeeze the rest into one bar."""
    first = columns_by_split[sorted(columns_by_split)[-1]]  # "train" after "eval"
    inner = [high for _, high, _ in first.quantiles[:-1]] or [0.0]
    low, high = min(inner), max(inner)
    if high <= low:
        return [low]
    step = (high - low) / bins
    return [low + i * step for i in range(bins + 1)]


def _counts(quantiles: list[tuple[float, float, float]], boundaries: list[float]) -> list[float]:
    from tensorflow_metadata.proto.v0 import statistics_pb2

    from components.drift import spread

    histogram = statistics_pb2.Histogram()
    for low, high, count in quantiles:
        histogram.buckets.add(low_value=low, high_value=high, sample_count=count)
    return list(spread(histogram, np.array(boundaries)))


def curve(metric: str, by_phase: dict[str, list[tuple[int, float]]]) -> str:
    """A training metric per epoch, for training and validation."""
    values = [value for points in by_phase.values() for _, value in points]
    epochs = [epoch + 1 for points in by_phase.values() for epoch, _ in points]
    low, high = padded(min(values, default=0.0), max(values, default=1.0), 0.08)
    chart = Chart(
        380, 250, padded(min(epochs, default=1), max(epochs, default=1), 0.06), (low, high), margins=(56, 12, 24, 44)
    )
    for phase, points in sorted(by_phase.items()):
        chart.line(
            [(epoch + 1, value) for epoch, value in points], PHASE_COLOURS.get(phase, OTHER_COLOUR), markers=True
        )
    first, last = min(epochs, default=1), max(epochs, default=1)
    chart.x_ticks([tick for tick in nice_ticks(first, last, min(last - first, 6) or 1) if tick == int(tick)])
    chart.y_ticks(nice_ticks(low, high, 4))
    chart.titles(x="epoch", y=metric)
    chart.legend([(phase, PHASE_COLOURS.get(phase, OTHER_COLOUR)) for phase in sorted(by_phase)])
    return chart.uri()


HISTORY_COLOURS = {"candidate": "#4c72b0", "champion": "#55a868", "threshold": "#c44e52"}


def over_runs(values: Sequence[float | None], champion: Sequence[float | None], metric: str, threshold: float) -> str:
    """The blessing metric run after run: each run's candidate (missing where a run stopped
    before the Evaluator), the champion's after each run, and the blessing threshold."""
    runs = range(1, len(values) + 1)
    known = [v for v in [*values, *champion, threshold] if v is not None]
    low, high = padded(min(known), max(known), 0.08)
    chart = Chart(560, 260, padded(1, max(len(values), 2), 0.04), (low, high), margins=(56, 12, 24, 44))
    chart.line([(1, threshold), (max(len(values), 2), threshold)], HISTORY_COLOURS["threshold"], dotted=True)
    for name, series in (("champion", champion), ("candidate", values)):
        points = [(run, value) for run, value in zip(runs, series, strict=True) if value is not None]
        if points:
            chart.line(points, HISTORY_COLOURS[name], markers=True)
    chart.x_ticks([tick for tick in nice_ticks(1, max(len(values), 2), 6) if tick == int(tick)])
    chart.y_ticks(nice_ticks(low, high, 4))
    chart.titles(x="run", y=metric)
    chart.legend([(name, colour) for name, colour in HISTORY_COLOURS.items()])
    return chart.uri()


def _unit_chart() -> Chart:
    """A square-ish chart over [0, 1] x [0, 1] with its dotted diagonal."""
    chart = Chart(330, 300, (0.0, 1.0), (0.0, 1.0), margins=(56, 14, 16, 44))
    chart.line([(0.0, 0.0), (1.0, 1.0)], DIAGONAL_COLOUR, dotted=True)
    ticks = nice_ticks(0.0, 1.0, 5)
    chart.x_ticks(ticks)
    chart.y_ticks(ticks)
    return chart


def roc(points: list[tuple[float, float]]) -> str:
    """True against false positive rate over the Evaluator's thresholds."""
    chart = _unit_chart()
    chart.line([(0.0, 0.0), *sorted(points), (1.0, 1.0)], SPLIT_COLOURS["train"])
    chart.titles(x="false positive rate", y="true positive rate")
    return chart.uri()


def calibration(buckets: list[tuple[float, float, float]], label: str = "the label") -> str:
    """Mean prediction against the observed share of positives (``label`` = 1), per
    prediction bucket; a dot's area grows with the square root of the bucket's examples."""
    chart = _unit_chart()
    for prediction, observed, count in buckets:
        chart.point(prediction, observed, max(2.0, 0.6 * max(count, 0.0) ** 0.25), SPLIT_COLOURS["train"])
    chart.titles(x="mean prediction", y=f"observed share of {label} = 1")
    return chart.uri()


def confusion(matrix: dict) -> str:
    """Counts at the decision threshold: rows are the truth, columns the prediction."""
    cells = [[matrix["tn"], matrix["fp"]], [matrix["fn"], matrix["tp"]]]
    darkest = max(max(row) for row in cells) or 1
    chart = Chart(300, 270, (-0.5, 1.5), (1.5, -0.5), margins=(70, 12, 24, 36))
    for row in range(2):
        for column in range(2):
            value = cells[row][column]
            chart.bar(column - 0.5, column + 0.5, row - 0.5, row + 0.5, _shade(value / darkest), kind="cell")
            colour = "white" if value > darkest / 2 else "black"
            chart.text(chart.x(column), chart.y(row) + 4, f"{value:.0f}", size=12, colour=colour)
    chart.x_ticks([0, 1], ["predicted 0", "predicted 1"])
    chart.y_ticks([0, 1], ["actual 0", "actual 1"], grid=False)
    chart.titles(top=f"threshold {matrix['threshold']:.2f}")
    return chart.uri()


def class_confusion(matrix) -> str:
    """A multi-class confusion matrix (``read.ClassConfusion``): rows the actual class,
    columns the predicted one; each cell shows its count and its share of the row (of the
    class's examples), and is shaded by that share, so a rare class reads as clearly as a
    common one."""
    rows, columns = len(matrix.actual), len(matrix.predicted)
    names = [name[:14] for name in matrix.actual]
    left = 40 + 6 * max(map(len, names), default=4)
    cell = 64
    chart = Chart(
        left + 12 + cell * columns,
        24 + 44 + cell * rows,
        (-0.5, columns - 0.5),
        (rows - 0.5, -0.5),
        margins=(left, 12, 24, 44),
    )
    for row in range(rows):
        total = sum(matrix.counts[row])
        for column in range(columns):
            count = matrix.counts[row][column]
            share = count / total if total else 0.0
            chart.bar(column - 0.5, column + 0.5, row - 0.5, row + 0.5, _shade(share), kind="cell")
            colour = "white" if share > 0.5 else "black"
            chart.text(chart.x(column), chart.y(row) - 2, f"{count:.0f}", size=12, colour=colour)
            chart.text(chart.x(column), chart.y(row) + 12, f"{share:.0%}", size=9, colour=colour)
    chart.x_ticks(range(columns), [name[:14] for name in matrix.predicted])
    chart.y_ticks(range(rows), names, grid=False)
    chart.titles(x="predicted class", y="actual class")
    return chart.uri()


def predicted_against_actual(actual: Sequence[float], predicted: Sequence[float], label: str) -> str:
    """One dot per example at (actual, predicted), both axes on one scale, with the dotted
    diagonal where the prediction is exact: above it, the model predicted too much."""
    low, high = padded(min(min(actual), min(predicted)), max(max(actual), max(predicted)), 0.04)
    chart = Chart(340, 320, (low, high), (low, high), margins=(64, 14, 16, 44))
    chart.line([(low, low), (high, high)], DIAGONAL_COLOUR, dotted=True)
    for x, y in zip(actual, predicted, strict=True):
        chart.point(x, y, 2.2, SPLIT_COLOURS["train"])
    ticks = nice_ticks(low, high, 5)
    chart.x_ticks(ticks)
    chart.y_ticks(ticks)
    chart.titles(x=f"actual {label}", y=f"predicted {label}")
    return chart.uri()


def residual_buckets(residuals: Sequence[float], bins: int = 20) -> tuple[list[float], list[int]]:
    """Edges of about ``bins`` equal buckets with round edges covering every residual, and
    how many residuals fall in each (the last bucket includes its upper edge)."""
    low, high = min(residuals), max(residuals)
    if high <= low:
        low, high = padded(low, high)
    edges = nice_ticks(low, high, bins)
    step = edges[1] - edges[0] if len(edges) > 1 else high - low
    # The ticks lie inside [low, high]: one step more on a side they stop short of.
    if edges[0] > low:
        edges.insert(0, edges[0] - step)
    if edges[-1] < high:
        edges.append(edges[-1] + step)
    counts, _ = np.histogram(np.asarray(residuals, dtype=float), bins=np.asarray(edges))
    return edges, [int(count) for count in counts]


def residual_histogram(residuals: Sequence[float], label: str, bins: int = 20) -> str:
    """How many examples' residual (actual minus predicted ``label``) falls in each bucket
    (``residual_buckets``), with a dotted line at zero."""
    edges, counts = residual_buckets(residuals, bins)
    tallest = float(max(max(counts), 1))
    chart = Chart(380, 260, (edges[0], edges[-1]), (0.0, tallest * 1.05), margins=(56, 12, 16, 44))
    for left, right, count in zip(edges[:-1], edges[1:], counts, strict=True):
        chart.bar(left, right, 0.0, float(count), SPLIT_COLOURS["eval"])
    if edges[0] < 0.0 < edges[-1]:
        chart.line([(0.0, 0.0), (0.0, tallest * 1.05)], DIAGONAL_COLOUR, dotted=True)
    chart.x_ticks(nice_ticks(edges[0], edges[-1], 6))
    chart.y_ticks([tick for tick in nice_ticks(0.0, tallest, 4) if tick == int(tick)])
    chart.titles(x=f"actual minus predicted {label}", y="examples")
    return chart.uri()


def _shade(fraction: float) -> str:
    """The colour a cell holding ``fraction`` of the largest count is filled with."""
    fraction = min(max(fraction, 0.0), 1.0)
    red, green, blue = (round(a + (b - a) * fraction) for a, b in zip(LIGHTEST, DARKEST, strict=True))
    return f"#{red:02x}{green:02x}{blue:02x}"
