"""The Evaluator's custom extractors: batches cut into one sub-batch per slice, with the
slices TFMA's own slicing finds, and the Evaluator computing the same metrics, plots and
blessing with them (and the batched metrics) as with TFMA's per-example defaults: here on
the binary problem's model; on a multi-class and a regression model, the shipped problems'
local runs, in tests/problems/test_shipped_problems.py (those runs serve both)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis.extractors import slice_key_extractor
from tensorflow_model_analysis.utils import util

from models import batched_metrics, evaluation
from pipeline.pipeline import create_pipeline
from tests.support.evaluations import assert_same_metrics, assert_same_validation, evaluate_both_ways
from tests.support.harness import node

LABELS, PREDICTIONS = tfma.constants.LABELS_KEY, tfma.constants.PREDICTIONS_KEY
WEIGHTS = tfma.constants.EXAMPLE_WEIGHTS_KEY
FEATURES, SLICES = tfma.constants.FEATURES_KEY, tfma.constants.SLICE_KEY_TYPES_KEY
CONFIG = tfma.EvalConfig(
    model_specs=[tfma.ModelSpec()],
    slicing_specs=[
        tfma.SlicingSpec(),
        tfma.SlicingSpec(feature_keys=["payment_type"]),
        tfma.SlicingSpec(feature_keys=["payment_type", "hour"]),
        tfma.SlicingSpec(feature_values={"payment_type": "Cash"}),
    ],
)


def _batch(rows: int = 200, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        LABELS: rng.integers(0, 2, (rows, 1)),
        PREDICTIONS: rng.random((rows, 1)).astype(np.float32),
        WEIGHTS: np.ones((rows, 1), np.float32),
        tfma.constants.INPUT_KEY: np.array([b"serialized"] * rows, dtype=object),
        FEATURES: {
            "payment_type": rng.choice(np.array([b"Cash", b"Credit Card", b"Unknown"], dtype=object), (rows, 1)),
            "hour": rng.integers(0, 4, (rows, 1)),
            "fare": rng.random((rows, 1)),
        },
    }


def _tfma_rows_by_slice(batch: dict, config: tfma.EvalConfig) -> dict:
    """{slice key: rows} as TFMA's own unbatching and SliceKeyExtractor find them."""
    slicing = {FEATURES: {k: v for k, v in batch[FEATURES].items() if k in evaluation.slicing_columns(config)}}
    extract_slice_keys = slice_key_extractor.ExtractSliceKeysFn(config, materialize=False)
    specs = evaluation.slice_specs(config)
    found: dict = {}
    for row, example in enumerate(util.split_extracts(slicing)):
        for key in extract_slice_keys.process(example, specs)[0][SLICES]:
            found.setdefault(key, []).append(row)
    return found


def test_each_slice_gets_the_rows_tfmas_slicing_gives_it():
    batch = _batch()
    extracts = evaluation.slice_batch(batch, evaluation.slicing_columns(CONFIG), evaluation.slice_specs(CONFIG), [""])
    expected = _tfma_rows_by_slice(batch, CONFIG)
    assert Counter(key for e in extracts for key in e[SLICES]) == Counter(expected.keys())  # one extract per slice
    for extract in extracts:
        (key,) = extract[SLICES]
        rows = np.asarray(expected[key])
        np.testing.assert_array_equal(extract[LABELS], batch[LABELS][rows])
        np.testing.assert_array_equal(extract[PREDICTIONS], batch[PREDICTIONS][rows])
        np.testing.assert_array_equal(extract[WEIGHTS], batch[WEIGHTS][rows])
        # Only what the metrics read travels on.
        assert set(extract) == {LABELS, PREDICTIONS, WEIGHTS, SLICES}
    overall = next(e for e in extracts if list(e[SLICES]) == [()])
    assert overall[LABELS] is batch[LABELS]  # the overall slice is the batch itself, not a copy


def test_variable_length_slicing_columns_are_sliced_per_example_like_tfma():
    batch = _batch(rows=3)
    batch[FEATURES]["payment_type"] = tfma.types.VarLenTensorValue.from_dense_rows(
        [np.array([b"Cash"], dtype=object), np.array([], dtype=object), np.array([b"Cash"], dtype=object)]
    )
    config = tfma.EvalConfig(slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["payment_type"])])
    extracts = evaluation.slice_batch(batch, {"payment_type"}, evaluation.slice_specs(config), [""])
    rows = {e[SLICES][0]: len(e[LABELS]) for e in extracts}
    assert rows == {(): 3, (("payment_type", "Cash"),): 2}
    assert rows.keys() == _tfma_rows_by_slice(batch, config).keys()


def test_per_model_predictions_are_cut_alike():
    batch = _batch(rows=10)
    batch[PREDICTIONS] = {"candidate": batch[PREDICTIONS], "baseline": batch[PREDICTIONS] / 2}
    extracts = evaluation.slice_batch(
        batch, {"payment_type"}, evaluation.slice_specs(CONFIG), ["candidate", "baseline"]
    )
    for extract in extracts:
        np.testing.assert_array_equal(extract[PREDICTIONS]["baseline"], extract[PREDICTIONS]["candidate"] / 2)


def test_the_batched_slicing_replaces_tfmas_unbatching_and_slicing():
    config = tfma.EvalConfig(slicing_specs=[tfma.SlicingSpec()])
    default = tfma.default_extractors(eval_config=config)
    names = [e.stage_name for e in evaluation.with_batched_slices(default, config)]
    assert names == [e.stage_name for e in default[:-2]] + [evaluation.BATCHED_SLICES_STAGE_NAME]
    # TFMA's metrics evaluator runs after a stage of this name.
    assert evaluation.BATCHED_SLICES_STAGE_NAME == slice_key_extractor.SLICE_KEY_EXTRACTOR_STAGE_NAME


def test_an_unknown_tfma_layout_is_refused_with_a_reason():
    config = tfma.EvalConfig()
    with pytest.raises(ValueError, match="TFMA 0.47"):
        evaluation.with_batched_slices(tfma.default_extractors(eval_config=config)[:-1], config)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda c: c.metrics_specs[0].metrics.add(class_name="MeanLabel"), "MeanLabel.*not a batched metric"),
        (lambda c: setattr(c.options.min_slice_size, "value", 5), "min_slice_size"),
        (lambda c: setattr(c.options.include_default_metrics, "value", True), "include_default_metrics"),
    ],
)
def test_configurations_the_batched_path_would_miscount_are_refused(small_config, change, match):
    config = tfma.EvalConfig()
    json_format.Parse(node(create_pipeline(small_config), "Evaluator").exec_properties["eval_config"], config)
    evaluation.check_batched_config(config)  # the pipeline's own passes
    change(config)
    with pytest.raises(ValueError, match=match):
        evaluation.check_batched_config(config)


def test_slicing_columns_come_from_every_slicing_spec():
    config = tfma.EvalConfig(
        slicing_specs=[
            tfma.SlicingSpec(),
            tfma.SlicingSpec(feature_keys=["company"]),
            tfma.SlicingSpec(feature_values={"payment_type": "Cash"}),
        ],
        cross_slicing_specs=[tfma.CrossSlicingSpec(baseline_spec=tfma.SlicingSpec(feature_keys=["hour"]))],
    )
    assert evaluation.slicing_columns(config) == {"company", "payment_type", "hour"}
    assert evaluation.slicing_columns(tfma.EvalConfig(slicing_specs=[tfma.SlicingSpec()])) == set()


@pytest.fixture(scope="module")
def evaluations(small_config, root, examples, trainer, evaluator):
    """The binary problem's evaluations, both ways (tests/support/evaluations.py); batched
    without a baseline, the pipeline's Evaluator that the component tests share."""
    return evaluate_both_ways(small_config, examples, trainer["model"], root, done={("batched", False): evaluator})


def test_the_pipeline_evaluator_uses_the_batched_extractors_and_metrics(small_config):
    evaluator = node(create_pipeline(small_config), "Evaluator")
    assert evaluator.exec_properties["module_path"] == "models.evaluation"
    config = tfma.EvalConfig()
    json_format.Parse(evaluator.exec_properties["eval_config"], config)
    assert all(batched_metrics.is_batched(m) for spec in config.metrics_specs for m in spec.metrics)


@pytest.mark.parametrize("with_baseline", [False, True])
def test_metrics_and_plots_equal_tfmas_default_computation_per_slice(evaluations, with_baseline):
    keys = assert_same_metrics(evaluations, with_baseline)
    slices = {key[0] for key in keys}
    assert "()" in slices or "" in slices
    assert any("payment_type" in s for s in slices) and any("trip_start_hour" in s for s in slices)
    assert {key[1] for key in keys} >= {"auc", "binary_accuracy", "example_count", "plot"}


@pytest.mark.parametrize("with_baseline", [False, True])
def test_validation_and_blessing_are_the_same(evaluations, with_baseline):
    assert_same_validation(evaluations, with_baseline)


def test_signatures_called_positionally_bind_by_keyword(tmp_path):
    module = tf.Module()
    module.double = tf.function(
        lambda examples: {"out": examples * 2}, input_signature=[tf.TensorSpec([None], tf.float32)]
    )
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": module.double})
    loaded = evaluation.KeywordSignaturesModel(tf.saved_model.load(str(tmp_path)))
    signature = loaded.signatures["serving_default"]
    x = tf.constant([1.0, 2.0])
    np.testing.assert_array_equal(signature(x)["out"], [2.0, 4.0])  # positionally, as TFMA calls it
    np.testing.assert_array_equal(signature(examples=x)["out"], [2.0, 4.0])
    assert (
        signature.structured_input_signature
        == tf.saved_model.load(str(tmp_path)).signatures["serving_default"].structured_input_signature
    )
    calls = []
    original = signature._signature
    signature._signature = lambda *args, **kwargs: calls.append((args, kwargs)) or original(*args, **kwargs)
    signature(x)
    assert calls[0][0] == () and list(calls[0][1]) == ["examples"]  # no positional attempt reaches TensorFlow
