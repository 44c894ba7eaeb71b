"""The report's plots: matplotlib figures rendered to PNG and embedded as data URIs, so the
page needs no script and no other file (matplotlib: well kept, no browser code at all;
a plotting library that inlines its JavaScript would add a megabyte of script per page)."""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import io
import os
import pickle
from collections.abc import Iterator, Sequence

import numpy as np

SPLIT_COLOURS = {"train": "#4c72b0", "eval": "#dd8452"}
PHASE_COLOURS = {"train": "#4c72b0", "validation": "#dd8452"}
STATE_COLOURS = {"complete": "#55a868", "cached": "#8c8c8c", "FAILED": "#c44e52"}


# Drawn plots kept by what they were drawn from (``cache_in``); at most this many files.
CACHE_LIMIT = 2000
_cache_dir: str | None = None
with open(__file__, "rb") as _source:
    _CODE_DIGEST = hashlib.sha256(_source.read()).hexdigest()  # new plotting code, new plots


@contextlib.contextmanager
def cache_in(directory: str) -> Iterator[None]:
    """Plots drawn inside are kept in ``directory``, by what they were drawn from; the same
    plot asked again (a rerun on the same data, a fully cached run) is read back, not drawn."""
    global _cache_dir
    previous, _cache_dir = _cache_dir, directory
    try:
        yield
    finally:
        _cache_dir = previous


def _remembered(draw):
    """``draw`` (a plot function returning a data URI), through the ``cache_in`` directory."""

    @functools.wraps(draw)
    def remembered(*args, **kwargs) -> str:
        if _cache_dir is None:
            return draw(*args, **kwargs)
        try:
            described = pickle.dumps((draw.__name__, args, kwargs, _CODE_DIGEST))
        except (pickle.PicklingError, TypeError, AttributeError):
            return draw(*args, **kwargs)
        path = os.path.join(_cache_dir, hashlib.sha256(described).hexdigest() + ".uri")
        with contextlib.suppress(OSError):
            with open(path, encoding="ascii") as f:
                return f.read()
        uri = draw(*args, **kwargs)
        os.makedirs(_cache_dir, exist_ok=True)
        partial = f"{path}.{os.getpid()}"
        with open(partial, "w", encoding="ascii") as f:
            f.write(uri)
        os.replace(partial, path)  # whole or absent, for a concurrent reader
        _prune(_cache_dir)
        return uri

    return remembered


def _prune(directory: str) -> None:
    """Drops the oldest kept plots beyond ``CACHE_LIMIT``."""
    entries = [entry for entry in os.scandir(directory) if entry.name.endswith(".uri")]
    if len(entries) > CACHE_LIMIT:
        entries.sort(key=lambda entry: entry.stat().st_mtime)
        for entry in entries[: len(entries) - CACHE_LIMIT]:
            with contextlib.suppress(OSError):
                os.remove(entry.path)


def _pyplot():
    """matplotlib's pyplot, imported on first use (a report whose plots are all kept draws
    nothing), drawing to memory only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure, left: float = 0.2, bottom: float = 0.3) -> str:
    """The figure as a data URI (and closed: figures otherwise stay in pyplot's registry)."""
    buffer = io.BytesIO()
    # Fixed margins rather than tight_layout, which draws every figure a second time to
    # measure it (half of the report's time).
    figure.subplots_adjust(left=left, right=0.97, bottom=bottom, top=0.92)
    figure.savefig(buffer, format="png", dpi=90)
    _pyplot().close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


@_remembered
def timeline(components: Sequence) -> str:
    """Each component as a bar from its start to its end, coloured by its state."""
    start = min(c.started for c in components)
    height = 0.35 * len(components) + 1
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(8, height))
    for row, component in enumerate(reversed(components)):
        axis.barh(
            row,
            max(component.finished - component.started, 0.05),
            left=component.started - start,
            color=STATE_COLOURS.get(component.state, "#937860"),
        )
    axis.set_yticks(range(len(components)), [c.node_id for c in reversed(components)])
    axis.set_xlabel("seconds since the run started")
    return _png(figure, left=0.3, bottom=0.6 / height)


@_remembered
def distribution(columns_by_split: dict) -> str:
    """One column, split by split: a histogram for numbers, the top values for text."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(4.2, 2.4))
    splits = sorted(columns_by_split)
    width = 0.8 / max(len(splits), 1)
    first = columns_by_split[splits[0]]
    if first.kind == "number":
        boundaries = shared_boundaries(columns_by_split)
        edges = [f"<{boundaries[0]:.4g}"] + [f"{b:.4g}" for b in boundaries[:-1]] + [f">{boundaries[-1]:.4g}"]
        for index, split in enumerate(splits):
            counts = _counts(columns_by_split[split].quantiles, boundaries)
            total = sum(counts) or 1.0
            axis.bar(
                [i + index * width for i in range(len(counts))],
                [count / total for count in counts],
                width=width,
                label=split,
                color=SPLIT_COLOURS.get(split),
            )
        axis.set_xticks(range(len(edges)), edges, rotation=45, fontsize=7)
    else:
        labels = [value for value, _ in first.top_values[:8]]
        for index, split in enumerate(splits):
            counts = dict(columns_by_split[split].top_values)
            total = max(columns_by_split[split].rows, 1)
            axis.bar(
                [i + index * width for i in range(len(labels))],
                [counts.get(label, 0.0) / total for label in labels],
                width=width,
                label=split,
                color=SPLIT_COLOURS.get(split),
            )
        axis.set_xticks(range(len(labels)), [label[:14] for label in labels], rotation=45, fontsize=7, ha="right")
    axis.set_ylabel("share of rows")
    axis.legend(fontsize=7)
    return _png(figure)


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


@_remembered
def curve(metric: str, by_phase: dict[str, list[tuple[int, float]]]) -> str:
    """A training metric per epoch, for training and validation."""
    from matplotlib.ticker import MaxNLocator

    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(4.2, 2.6))
    for phase, points in sorted(by_phase.items()):
        axis.plot(
            [e + 1 for e, _ in points], [v for _, v in points], marker="o", label=phase, color=PHASE_COLOURS.get(phase)
        )
    axis.set_xlabel("epoch")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_ylabel(metric)
    axis.legend(fontsize=7)
    return _png(figure)


@_remembered
def roc(points: list[tuple[float, float]]) -> str:
    """True against false positive rate over the Evaluator's thresholds."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(3.6, 3.2))
    ordered = sorted(points)
    axis.plot([0.0] + [p[0] for p in ordered] + [1.0], [0.0] + [p[1] for p in ordered] + [1.0], color="#4c72b0")
    axis.plot([0, 1], [0, 1], linestyle=":", color="#8c8c8c")
    axis.set_xlabel("false positive rate")
    axis.set_ylabel("true positive rate")
    return _png(figure)


@_remembered
def calibration(buckets: list[tuple[float, float, float]]) -> str:
    """Mean prediction against the observed share of positives, per prediction bucket."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(3.6, 3.2))
    axis.plot([0, 1], [0, 1], linestyle=":", color="#8c8c8c")
    axis.scatter([b[0] for b in buckets], [b[1] for b in buckets], s=[max(8.0, b[2] ** 0.5) for b in buckets])
    axis.set_xlabel("mean prediction")
    axis.set_ylabel("observed share of big tippers")
    return _png(figure)


@_remembered
def confusion(matrix: dict) -> str:
    """Counts at the decision threshold: rows are the truth, columns the prediction."""
    cells = [[matrix["tn"], matrix["fp"]], [matrix["fn"], matrix["tp"]]]
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(3.2, 2.8))
    axis.imshow(cells, cmap="Blues")
    darkest = max(max(row) for row in cells) or 1
    for row in range(2):
        for column in range(2):
            value = cells[row][column]
            colour = "white" if value > darkest / 2 else "black"
            axis.text(column, row, f"{value:.0f}", ha="center", va="center", color=colour)
    axis.set_xticks([0, 1], ["predicted 0", "predicted 1"])
    axis.set_yticks([0, 1], ["actual 0", "actual 1"])
    axis.set_title(f"threshold {matrix['threshold']:.2f}", fontsize=9)
    return _png(figure)
