"""The batched metrics against TFMA's own: the same computations, and each batched
combiner's output equal to TFMA's combiner fed the same examples one at a time."""

from __future__ import annotations

import types

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.metrics import binary_confusion_matrices, calibration_histogram, metric_types
from tensorflow_model_analysis.utils import util

from models import batched_metrics

LABELS, PREDICTIONS = tfma.constants.LABELS_KEY, tfma.constants.PREDICTIONS_KEY
WEIGHTS = tfma.constants.EXAMPLE_WEIGHTS_KEY


def _batch(rows: int, seed: int, fractional: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    labels = rng.random((rows, 1)) if fractional else rng.integers(0, 2, (rows, 1)).astype(np.float32)
    predictions = rng.random((rows, 1)).astype(np.float32)
    edges = [0.0, 1.0, 0.5]  # bucket and threshold edges
    predictions[: len(edges), 0] = edges[:rows]
    return {LABELS: labels, PREDICTIONS: predictions, WEIGHTS: rng.integers(1, 4, (rows, 1)).astype(np.float32)}


def _computations(metric, **kwargs) -> list:
    return metric.computations(eval_config=tfma.EvalConfig(model_specs=[tfma.ModelSpec(**kwargs)]), **{})


def _combine(combiner, inputs: list) -> dict:
    accumulators = []
    for chunk in (inputs[: len(inputs) // 2], inputs[len(inputs) // 2 :]):  # two shards, then merged
        accumulator = combiner.create_accumulator()
        for item in chunk:
            accumulator = combiner.add_input(accumulator, metric_types.StandardMetricInputs(item))
        accumulators.append(accumulator)
    return combiner.extract_output(combiner.merge_accumulators(accumulators))


def _same(batched, tfma_value) -> None:
    if isinstance(tfma_value, dict):
        assert batched.keys() == tfma_value.keys()
        for key in tfma_value:
            _same(batched[key], tfma_value[key])
    elif isinstance(tfma_value, list):
        assert len(batched) == len(tfma_value)
        for b, t in zip(batched, tfma_value, strict=True):
            _same(b, t)
    elif hasattr(tfma_value, "_asdict"):  # TFMA's named tuples (matrices, threshold entries)
        _same(batched._asdict(), tfma_value._asdict())
    elif hasattr(tfma_value, "__dataclass_fields__"):  # histogram buckets
        _same(vars(batched), vars(tfma_value))
    else:
        assert np.isclose(batched, tfma_value, rtol=1e-12, atol=1e-12), (batched, tfma_value)


def _both(metric_class: str, config: dict, batches: list, example_weighted: bool = False, **spec) -> list:
    """(batched output, TFMA's output) per non-derived computation of the metric."""
    tfma_metric = getattr(tfma.metrics, metric_class)(**config)
    batched_metric = batched_metrics.BATCHED_METRICS[metric_class](**config)
    eval_config = tfma.EvalConfig(model_specs=[tfma.ModelSpec(**spec)])
    kwargs = {"eval_config": eval_config, "example_weighted": example_weighted}
    if spec.get("name"):
        kwargs["model_names"] = [spec["name"]]
    ours = batched_metric.computations(**kwargs)
    theirs = tfma_metric.computations(**kwargs)
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
    assert all(type(c.combiner).__module__ == batched_metrics.MODULE for c in auc if c not in derived)
    # The matrices become ours; AUC from them stays TFMA's own function.
    assert [type(c.result) for c in derived] == [batched_metrics.HistogramMatrices, types.FunctionType]


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
    ours = batched_metrics.HistogramMatrices.replacing(tfma_derived)
    assert ours is not None
    metrics = {computations[-2].keys[-1]: histogram}
    (key,) = tfma_derived.keys
    # Exactly equal: the same additions in the same order.
    assert ours(metrics)[key]._asdict() == tfma_derived.result(metrics)[key]._asdict()


def test_other_derived_computations_are_left_to_tfma():
    sampled = binary_confusion_matrices.binary_confusion_matrices(
        thresholds=[0.5], use_histogram=False, example_id_key="id", example_ids_count=2
    )
    assert batched_metrics.HistogramMatrices.replacing(sampled[-1]) is None
    accuracy = tfma.metrics.BinaryAccuracy().computations(eval_config=tfma.EvalConfig(model_specs=[tfma.ModelSpec()]))
    assert batched_metrics.HistogramMatrices.replacing(accuracy[-1]) is None


def test_multi_class_inputs_are_refused_with_the_fix():
    batch = {LABELS: np.array([[1], [0]]), PREDICTIONS: np.array([[0.2, 0.8], [0.6, 0.4]], np.float32)}
    with pytest.raises(ValueError, match="one label and one prediction per example"):
        _both("BinaryAccuracy", {}, [batch])


def test_metrics_without_a_batched_version_are_refused():
    with pytest.raises(ValueError, match="no batched version"):
        batched_metrics.batched(tfma.metrics.MeanLabel().computations(eval_config=tfma.EvalConfig()))
    with pytest.raises(ValueError, match="No batched version of MeanLabel"):
        batched_metrics.metric_config("MeanLabel")


def test_metric_configs_name_the_batched_classes_and_convert_back():
    config = batched_metrics.metric_config("AUC", config='{"num_thresholds": 100}')
    assert (config.class_name, config.module) == ("BatchedAUC", "models.batched_metrics")
    assert batched_metrics.is_batched(config)
    back = batched_metrics.tfma_metric_config(config)
    assert (back.class_name, back.module, back.config) == ("AUC", "", config.config)
    instance = tfma.metrics.metric_specs.metric_instance(config)
    assert type(instance) is batched_metrics.BatchedAUC and instance.name == "auc"
