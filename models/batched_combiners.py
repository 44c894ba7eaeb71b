"""TFMA's metric combiners, batch by batch: each takes a whole (sub-)batch of labels,
predictions and example weights where TFMA's takes one example, and produces TFMA's own
accumulator (``models.batched_metrics`` puts them in place of TFMA's). Metrics with
sub-keys, class aggregations or class weights are refused, with the fix.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import apache_beam as beam
import numpy as np
from tensorflow_model_analysis.contrib.aggregates import binary_confusion_matrices as bcm_aggregates
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    mean_regression_error,
    metric_types,
    metric_util,
    multi_class_confusion_matrix_metrics,
)
from tensorflow_model_analysis.utils import model_util

NO_PREDICTED_CLASS = multi_class_confusion_matrix_metrics.NO_PREDICTED_CLASS_ID


def batch_arrays(
    element: metric_types.StandardMetricInputs,
    *,
    eval_config: Any,
    model_name: str,
    output_name: str,
    sub_key: Any = None,
    aggregation_type: Any = None,
    class_weights: Any = None,
    example_weighted: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch's labels and predictions as one row per example (``(rows, width)``, in their
    own dtypes, as TFMA's per-example path sees each example's) and its example weights
    (``(rows,)``), after TFMA's own model/output/prediction-key lookups."""
    ((labels, predictions, weights),) = metric_util.to_label_prediction_example_weight(
        element,
        eval_config=eval_config,
        model_name=model_name,
        output_name=output_name,
        sub_key=sub_key,
        aggregation_type=aggregation_type,
        class_weights=class_weights,
        example_weighted=example_weighted,
        flatten=False,
        squeeze=False,
    )
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    rows = labels.shape[0] if labels.ndim else 1
    weights = np.broadcast_to(np.asarray(weights).reshape(-1), (rows,))
    return labels.reshape(rows, -1), predictions.reshape(rows, -1), weights


def _labels_predictions_weights(
    element: metric_types.StandardMetricInputs, combiner: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One value per example of the batch: labels, predictions and example weights as
    float64 vectors, after TFMA's own model/output/prediction-key lookups."""
    key = combiner._key
    labels, predictions, weights = batch_arrays(
        element,
        eval_config=combiner._eval_config,
        model_name=key.model_name,
        output_name=key.output_name,
        sub_key=key.sub_key,
        aggregation_type=combiner._aggregation_type,
        class_weights=combiner._class_weights,
        example_weighted=combiner._example_weighted,
    )
    if labels.shape[1] != 1 or predictions.shape[1] != 1:
        raise ValueError(
            f"Binary batched metrics take one label and one prediction per example; got labels "
            f"{labels.shape} and predictions {predictions.shape} for {key}. For a multi-class model use the "
            "batched SparseCategoricalAccuracy and MultiClassConfusionMatrixPlot; for a multi-label one, TFMA's "
            "own metric classes (without module=models.batched_metrics)."
        )
    return (
        labels[:, 0].astype(np.float64),
        predictions[:, 0].astype(np.float64),
        weights.astype(np.float64),
    )


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


def refuse_per_class(key: Any, sub_key: Any = None, aggregation_type: Any = None, class_weights: Any = None) -> None:
    """Sub-keys, class aggregation and class weights change what TFMA's per-example path
    feeds a metric (one binary example per class); the batched combiners do not do that."""
    if sub_key or aggregation_type or class_weights:
        raise ValueError(
            f"Batched metrics do not compute per-class sub-keys, aggregations or class weights ({key}): "
            "use TFMA's own metric classes (without module=models.batched_metrics) for them."
        )


class BatchedKerasCombiner(beam.CombineFn):
    """TFMA's wrapper of compilable Keras metrics (``_CompilableMetricsCombiner``) over whole
    batches: the same Keras metrics updated on the same rows, a few thousand at a time, and
    their weights summed into TFMA's own accumulator, which TFMA merges and reads out."""

    ROWS_PER_UPDATE = 4096

    def __init__(self, tfma_combiner: Any):
        self._tfma = tfma_combiner
        c = tfma_combiner
        refuse_per_class(c._output_names, c._sub_key, c._aggregation_type, c._class_weights)
        spec = c._eval_config and model_util.get_model_spec(c._eval_config, c._model_name)
        if spec is not None and spec.HasField("padding_options"):
            raise ValueError(f"Batched metrics do not pad labels or predictions ({spec.name!r}): use TFMA's own.")

    def setup(self) -> None:
        self._tfma.setup()

    def create_accumulator(self) -> tuple:
        # TFMA's accumulator (the metrics' summed weights) and the rows not yet fed to them.
        return self._tfma.create_accumulator(), []

    def add_input(self, accumulator: tuple, element: metric_types.StandardMetricInputs) -> tuple:
        c = self._tfma
        pending = accumulator[1]
        pending.append(
            [
                batch_arrays(
                    element,
                    eval_config=c._eval_config,
                    model_name=c._model_name,
                    output_name=output_name,
                    example_weighted=c._example_weighted,
                )
                for output_name in c._output_names
            ]
        )
        if sum(len(outputs[0][0]) for outputs in pending) >= self.ROWS_PER_UPDATE:
            self._update(accumulator)
        return accumulator

    def _update(self, accumulator: tuple) -> None:
        """The pending rows through every metric, as TFMA's ``_process_batch`` feeds its
        stacked examples: labels and predictions one row each, weights one column."""
        weights_so_far, pending = accumulator
        if not pending:
            return
        self._tfma.setup()
        for output_index, output_name in enumerate(self._tfma._output_names):
            labels = np.concatenate([outputs[output_index][0] for outputs in pending])
            predictions = np.concatenate([outputs[output_index][1] for outputs in pending])
            weights = np.concatenate([outputs[output_index][2] for outputs in pending])[:, None]
            for metric_index, metric in enumerate(self._tfma._metrics[output_name]):
                metric.reset_states()
                metric.update_state(labels, predictions, weights)
                weights_so_far.add_weights(output_index, metric_index, metric.get_weights())
        pending.clear()

    def merge_accumulators(self, accumulators: Iterable[tuple]) -> tuple:
        merged = []
        for accumulator in accumulators:
            self._update(accumulator)
            merged.append(accumulator[0])
        return self._tfma.merge_accumulators(merged), []

    def compact(self, accumulator: tuple) -> tuple:
        self._update(accumulator)
        return accumulator

    def extract_output(self, accumulator: tuple) -> dict:
        self._update(accumulator)
        return self._tfma.extract_output(accumulator[0])


class _OnTfmasAccumulator(beam.CombineFn):
    """A batched combiner that keeps TFMA's combiner (``tfma_combiner``, its metric key
    ``key``) for its accumulator, merging and output: only ``add_input`` is its own."""

    def __init__(self, tfma_combiner: Any, key: Any):
        self._tfma, self._key = tfma_combiner, key

    def _arrays(self, element: metric_types.StandardMetricInputs, one_column: bool):
        """The batch's labels, predictions and weights (``batch_arrays``) for this metric;
        refused unless one label and one prediction per example where ``one_column``."""
        labels, predictions, weights = batch_arrays(
            element,
            eval_config=self._tfma._eval_config,
            model_name=self._key.model_name,
            output_name=self._key.output_name,
            example_weighted=self._tfma._example_weighted,
        )
        if one_column and (labels.shape[1] != 1 or predictions.shape[1] != 1):
            raise ValueError(
                f"{type(self).__name__} takes one label and one prediction per example ({self._key}); got labels "
                f"{labels.shape} and predictions {predictions.shape}"
            )
        return labels, predictions, weights.astype(np.float64)

    def create_accumulator(self) -> Any:
        return self._tfma.create_accumulator()

    def merge_accumulators(self, accumulators: Iterable[Any]) -> Any:
        return self._tfma.merge_accumulators(accumulators)

    def extract_output(self, accumulator: Any) -> dict:
        return self._tfma.extract_output(accumulator)


class BatchedRegressionErrorCombiner(_OnTfmasAccumulator):
    """TFMA's mean absolute and mean squared errors (``_MeanRegressionErrorCombiner``) over
    whole batches: each example's error in the dtype TFMA computes it in, NaNs skipped.
    TFMA 0.47's merge counts the first accumulator twice when given a list (it iterates the
    list again after taking its first item); this one merges each once."""

    # Each row's error as TFMA's ``_regression_error`` gives it: computed in the arrays' own
    # dtype, then a Python float (squared after that, for the squared error).
    ERRORS = {
        mean_regression_error._MeanAbsoluteErrorCombiner: lambda d: np.abs(d[:, 0]).astype(np.float64),
        mean_regression_error._MeanSquaredErrorCombiner: lambda d: np.linalg.norm(d, axis=1).astype(np.float64) ** 2,
    }

    def __init__(self, tfma_combiner: Any):
        super().__init__(tfma_combiner, tfma_combiner._metric_key)
        c = tfma_combiner
        refuse_per_class(self._key, self._key.sub_key, c._aggregation_type, c._class_weights)
        self._error = self.ERRORS[type(tfma_combiner)]

    def add_input(self, accumulator: Any, element: metric_types.StandardMetricInputs) -> Any:
        labels, predictions, weights = self._arrays(element, one_column=True)
        errors = self._error(labels - predictions)
        kept = ~np.isnan(errors)
        accumulator.total_regression_error += float(np.sum(errors[kept] * weights[kept]))
        accumulator.total_example_weights += float(np.sum(weights[kept]))
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[Any]) -> Any:
        accumulators = iter(accumulators)
        result = next(accumulators)
        for accumulator in accumulators:
            result.merge(accumulator)
        return result


class BatchedLabelsPredictionsCombiner(_OnTfmasAccumulator):
    """TFMA's weighted sums of labels, predictions and examples
    (``_WeightedLabelsPredictionsExamplesCombiner``, behind MeanLabel and MeanPrediction)
    over whole batches; one label and one prediction per example."""

    def __init__(self, tfma_combiner: Any):
        super().__init__(tfma_combiner, tfma_combiner._key)
        c = tfma_combiner
        refuse_per_class(self._key, self._key.sub_key, c._aggregation_type, c._class_weights)

    def add_input(self, accumulator: Any, element: metric_types.StandardMetricInputs) -> Any:
        labels, predictions, weights = self._arrays(element, one_column=True)
        accumulator.total_weighted_examples += float(np.sum(weights))
        accumulator.total_weighted_labels += float(np.sum(labels[:, 0].astype(np.float64) * weights))
        accumulator.total_weighted_predictions += float(np.sum(predictions[:, 0].astype(np.float64) * weights))
        return accumulator


class BatchedClassMatricesCombiner(_OnTfmasAccumulator):
    """TFMA's multi-class confusion matrices (``_MultiClassConfusionMatrixCombiner``) over
    whole batches: the actual class (the label, or its argmax when one-hot), the predicted
    class (argmax, or none below the threshold, thresholds taken in TFMA's order and with
    its carried-over class), and the weighted count of each pair."""

    def __init__(self, tfma_combiner: Any):
        super().__init__(tfma_combiner, tfma_combiner._key)
        if tfma_combiner._extract_label_prediction_and_weight is not metric_util.to_label_prediction_example_weight:
            raise ValueError(f"Batched class matrices read labels as TFMA's default does ({self._key})")

    def add_input(self, accumulator: Any, element: metric_types.StandardMetricInputs) -> Any:
        labels, predictions, weights = self._arrays(element, one_column=False)
        if predictions.shape[1] == 1:
            raise ValueError(f"Predictions must hold one score per class for {self._key}, got {predictions.shape}")
        actual = labels.argmax(axis=1) if labels.shape[1] > 1 else labels[:, 0].astype(np.int64)
        predicted = predictions.argmax(axis=1)
        rows = np.arange(len(predicted))
        for threshold in self._tfma._thresholds:
            matrix = accumulator.setdefault(threshold, {})
            # TFMA's NO_PREDICTED_CLASS_ID is -1, and a later threshold reads that index's
            # score (the last class's): numpy's -1 reads the same one.
            predicted = np.where(predictions[rows, predicted] <= threshold, NO_PREDICTED_CLASS, predicted)
            pairs, inverse = np.unique(np.stack([actual, predicted], axis=1), axis=0, return_inverse=True)
            sums = np.bincount(inverse.reshape(-1), weights=weights, minlength=len(pairs))
            for (actual_id, predicted_id), total in zip(pairs.tolist(), sums.tolist(), strict=True):
                entry = multi_class_confusion_matrix_metrics.MatrixEntryKey(actual_id, predicted_id)
                matrix[entry] = matrix.get(entry, 0.0) + total
        return accumulator


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
