"""The batched metrics against TFMA's own: the same computations, and each batched
combiner's output equal to TFMA's combiner fed the same examples one at a time."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import (
    binary_confusion_matrices,
    calibration_histogram,
    metric_specs,
    metric_types,
    tf_metric_wrapper,
)
from tensorflow_model_analysis.utils import util

from models import batched_combiners, batched_metrics

LABELS, PREDICTIONS = tfma.constants.LABELS_KEY, tfma.constants.PREDICTIONS_KEY
WEIGHTS = tfma.constants.EXAMPLE_WEIGHTS_KEY


def _batch(rows: int, seed: int, fractional: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    labels = rng.random((rows, 1)) if fractional else rng.integers(0, 2, (rows, 1)).astype(np.float32)
    predictions = rng.random((rows, 1)).astype(np.float32)
    edges = [0.0, 1.0, 0.5]  # bucket and threshold edges
    predictions[: len(edges), 0] = edges[:rows]
    return {LABELS: labels, PREDICTIONS: predictions, WEIGHTS: rng.integers(1, 4, (rows, 1)).astype(np.float32)}


def _class_batch(rows: int, seed: int, classes: int = 3) -> dict:
    """A multi-class batch: class ids as labels, a softmax row per example, ties included."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(rows, classes))
    logits[: min(rows, 2)] = 0.0  # equal scores: the first class wins, as with argmax
    predictions = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)
    return {
        LABELS: rng.integers(0, classes, (rows, 1)),
        PREDICTIONS: predictions,
        WEIGHTS: rng.integers(1, 4, (rows, 1)).astype(np.float32),
    }


def _regression_batch(rows: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    labels = rng.normal(4000, 800, (rows, 1)).astype(np.float32)
    return {
        LABELS: labels,
        PREDICTIONS: (labels + rng.normal(0, 300, (rows, 1))).astype(np.float32),
        WEIGHTS: rng.integers(1, 4, (rows, 1)).astype(np.float32),
    }


def _computations(metric, **kwargs) -> list:
    return metric.computations(eval_config=tfma.EvalConfig(model_specs=[tfma.ModelSpec(**kwargs)]), **{})


def _combine(combiner, inputs: list) -> dict:
    accumulators = []
    if hasattr(combiner, "setup"):
        combiner.setup()
    for chunk in (inputs[: len(inputs) // 2], inputs[len(inputs) // 2 :]):  # two shards, then merged
        accumulator = combiner.create_accumulator()
        for item in chunk:
            accumulator = combiner.add_input(accumulator, metric_types.StandardMetricInputs(item))
        accumulators.append(accumulator)
    # An iterator: TFMA's mean regression errors count the first of a list twice.
    return combiner.extract_output(combiner.merge_accumulators(iter(accumulators)))


def _same(batched, tfma_value, rtol: float = 1e-12) -> None:
    if isinstance(tfma_value, dict):
        assert batched.keys() == tfma_value.keys()
        for key in tfma_value:
            _same(batched[key], tfma_value[key], rtol)
    elif isinstance(tfma_value, list):
        assert len(batched) == len(tfma_value)
        for b, t in zip(batched, tfma_value, strict=True):
            _same(b, t, rtol)
    elif hasattr(tfma_value, "_asdict"):  # TFMA's named tuples (matrices, threshold entries)
        _same(batched._asdict(), tfma_value._asdict(), rtol)
    elif hasattr(tfma_value, "__dataclass_fields__"):  # histogram buckets
        _same(vars(batched), vars(tfma_value), rtol)
    elif hasattr(type(tfma_value), "__slots__"):  # TFMA's sums of labels, predictions, examples
        _same(
            {n: getattr(batched, n) for n in type(tfma_value).__slots__},
            {n: getattr(tfma_value, n) for n in type(tfma_value).__slots__},
            rtol,
        )
    else:
        assert np.isclose(batched, tfma_value, rtol=rtol, atol=1e-12), (batched, tfma_value)


def _tfma_computations(metric_class: str, config: dict, **kwargs) -> list:
    """TFMA's computations for a MetricConfig naming ``metric_class``: its own metric's, or
    for a Keras metric, its wrapper's (as ``metric_specs`` makes them)."""
    instance = metric_specs.metric_instance(tfma.MetricConfig(class_name=metric_class, config=json.dumps(config)))
    if isinstance(instance, metric_types.Metric):
        return instance.computations(**kwargs)
    return tf_metric_wrapper.tf_metric_computations(
        {"": [instance]},
        eval_config=kwargs["eval_config"],
        model_name=(kwargs.get("model_names") or [""])[0],
        example_weighted=kwargs["example_weighted"],
    )


def _both(metric_class: str, config: dict, batches: list, example_weighted: bool = False, **spec) -> list:
    """(batched output, TFMA's output) per non-derived computation of the metric."""
    batched_metric = batched_metrics.BATCHED_METRICS[metric_class](**config)
    eval_config = tfma.EvalConfig(model_specs=[tfma.ModelSpec(**spec)])
    kwargs = {"eval_config": eval_config, "example_weighted": example_weighted}
    if spec.get("name"):
        kwargs["model_names"] = [spec["name"]]
    ours = batched_metric.computations(**kwargs)
    theirs = _tfma_computations(metric_class, config, **kwargs)
    assert [type(c) for c in ours] == [type(c) for c in theirs]
    pairs = []
    for mine, their in zip(ours, theirs, strict=True):
        if isinstance(their, metric_types.DerivedMetricComputation):
            assert mine is their or mine.keys == their.keys
            continue
        assert mine.keys == their.keys
        examples = [example for batch in batches for example in util.split_extracts(batch)]
        pairs.append((_combine(mine.combiner, batches), _combine(their.combiner, examples)))
    return pairs


@pytest.mark.parametrize(
    "metric_class, config",
    [
        ("ExampleCount", {}),
        ("BinaryAccuracy", {}),
        ("AUC", {}),
        ("ConfusionMatrixPlot", {"num_thresholds": 100}),
        ("CalibrationPlot", {"num_buckets": 10}),
    ],
)
@pytest.mark.parametrize("example_weighted", [False, True])
def test_each_batched_combiner_equals_tfmas_one_example_at_a_time(metric_class, config, example_weighted):
    batches = [_batch(300, seed) for seed in range(3)] + [_batch(1, 9)]
    pairs = _both(metric_class, config, batches, example_weighted)
    assert pairs
    for batched, tfma_value in pairs:
        _same(batched, tfma_value)


# Keras' metrics sum float32 variables: the rows' grouping into updates changes the last bits.
KERAS_RTOL = 1e-6


@pytest.mark.parametrize(
    "metric_class, config, batch, rtol",
    [
        ("ExampleCount", {}, _class_batch, 1e-12),
        ("SparseCategoricalAccuracy", {"name": "accuracy"}, _class_batch, KERAS_RTOL),
        ("MultiClassConfusionMatrixPlot", {}, _class_batch, 1e-12),
        ("MultiClassConfusionMatrixPlot", {"thresholds": [0.0, 0.4, 0.5]}, _class_batch, 1e-12),
        ("RootMeanSquaredError", {"name": "rmse"}, _regression_batch, KERAS_RTOL),
        ("MeanAbsoluteError", {"name": "mae"}, _regression_batch, 1e-12),
        ("MeanSquaredError", {}, _regression_batch, 1e-12),
        ("MeanLabel", {}, _regression_batch, 1e-12),
        ("MeanPrediction", {}, _regression_batch, 1e-12),
    ],
)
@pytest.mark.parametrize("example_weighted", [False, True])
def test_multi_class_and_regression_combiners_equal_tfmas(metric_class, config, batch, rtol, example_weighted):
    batches = [batch(300, seed) for seed in range(3)] + [batch(1, 9)]
    pairs = _both(metric_class, config, batches, example_weighted)
    assert pairs
    for batched, tfma_value in pairs:
        _same(batched, tfma_value, rtol)


def test_keras_metrics_keep_tfmas_keys_and_take_any_number_of_rows():
    batched = batched_metrics.BatchedRootMeanSquaredError(name="rmse")
    (computation,) = batched.computations(eval_config=tfma.EvalConfig(model_specs=[tfma.ModelSpec()]))
    assert computation.keys[0].name == "rmse"
    combiner = computation.combiner
    combiner.setup()
    rows = combiner.ROWS_PER_UPDATE * 2 + 5  # two updates while adding, the rest at the end
    batch = _regression_batch(rows, 3)
    accumulator = combiner.add_input(combiner.create_accumulator(), metric_types.StandardMetricInputs(batch))
    accumulator = combiner.add_input(accumulator, metric_types.StandardMetricInputs(_regression_batch(1, 4)))
    (value,) = combiner.extract_output(combiner.merge_accumulators([accumulator])).values()
    labels = np.concatenate([batch[LABELS], _regression_batch(1, 4)[LABELS]])
    predictions = np.concatenate([batch[PREDICTIONS], _regression_batch(1, 4)[PREDICTIONS]])
    assert np.isclose(value, np.sqrt(np.mean((labels - predictions) ** 2.0)), rtol=KERAS_RTOL)


def test_regression_errors_merge_a_list_of_accumulators_once_each():
    """TFMA's own merge, handed a list, adds its first accumulator to itself."""
    eval_config = tfma.EvalConfig(model_specs=[tfma.ModelSpec()])
    (computation,) = batched_metrics.BatchedMeanAbsoluteError().computations(eval_config=eval_config)
    combiner = computation.combiner
    batches = [_regression_batch(50, seed) for seed in (5, 6)]
    accumulators = [
        combiner.add_input(combiner.create_accumulator(), metric_types.StandardMetricInputs(b)) for b in batches
    ]
    (value,) = combiner.extract_output(combiner.merge_accumulators(accumulators)).values()
    errors = np.abs(np.concatenate([b[LABELS] - b[PREDICTIONS] for b in batches])).astype(np.float64)
    assert np.isclose(value, errors.mean(), rtol=1e-9)


def test_fractional_labels_are_split_as_tfma_splits_them():
    for batched, tfma_value in _both("AUC", {}, [_batch(200, 1, fractional=True)]):
        _same(batched, tfma_value)


def test_predictions_of_several_models_are_looked_up_by_model_name():
    batch = _batch(100, 2)
    batch[PREDICTIONS] = {"candidate": batch[PREDICTIONS], "baseline": 1 - batch[PREDICTIONS]}
    for batched, tfma_value in _both("AUC", {}, [batch], name="baseline"):
        _same(batched, tfma_value)


def test_derived_metrics_stay_tfmas_but_the_histogram_matrices():
    auc = batched_metrics.BatchedAUC().computations(eval_config=tfma.EvalConfig(model_specs=[tfma.ModelSpec()]))
    derived = [c for c in auc if isinstance(c, metric_types.DerivedMetricComputation)]
    assert derived and derived[-1].keys[0].name == "auc"  # the metric keeps TFMA's name
    assert all(type(c.combiner).__module__ == batched_combiners.__name__ for c in auc if c not in derived)
    # The matrices become ours; AUC from them stays TFMA's own function.
    assert [type(c.result) for c in derived] == [batched_combiners.HistogramMatrices, types.FunctionType]


def _histogram(seed: int, occupied: float, ids: tuple[int, ...] = ()) -> list:
    """A calibration histogram as the batched combiner outputs it: occupied buckets only,
    ascending, with TFMA's catch-all buckets 0 and 10001 among the candidates."""
    rng = np.random.default_rng(seed)
    buckets = calibration_histogram.DEFAULT_NUM_BUCKETS + 2
    chosen = sorted(set(np.flatnonzero(rng.random(buckets) < occupied).tolist()) | set(ids))
    result = []
    for bucket_id in chosen:
        examples = float(rng.integers(1, 5))
        labels = float(rng.integers(0, int(examples) + 1)) * rng.choice([1.0, 0.37])  # fractional too
        result.append(calibration_histogram.Bucket(bucket_id, labels, labels * 0.5, examples))
    return result


@pytest.mark.parametrize(
    "thresholds",
    [
        {"num_thresholds": 10000},  # AUC's default
        {"num_thresholds": 100},  # the confusion matrix plot's
        {"thresholds": [0.5]},
        {"thresholds": [0.0, 0.3, 0.7]},
        {"thresholds": [0.2, 0.99995, 1.5]},  # above 1 + epsilon: TFMA's reset
        {"thresholds": [-1e-6], "use_histogram": True},  # the histogram as it is, no rebinning
    ],
)
@pytest.mark.parametrize(
    "histogram",
    [
        _histogram(0, 0.5),
        _histogram(1, 0.002, ids=(0, 10001)),
        _histogram(2, 0.001, ids=(5001,)),
        [],
    ],
    ids=["dense", "sparse-with-catch-alls", "one-bucket", "empty"],
)
def test_histogram_matrices_equal_tfmas_loops(thresholds, histogram):
    computations = binary_confusion_matrices.binary_confusion_matrices(**{"use_histogram": True, **thresholds})
    tfma_derived = computations[-1]
    ours = batched_combiners.HistogramMatrices.replacing(tfma_derived)
    assert ours is not None
    metrics = {computations[-2].keys[-1]: histogram}
    (key,) = tfma_derived.keys
    # Exactly equal: the same additions in the same order.
    assert ours(metrics)[key]._asdict() == tfma_derived.result(metrics)[key]._asdict()


def test_other_derived_computations_are_left_to_tfma():
    sampled = binary_confusion_matrices.binary_confusion_matrices(
        thresholds=[0.5], use_histogram=False, example_id_key="id", example_ids_count=2
    )
    assert batched_combiners.HistogramMatrices.replacing(sampled[-1]) is None
    accuracy = tfma.metrics.BinaryAccuracy().computations(eval_config=tfma.EvalConfig(model_specs=[tfma.ModelSpec()]))
    assert batched_combiners.HistogramMatrices.replacing(accuracy[-1]) is None


def test_multi_class_inputs_are_refused_with_the_fix():
    batch = {LABELS: np.array([[1], [0]]), PREDICTIONS: np.array([[0.2, 0.8], [0.6, 0.4]], np.float32)}
    with pytest.raises(ValueError, match="one label and one prediction per example"):
        _both("BinaryAccuracy", {}, [batch])


def test_metrics_without_a_batched_version_are_refused():
    with pytest.raises(ValueError, match="no batched version"):
        batched_metrics.batched(tfma.metrics.MeanSquaredLogarithmicError().computations(eval_config=tfma.EvalConfig()))
    with pytest.raises(ValueError, match="No batched version of MeanSquaredLogarithmicError"):
        batched_metrics.metric_config("MeanSquaredLogarithmicError")


def test_per_class_sub_keys_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="per-class sub-keys"):
        batched_metrics.BatchedMeanLabel().computations(
            eval_config=tfma.EvalConfig(model_specs=[tfma.ModelSpec()]), sub_keys=[metric_types.SubKey(class_id=1)]
        )


def test_metric_configs_name_the_batched_classes_and_convert_back():
    config = batched_metrics.metric_config("AUC", config='{"num_thresholds": 100}')
    assert (config.class_name, config.module) == ("BatchedAUC", "models.batched_metrics")
    assert batched_metrics.is_batched(config)
    back = batched_metrics.tfma_metric_config(config)
    assert (back.class_name, back.module, back.config) == ("AUC", "", config.config)
    instance = tfma.metrics.metric_specs.metric_instance(config)
    assert type(instance) is batched_metrics.BatchedAUC and instance.name == "auc"
    keras = batched_metrics.metric_config("SparseCategoricalAccuracy", config='{"name": "accuracy"}')
    assert batched_metrics.tfma_metric_config(keras).class_name == "SparseCategoricalAccuracy"
    instance = tfma.metrics.metric_specs.metric_instance(keras)
    assert type(instance) is batched_metrics.BatchedSparseCategoricalAccuracy and instance.name == "accuracy"
