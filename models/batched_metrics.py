"""TFMA's metrics, computed a batch at a time, for every task: TFMA's own metric classes
(same names, keys and thresholds) whose combiners that see examples are the batched ones
of ``models.batched_combiners``. Why, and what is tested: docs/pipeline.md (Evaluator).
"""

from __future__ import annotations

from typing import Any

import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration,
    calibration_histogram,
    example_count,
    mean_regression_error,
    metric_types,
    multi_class_confusion_matrix_metrics,
    tf_metric_wrapper,
)
from tensorflow_model_analysis.utils.keras_lib import tf_keras

from models.batched_combiners import (
    BatchedClassMatricesCombiner,
    BatchedCountCombiner,
    BatchedHistogramCombiner,
    BatchedKerasCombiner,
    BatchedLabelsPredictionsCombiner,
    BatchedMatricesCombiner,
    BatchedRegressionErrorCombiner,
    HistogramMatrices,
    refuse_per_class,
)

MODULE = __name__


_BATCHED = {
    calibration_histogram._CalibrationHistogramCombiner: BatchedHistogramCombiner,
    binary_confusion_matrices._BinaryConfusionMatrixCombiner: BatchedMatricesCombiner,
    example_count._ExampleCountCombiner: BatchedCountCombiner,
    tf_metric_wrapper._CompilableMetricsCombiner: BatchedKerasCombiner,
    mean_regression_error._MeanAbsoluteErrorCombiner: BatchedRegressionErrorCombiner,
    mean_regression_error._MeanSquaredErrorCombiner: BatchedRegressionErrorCombiner,
    calibration._WeightedLabelsPredictionsExamplesCombiner: BatchedLabelsPredictionsCombiner,
    multi_class_confusion_matrix_metrics._MultiClassConfusionMatrixCombiner: BatchedClassMatricesCombiner,
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


def _keras_computations(
    keras_class: str,
    name: str,
    eval_config: Any = None,
    model_names: list[str] | None = None,
    output_names: list[str] | None = None,
    sub_keys: list | None = None,
    aggregation_type: Any = None,
    class_weights: Any = None,
    example_weighted: bool = False,
) -> metric_types.MetricComputations:
    """A Keras metric's computations as TFMA makes them for a MetricConfig naming it (one
    per model, its outputs together), batched."""
    refuse_per_class(name, any(sub_keys or []), aggregation_type, class_weights)
    computations = []
    for model_name in model_names or [""]:
        metrics = {output: [getattr(tf_keras.metrics, keras_class)(name=name)] for output in output_names or [""]}
        computations += tf_metric_wrapper.tf_metric_computations(
            metrics, eval_config=eval_config, model_name=model_name, example_weighted=example_weighted
        )
    return batched(computations)


class _BatchedKeras(tfma.metrics.Metric):
    """A compilable Keras metric (``KERAS_CLASS`` of ``tf_keras.metrics``), as TFMA computes
    one named in a MetricConfig, with its combiner batched (``BatchedKerasCombiner``)."""

    KERAS_CLASS = ""

    def __init__(self, name: str | None = None, **_):
        name = name or getattr(tf_keras.metrics, self.KERAS_CLASS)().name
        super().__init__(_keras_computations, keras_class=self.KERAS_CLASS, name=name)


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


class BatchedMultiClassConfusionMatrixPlot(_Batched, tfma.metrics.MultiClassConfusionMatrixPlot):
    pass


class BatchedMeanAbsoluteError(_Batched, tfma.metrics.MeanAbsoluteError):
    pass


class BatchedMeanSquaredError(_Batched, tfma.metrics.MeanSquaredError):
    pass


class BatchedMeanLabel(_Batched, tfma.metrics.MeanLabel):
    pass


class BatchedMeanPrediction(_Batched, tfma.metrics.MeanPrediction):
    pass


class BatchedSparseCategoricalAccuracy(_BatchedKeras):
    KERAS_CLASS = "SparseCategoricalAccuracy"


class BatchedRootMeanSquaredError(_BatchedKeras):
    KERAS_CLASS = "RootMeanSquaredError"


# The class name a MetricConfig gives TFMA (its own metric, or Keras') -> the batched class.
BATCHED_METRICS = {
    (cls.KERAS_CLASS if issubclass(cls, _BatchedKeras) else cls.__mro__[2].__name__): cls
    for cls in (
        BatchedExampleCount,
        BatchedBinaryAccuracy,
        BatchedAUC,
        BatchedConfusionMatrixPlot,
        BatchedCalibrationPlot,
        BatchedMultiClassConfusionMatrixPlot,
        BatchedMeanAbsoluteError,
        BatchedMeanSquaredError,
        BatchedMeanLabel,
        BatchedMeanPrediction,
        BatchedSparseCategoricalAccuracy,
        BatchedRootMeanSquaredError,
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
