"""What the model looks at: permutation importance of each input column on the eval split,
and the slices of the columns where the model does worst.

The model is asked through ``serving_raw``, so a shuffle moves a column's raw values, missing
ones included; the labels come from its ``label`` signature, as the Evaluator's do
(docs/release.md, "What the model looks at").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

IMPORTANCE_ROWS = 2000
REPEATS = 3
MIN_SLICE_ROWS = 30
WORST_SLICES = 8


@dataclasses.dataclass(frozen=True)
class ColumnImportance:
    column: str
    drop: float  # the metric's mean loss over the repeats (positive: worse without the column)
    spread: float  # its standard deviation over the repeats


@dataclasses.dataclass(frozen=True)
class Slice:
    column: str
    value: str
    rows: int
    metric: float


@dataclasses.dataclass
class Importance:
    metric: str
    higher_is_better: bool
    baseline: float
    columns: list[ColumnImportance]
    slices: list[Slice]
    rows: int
    repeats: int
    model_dir: str
    seconds: float


def metric_function(problem) -> Callable[[np.ndarray, np.ndarray], float]:
    """The blessing metric in numpy: ``(labels, predictions) -> value`` for the problem's task
    (binary: the positive class's probability; multi-class: every class's; regression: the
    value)."""
    from models.problem import Task

    metric = problem.blessing.metric
    if problem.task == Task.REGRESSION:
        if metric == "mae":
            return lambda y, p: float(np.mean(np.abs(y - p.reshape(-1))))
        return lambda y, p: float(np.sqrt(np.mean((y - p.reshape(-1)) ** 2)))
    if problem.task == Task.MULTICLASS:
        return lambda y, p: float(np.mean(np.argmax(p, axis=1) == y.astype(int)))
    if metric == "accuracy":
        return lambda y, p: float(np.mean((p.reshape(-1) >= 0.5) == (y >= 0.5)))
    return auc


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC by ranks (ties share their mean rank); NaN without both classes."""
    labels, scores = labels.reshape(-1) >= 0.5, scores.reshape(-1)
    positives, negatives = int(labels.sum()), int((~labels).sum())
    if not positives or not negatives:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    _, first, counts = np.unique(scores[order], return_index=True, return_counts=True)
    ranks = np.empty(len(scores))
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)  # 1-based, ties at their mean rank
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def raw_columns(serialized: Sequence[bytes], names: Sequence[str]) -> dict[str, np.ndarray]:
    """The examples' values of ``names`` as the text ``serving_raw`` takes ("" when missing)."""
    import tensorflow as tf

    columns = {name: np.full(len(serialized), "", dtype=object) for name in names}
    for row, record in enumerate(serialized):
        features = tf.train.Example.FromString(record).features.feature
        for name in names:
            if name in features:
                kind = features[name].WhichOneof("kind")
                values = getattr(features[name], kind).value if kind else []
                if values:
                    value = values[0]
                    if kind == "bytes_list":
                        columns[name][row] = value.decode()
                    elif kind == "int64_list":
                        columns[name][row] = str(value)
                    else:  # the shortest text that reads back as the same float32
                        columns[name][row] = str(np.float32(value))
    return columns


def _worse(higher_is_better: bool, baseline: float, value: float) -> float:
    return baseline - value if higher_is_better else value - baseline


def worst_slices(
    columns: dict[str, np.ndarray], labels: np.ndarray, predictions: np.ndarray, measure, higher_is_better: bool
) -> list[Slice]:
    overall = measure(labels, predictions)
    found = []
    for name, values in columns.items():
        numbers = _as_numbers(values)
        if numbers is not None and len(set(values.tolist())) > 8:
            edges = np.unique(np.nanquantile(numbers, [0.25, 0.5, 0.75]))
            bins = np.digitize(numbers, edges)
            groups = {}
            for index in range(len(edges) + 1):
                low = "min" if index == 0 else _edge(edges[index - 1])
                high = "max" if index == len(edges) else _edge(edges[index])
                groups[f"{low} to {high}"] = (bins == index) & ~np.isnan(numbers)
            groups["missing"] = np.isnan(numbers)
        else:
            groups = {value or "missing": values == value for value in set(values.tolist())}
        for value, rows in groups.items():
            if rows.sum() >= MIN_SLICE_ROWS:
                found.append(Slice(name, value, int(rows.sum()), measure(labels[rows], predictions[rows])))
    found = [s for s in found if s.metric == s.metric]  # a slice with one class has no AUC
    found.sort(key=lambda s: _worse(higher_is_better, overall, s.metric), reverse=True)
    return [s for s in found if _worse(higher_is_better, overall, s.metric) > 0][:WORST_SLICES]


def _edge(value: float) -> str:
    """A quantile as a person reads it: whole digits for large numbers (ids, timestamps)."""
    return f"{value:.0f}" if abs(value) >= 1e5 else f"{value:g}"


def _as_numbers(values: np.ndarray) -> np.ndarray | None:
    try:
        return np.array([float(v) if v != "" else np.nan for v in values], dtype=float)
    except ValueError:
        return None


def permutation_importance(
    model_dir: str,
    serialized: Sequence[bytes],
    problem,
    repeats: int = REPEATS,
    seed: int = 0,
) -> Importance:
    """The importance of each input column and the worst slices, for the model at
    ``model_dir`` on ``serialized`` (raw tf.Examples of the eval split)."""
    import tensorflow as tf

    from models import signatures
    from models.problem import BLESSING_METRICS

    started = time.monotonic()
    model = tf.saved_model.load(model_dir)
    raw = model.signatures[signatures.RAW_SIGNATURE]
    names = sorted(raw.structured_input_signature[1])
    key = signatures.prediction_key(problem)
    labels = model.signatures[signatures.LABEL_SIGNATURE](examples=tf.constant(list(serialized)))[problem.label_key]
    labels = tf.reshape(tf.cast(labels, tf.float64), [-1]).numpy()
    columns = raw_columns(serialized, names)

    def predict(values: dict[str, np.ndarray]) -> np.ndarray:
        answer = raw(**{name: tf.constant(values[name]) for name in names})[key]
        found = tf.cast(answer, tf.float64).numpy()
        return found.reshape(len(labels), -1)

    measure = metric_function(problem)
    higher_is_better = BLESSING_METRICS[problem.task][problem.blessing.metric]
    predictions = predict(columns)
    baseline = measure(labels, predictions)
    rng = np.random.default_rng(seed)
    found = []
    for name in names:
        drops = []
        for _ in range(repeats):
            shuffled = dict(columns)
            shuffled[name] = columns[name][rng.permutation(len(labels))]
            drops.append(_worse(higher_is_better, baseline, measure(labels, predict(shuffled))))
        found.append(ColumnImportance(name, float(np.mean(drops)), float(np.std(drops))))
    found.sort(key=lambda c: c.drop, reverse=True)
    return Importance(
        metric=problem.blessing.metric,
        higher_is_better=higher_is_better,
        baseline=baseline,
        columns=found,
        slices=worst_slices(columns, labels, predictions, measure, higher_is_better),
        rows=len(labels),
        repeats=repeats,
        model_dir=model_dir,
        seconds=time.monotonic() - started,
    )
