"""TFMA's metrics, computed a batch at a time.

TFMA 0.47 splits every batch of predictions into one Python dict per example and feeds
them one by one to its metric combiners: for a binary model that is most of the
Evaluator's time, far more than the model itself. The classes here are TFMA's own metric
classes (same arguments, same metric names, so keys and thresholds do not change) whose
computations are TFMA's, except that the few combiners that see examples (the calibration
histogram, binary confusion matrices at given thresholds, the example count) are replaced
by numpy ones that take a whole batch at once and produce the same accumulators. Everything
derived from those (AUC, accuracy, the plots) is TFMA's code on TFMA's accumulators, but
for one step: the confusion matrices TFMA derives from the calibration histogram, per slice
and model, which it computes with Python loops over all 10,000 buckets and thresholds
(``HistogramMatrices``: the same arithmetic in numpy, in the same order).

They need batched extracts: ``models.evaluation`` slices each batch into one sub-batch per
slice instead of TFMA's unbatching. Equality with TFMA's default computation, overall and
per slice, is tested in ``tests/models/test_batched_metrics.py`` and
``tests/models/test_evaluation.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import numpy as np
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.contrib.aggregates import binary_confusion_matrices as bcm_aggregates
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    example_count,
    metric_types,
    metric_util,
)

MODULE = __name__


def _labels_predictions_weights(
    element: metric_types.StandardMetricInputs, combiner: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One value per example of the batch: labels, predictions and example weights as
    float64 vectors, after TFMA's own model/output/prediction-key lookups."""
    key = combiner._key
    ((labels, predictions, weights),) = metric_util.to_label_prediction_example_weight(
        element,
        eval_config=combiner._eval_config,
        model_name=key.model_name,
        output_name=key.output_name,
        sub_key=key.sub_key,
        aggregation_type=combiner._aggregation_type,
        class_weights=combiner._class_weights,
        example_weighted=combiner._example_weighted,
        flatten=False,
        squeeze=False,
    )
    labels = np.asarray(labels, dtype=np.float64)
    predictions = np.asarray(predictions, dtype=np.float64)
    rows = labels.shape[0] if labels.ndim else 1
    labels, predictions = labels.reshape(rows, -1), predictions.reshape(rows, -1)
    if labels.shape[1] != 1 or predictions.shape[1] != 1:
        raise ValueError(
            f"Batched metrics take one label and one prediction per example (a binary model); got "
            f"labels {labels.shape} and predictions {predictions.shape} for {key}. Use TFMA's own "
            "metric classes (without module=models.batched_metrics) for multi-class or multi-label models."
        )
    weights = np.broadcast_to(np.asarray(weights, dtype=np.float64).reshape(-1), (rows,))
    return labels[:, 0], predictions[:, 0], weights


def _check_fractional(labels: np.ndarray, key: Any) -> None:
    if labels.size and (labels.min() < 0.0 or labels.max() > 1.0):
        raise ValueError(
            f"Labels must be within [0, 1] for {key} (fractional labels), got {labels.min()}..{labels.max()}"
        )


class BatchedHistogramCombiner(beam.CombineFn):
    """TFMA's calibration histogram (``_CalibrationHistogramCombiner``) over whole batches.

    Same buckets and the same output: the buckets any example fell in, ascending by id.
    """

    def __init__(self, tfma_combiner: Any):
        self._tfma = tfma_combiner
        self._key = tfma_combiner._key
        self._buckets = tfma_combiner._num_buckets + 2

    def create_accumulator(self) -> np.ndarray:
        # Rows: weighted labels, weighted predictions, weighted examples, examples seen.
        return np.zeros((4, self._buckets))

    def add_input(self, accumulator: np.ndarray, element: metric_types.StandardMetricInputs) -> np.ndarray:
        c = self._tfma
        labels, predictions, weights = _labels_predictions_weights(element, c)
        if c._fractional_labels:
            _check_fractional(labels, self._key)
            # TFMA splits each example in two (label 0 and label 1) and skips zero weights.
            seen = (weights * (1.0 - labels) != 0) | (weights * labels != 0)
        else:
            seen = np.ones_like(weights, dtype=bool)
        values = predictions if c._prediction_based_bucketing else labels
        index = (values - c._left) / c._range * c._num_buckets + 1
        index = np.where(index < 0, 0, np.where(index >= c._num_buckets + 1, c._num_buckets + 1, index))
        index = index.astype(np.int64)
        for row, weights_of_row in enumerate((labels * weights, predictions * weights, weights, seen)):
            accumulator[row] += np.bincount(index, weights=weights_of_row, minlength=self._buckets)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[np.ndarray]) -> np.ndarray:
        accumulators = iter(accumulators)
        result = next(accumulators)
        for accumulator in accumulators:
            result += accumulator
        return result

    def extract_output(self, accumulator: np.ndarray) -> dict:
        labels, predictions, examples, seen = accumulator
        return {
            self._key: [
                calibration_histogram.Bucket(int(i), float(labels[i]), float(predictions[i]), float(examples[i]))
                for i in np.flatnonzero(seen)
            ]
        }


class BatchedMatricesCombiner(beam.CombineFn):
    """TFMA's binary confusion matrices at given thresholds (``_BinaryConfusionMatrixCombiner``)
    over whole batches; without example ids (TFMA's own keeps a few per cell on request)."""

    def __init__(self, tfma_combiner: Any):
        self._tfma = tfma_combiner
        self._key = tfma_combiner._key
        self._matrices = tfma_combiner._binary_confusion_matrices
        if tfma_combiner._example_id_key:
            raise ValueError(f"Batched metrics do not sample example ids ({self._key}); use TFMA's own metric.")

    def create_accumulator(self) -> dict:
        return self._matrices.create_accumulator()

    def add_input(self, accumulator: dict, element: metric_types.StandardMetricInputs) -> dict:
        labels, predictions, weights = _labels_predictions_weights(element, self._tfma)
        fractional = self._tfma._enable_fractional_labels
        if fractional:
            _check_fractional(labels, self._key)
            # TFMA's two tuples per example: (label 1, weight w*l) and (label 0, weight w*(1-l)).
            positive = np.ones_like(labels, bool)
            pairs = ((positive, weights * labels), (~positive, weights * (1 - labels)))
        for threshold in self._matrices._thresholds:
            positive_prediction = predictions > threshold
            if not fractional:
                pairs = ((labels > threshold, weights),)
            tp = tn = fp = fn = 0.0
            for positive_label, w in pairs:
                # TFMA skips zero-weight tuples; they add nothing to a sum anyway.
                tp += float(np.sum(w[positive_label & positive_prediction]))
                fn += float(np.sum(w[positive_label & ~positive_prediction]))
                fp += float(np.sum(w[~positive_label & positive_prediction]))
                tn += float(np.sum(w[~positive_label & ~positive_prediction]))
            entry = bcm_aggregates._ThresholdEntry(bcm_aggregates.Matrix(tp=tp, tn=tn, fp=fp, fn=fn), [], [], [], [])
            accumulator[threshold] = self._matrices._merge_entry(accumulator, threshold, entry)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[dict]) -> dict:
        return self._matrices.merge_accumulators(accumulators)

    def extract_output(self, accumulator: dict) -> dict:
        return {self._key: self._matrices.extract_output(accumulator)}


class BatchedCountCombiner(beam.CombineFn):
    """TFMA's example count (``_ExampleCountCombiner``) over whole batches: examples, or
    the sum of their weights when example-weighted."""

    def __init__(self, tfma_combiner: Any):
        self._tfma = tfma_combiner
        self._keys = tfma_combiner._keys

    def create_accumulator(self) -> float:
        return 0.0

    def add_input(self, accumulator: float, element: metric_types.StandardMetricInputs) -> float:
        c = self._tfma
        rows = batch_rows(element.label, element.prediction)
        if not c._example_weighted or element.example_weight is None:
            return accumulator + rows
        weight = element.example_weight
        for name in (c._model_name, c._output_name):
            if isinstance(weight, dict) and name:
                weight = weight.get(name, weight)
        if isinstance(weight, dict):
            raise ValueError(f"example_count cannot be calculated on a dict of example weights for {self._keys}")
        return accumulator + float(np.sum(np.broadcast_to(np.asarray(weight, dtype=np.float64).reshape(-1), (rows,))))

    def merge_accumulators(self, accumulators: Iterable[float]) -> float:
        return float(sum(accumulators))

    def extract_output(self, accumulator: float) -> dict:
        return {key: accumulator for key in self._keys}


def batch_rows(labels: Any, predictions: Any) -> int:
    """Examples in a batch: the leading dimension of its labels or predictions (arrays, or
    dicts of them per model or output)."""
    for value in (labels, predictions):
        while isinstance(value, dict) and value:
            value = next(iter(value.values()))
        if isinstance(value, np.ndarray) and value.ndim:
            return value.shape[0]
    raise ValueError("A batch without labels or predictions cannot be evaluated")


class HistogramMatrices:
    """TFMA's confusion matrices from a calibration histogram (the derived computation of
    ``binary_confusion_matrices`` with ``use_histogram``), as TFMA computes them: its
    ``calibration_histogram.rebin`` onto the thresholds, then the running sums of
    ``_histogram_to_binary_confusion_matrices``, with numpy's sequential bincount and
    cumsum in place of Python loops (same additions in the same order)."""

    def __init__(self, thresholds: list[float], input_key: Any, matrices_key: Any):
        self._thresholds = list(thresholds)
        self._input_key, self._matrices_key = input_key, matrices_key

    @classmethod
    def replacing(cls, computation: metric_types.DerivedMetricComputation) -> HistogramMatrices | None:
        """The replacement for ``computation`` if it is TFMA's histogram-based confusion
        matrices, else None (the computation then stays TFMA's)."""
        result = computation.result
        if (
            getattr(result, "__module__", None) != binary_confusion_matrices.__name__
            or getattr(result, "__qualname__", None) != "binary_confusion_matrices.<locals>.result"
        ):
            return None
        try:
            captured = inspect.getclosurevars(result).nonlocals
            if not captured["use_histogram"] or captured["example_id_key"]:
                return None
            return cls(captured["thresholds"], captured["input_metric_key"], captured["matrices_key"])
        except (KeyError, TypeError, ValueError):  # another TFMA's closure: leave it to TFMA
            return None

    def __call__(self, metrics: dict) -> dict:
        thresholds = self._thresholds
        histogram = metrics[self._input_key]
        ids = np.fromiter((b.bucket_id for b in histogram), dtype=np.int64, count=len(histogram))
        positives = np.fromiter((b.weighted_labels for b in histogram), dtype=np.float64, count=len(histogram))
        examples = np.fromiter((b.weighted_examples for b in histogram), dtype=np.float64, count=len(histogram))
        if not (len(thresholds) == 1 and thresholds[0] < 0):
            positives, examples = self._rebin(ids, positives, examples)
        return {self._matrices_key: self._matrices(positives, examples - positives)}

    def _rebin(self, ids: np.ndarray, positives: np.ndarray, examples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``calibration_histogram.rebin``: each bucket's weights summed into the last new
        threshold at or below its left edge, one new bucket per threshold."""
        thresholds, epsilon = self._thresholds, binary_confusion_matrices._EPSILON
        edges = [t + epsilon if t != 0 else t for t in thresholds]
        if thresholds[0] >= 0:
            edges = [-epsilon, *edges]
        if thresholds[-1] < 1.0:
            edges = [*edges, 1.0 + epsilon]
        buckets = calibration_histogram.DEFAULT_NUM_BUCKETS
        # rebin's default histogram range, [0, 1), as in TFMA's call.
        left_edges = (ids - 1) / buckets * 1.0 + 0.0
        left_edges = np.where(ids == 0, -np.inf, np.where(ids >= buckets + 1, np.inf, left_edges))
        offsets = np.searchsorted(np.asarray(edges[1:], dtype=np.float64), left_edges, side="right")
        return (
            np.bincount(offsets, weights=positives, minlength=len(edges)),
            np.bincount(offsets, weights=examples, minlength=len(edges)),
        )

    def _matrices(self, positives: np.ndarray, negatives: np.ndarray) -> binary_confusion_matrices.Matrices:
        """``_histogram_to_binary_confusion_matrices``: at bucket i, tp/fp sum the buckets
        from i up, fn/tn those below i."""
        thresholds, epsilon = self._thresholds, binary_confusion_matrices._EPSILON
        n = len(positives)
        tp, fp = np.cumsum(positives[::-1])[::-1], np.cumsum(negatives[::-1])[::-1]
        fn, tn = np.zeros(n), np.zeros(n)
        fn[1:], tn[1:] = np.cumsum(positives[:-1]), np.cumsum(negatives[:-1])
        offset = 1 if (thresholds[0] >= 0 or len(thresholds) == 1) and n > 1 else 0
        tp, tn, fp, fn = (v[offset : offset + len(thresholds)].tolist() for v in (tp, tn, fp, fn))
        for i in np.flatnonzero(np.asarray(thresholds) >= 1.0 + epsilon):
            tp[i] = fp[i] = 0.0
            fn[i], tn[i] = tp[0], fp[0]
        return binary_confusion_matrices.Matrices(thresholds, tp, tn, fp, fn)


_BATCHED = {
    calibration_histogram._CalibrationHistogramCombiner: BatchedHistogramCombiner,
    binary_confusion_matrices._BinaryConfusionMatrixCombiner: BatchedMatricesCombiner,
    example_count._ExampleCountCombiner: BatchedCountCombiner,
}


def batched(computations: metric_types.MetricComputations) -> metric_types.MetricComputations:
    """TFMA's computations with each per-example combiner replaced by its batched version.

    Derived computations (AUC from histograms, accuracy from matrices, plots) stay TFMA's,
    but for the confusion matrices derived from a histogram (``HistogramMatrices``).
    A combiner with no batched version is refused, not run on batches it would miscount.
    """
    result = []
    for computation in computations:
        if isinstance(computation, metric_types.DerivedMetricComputation):
            matrices = HistogramMatrices.replacing(computation)
            result.append(
                computation
                if matrices is None
                else metric_types.DerivedMetricComputation(keys=computation.keys, result=matrices)
            )
            continue
        if isinstance(computation, metric_types.CrossSliceMetricComputation):
            result.append(computation)
            continue
        combiner_type = type(computation.combiner)
        if combiner_type not in _BATCHED:
            raise ValueError(
                f"{combiner_type.__name__} ({computation.keys}) has no batched version in {MODULE}: use only "
                f"its metrics ({', '.join(sorted(BATCHED_METRICS))}) with the batched extractors, or TFMA's "
                "default extractors."
            )
        # The example count's own preprocessor keeps only example weights; the batched
        # count reads the batch size from the labels, so it takes TFMA's standard inputs.
        preprocessors = None if combiner_type is example_count._ExampleCountCombiner else computation.preprocessors
        result.append(
            metric_types.MetricComputation(
                keys=computation.keys,
                preprocessors=preprocessors,
                combiner=_BATCHED[combiner_type](computation.combiner),
            )
        )
    return result


class _Batched:
    """Mixin: TFMA's metric, with its computations made batched (``batched``)."""

    def computations(self, *args, **kwargs) -> metric_types.MetricComputations:
        return batched(super().computations(*args, **kwargs))


# Names of their own: TFMA resolves its registered class names (``AUC``) before ``module``.
# Their metric names stay TFMA's (``auc``), so metric keys and thresholds are unchanged.
class BatchedExampleCount(_Batched, tfma.metrics.ExampleCount):
    pass


class BatchedBinaryAccuracy(_Batched, tfma.metrics.BinaryAccuracy):
    pass


class BatchedAUC(_Batched, tfma.metrics.AUC):
    pass


class BatchedConfusionMatrixPlot(_Batched, tfma.metrics.ConfusionMatrixPlot):
    pass


class BatchedCalibrationPlot(_Batched, tfma.metrics.CalibrationPlot):
    pass


# TFMA's class name -> the batched class.
BATCHED_METRICS = {
    cls.__mro__[2].__name__: cls
    for cls in (
        BatchedExampleCount,
        BatchedBinaryAccuracy,
        BatchedAUC,
        BatchedConfusionMatrixPlot,
        BatchedCalibrationPlot,
    )
}


def metric_config(class_name: str, **kwargs) -> tfma.MetricConfig:
    """A MetricConfig for the batched version of TFMA's ``class_name`` (e.g. ``"AUC"``)."""
    if class_name not in BATCHED_METRICS:
        raise ValueError(f"No batched version of {class_name}: batched metrics are {sorted(BATCHED_METRICS)}")
    return tfma.MetricConfig(class_name=BATCHED_METRICS[class_name].__name__, module=MODULE, **kwargs)


def is_batched(metric: tfma.MetricConfig) -> bool:
    """True when ``metric`` names one of the batched metrics of this module."""
    return metric.module == MODULE and any(cls.__name__ == metric.class_name for cls in BATCHED_METRICS.values())


def tfma_metric_config(metric: tfma.MetricConfig) -> tfma.MetricConfig:
    """TFMA's own metric for a batched one (same configuration and thresholds): for TFMA's
    per-example path, which the batched extractors do not feed."""
    if not is_batched(metric):
        raise ValueError(f"{metric.class_name} is not a batched metric of {MODULE}")
    tfma_name = next(name for name, cls in BATCHED_METRICS.items() if cls.__name__ == metric.class_name)
    result = tfma.MetricConfig()
    result.CopyFrom(metric)
    result.class_name, result.module = tfma_name, ""
    return result
