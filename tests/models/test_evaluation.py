"""The Evaluator's custom extractors: what they drop, where they sit, and that the
Evaluator computes the same metrics (overall and per slice) with them as without."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis.extractors import unbatch_extractor

from models import evaluation
from pipeline.pipeline import create_pipeline
from tests.support.harness import node, run_component

BATCH = {
    tfma.constants.LABELS_KEY: np.array([[1], [0]]),
    tfma.constants.PREDICTIONS_KEY: np.array([[0.9], [0.2]]),
    tfma.constants.EXAMPLE_WEIGHTS_KEY: np.array([[1.0], [1.0]]),
    tfma.constants.ARROW_RECORD_BATCH_KEY: "record batch",
    tfma.constants.INPUT_KEY: np.array([b"x", b"y"]),
    tfma.constants.FEATURES_KEY: {"company": np.array([b"a", b"b"]), "fare": np.array([1.0, 2.0])},
    tfma.constants.TRANSFORMED_FEATURES_KEY: {"big_tipper_xf": np.array([[1], [0]])},
}


def test_slim_extracts_keeps_what_metrics_read_and_drops_the_rest():
    slim = evaluation.slim_extracts(BATCH, set())
    assert set(slim) == {
        tfma.constants.LABELS_KEY,
        tfma.constants.PREDICTIONS_KEY,
        tfma.constants.EXAMPLE_WEIGHTS_KEY,
        tfma.constants.ARROW_RECORD_BATCH_KEY,
    }
    assert slim[tfma.constants.PREDICTIONS_KEY] is BATCH[tfma.constants.PREDICTIONS_KEY]


def test_slim_extracts_keeps_the_features_slicing_reads():
    slim = evaluation.slim_extracts(BATCH, {"company"})
    assert list(slim[tfma.constants.FEATURES_KEY]) == ["company"]
    assert slim[tfma.constants.TRANSFORMED_FEATURES_KEY] == {}
    # Multi-model transformed features: a dict per model.
    per_model = {tfma.constants.TRANSFORMED_FEATURES_KEY: {"candidate": {"company": 1, "x": 2}, "baseline": {"x": 3}}}
    assert evaluation.slim_extracts(per_model, {"company"}) == {
        tfma.constants.TRANSFORMED_FEATURES_KEY: {"candidate": {"company": 1}, "baseline": {}}
    }


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


def test_the_slimming_stage_sits_just_before_tfmas_unbatching():
    config = tfma.EvalConfig(slicing_specs=[tfma.SlicingSpec()])
    default = tfma.default_extractors(eval_config=config)
    names = [e.stage_name for e in evaluation.with_slim_extracts(default, config)]
    unbatch = names.index(unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME)
    assert names[unbatch - 1] == evaluation.SLIM_EXTRACTS_STAGE_NAME
    assert [n for n in names if n != evaluation.SLIM_EXTRACTS_STAGE_NAME] == [e.stage_name for e in default]


def test_an_unknown_tfma_layout_is_refused_with_a_reason():
    config = tfma.EvalConfig()
    without_unbatch = [
        e
        for e in tfma.default_extractors(eval_config=config)
        if e.stage_name != unbatch_extractor.UNBATCH_EXTRACTOR_STAGE_NAME
    ]
    with pytest.raises(ValueError, match="UnbatchExtractor|TFMA 0.47"):
        evaluation.with_slim_extracts(without_unbatch, config)


def _metrics(evaluation_artifact) -> dict:
    """{(slice, metric name): value} of an Evaluator output."""
    found = {}
    for record in tfma.load_metrics(evaluation_artifact[0].uri):
        for kv in record.metric_keys_and_values:
            found[(str(record.slice_key), kv.key.name)] = kv.value.double_value.value
    return found


@pytest.fixture(scope="module")
def sliced_runs(small_config, root, examples, trainer):
    """The pipeline's Evaluator with a slice by payment type added, run with the project's
    extractors and with TFMA's defaults (module_path removed)."""
    base = node(create_pipeline(small_config), "Evaluator")
    config = tfma.EvalConfig()
    json_format.Parse(base.exec_properties["eval_config"], config)
    config.slicing_specs.append(tfma.SlicingSpec(feature_keys=["payment_type"]))
    results = {}
    for name, module_path in (("slim", base.exec_properties["module_path"]), ("default", None)):
        evaluator = node(create_pipeline(small_config), "Evaluator")
        evaluator.exec_properties["eval_config"] = json_format.MessageToJson(config)
        evaluator.exec_properties["module_path"] = module_path
        results[name] = run_component(
            evaluator, {"examples": examples, "model": trainer["model"]}, os.path.join(root, "sliced", name)
        )
    return results


def test_the_pipeline_evaluator_uses_the_custom_extractors(small_config):
    evaluator = node(create_pipeline(small_config), "Evaluator")
    assert evaluator.exec_properties["module_path"] == "models.evaluation"
    assert callable(evaluation.custom_extractors)


def test_metrics_are_identical_with_and_without_the_custom_extractors(sliced_runs):
    slim, default = _metrics(sliced_runs["slim"]["evaluation"]), _metrics(sliced_runs["default"]["evaluation"])
    assert slim.keys() == default.keys()
    # Exactly equal (NaN, e.g. AUC of a one-class slice, equal to NaN).
    assert all(np.array_equal(slim[key], default[key], equal_nan=True) for key in slim)
    slices = {s for s, _ in slim}
    assert "" in slices and any("payment_type" in s for s in slices)  # overall and per payment type
    assert {name for _, name in slim} >= {"auc", "binary_accuracy", "example_count"}


def test_blessing_is_the_same_with_and_without_the_custom_extractors(sliced_runs):
    blessed = {name: run["blessing"][0].get_int_custom_property("blessed") for name, run in sliced_runs.items()}
    # The AUC floor applies per slice here, and a few-row payment type misses it: both refuse.
    assert blessed["slim"] == blessed["default"]
