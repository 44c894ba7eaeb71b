"""The Evaluator that never evaluates a model against itself: the same verdict and
candidate metrics, one model evaluated; a different baseline still compared."""

from __future__ import annotations

import os
import shutil

import pytest
import tensorflow_model_analysis as tfma
from tfx.types import standard_artifacts

from components.evaluator import BASELINE, MODEL, Evaluator, is_self_comparison
from pipeline.pipeline import create_pipeline
from tests.harness import node, run_component


def _model(uri: str, artifact_id: int = 0):
    model = standard_artifacts.Model()
    model.uri = uri
    if artifact_id:
        model.id = artifact_id
    return model


def test_self_comparison_is_the_same_artifact_only():
    assert is_self_comparison({MODEL: [_model("/m/1", 7)], BASELINE: [_model("/m/1", 7)]})
    assert is_self_comparison({MODEL: [_model("/m/1")], BASELINE: [_model("/m/1")]})  # not yet in MLMD
    assert not is_self_comparison({MODEL: [_model("/m/2", 8)], BASELINE: [_model("/m/1", 7)]})
    assert not is_self_comparison({MODEL: [_model("/m/1")], BASELINE: []})
    assert not is_self_comparison({MODEL: [_model("/m/1")]})


def test_the_pipeline_uses_it(small_config):
    assert isinstance(node(create_pipeline(small_config), "Evaluator"), Evaluator)


def _metric_keys(evaluation) -> list:
    return [kv.key for record in tfma.load_metrics(evaluation[0].uri) for kv in record.metric_keys_and_values]


def _values(evaluation, model_name: str = "") -> dict[str, float]:
    return {kv.key.name: kv.value.double_value.value
            for record in tfma.load_metrics(evaluation[0].uri) for kv in record.metric_keys_and_values
            if kv.key.model_name == model_name and not kv.key.is_diff}


@pytest.fixture(scope="module")
def against_itself(pipe, root, examples, trainer):
    model = trainer["model"]
    return run_component(node(pipe, "Evaluator"), {"examples": examples, "model": model, "baseline_model": model},
                         os.path.join(root, "against_itself"))


@pytest.fixture(scope="module")
def against_a_copy(pipe, root, examples, trainer):
    """The same model under another URI: a genuine baseline as far as the Evaluator knows."""
    copy = _model(os.path.join(root, "baseline_copy"))
    shutil.copytree(trainer["model"][0].uri, copy.uri)
    return run_component(node(pipe, "Evaluator"), {"examples": examples, "model": trainer["model"],
                                                   "baseline_model": [copy]}, os.path.join(root, "against_copy"))


def test_a_model_against_itself_is_evaluated_once_with_the_same_verdict(against_itself, evaluator):
    assert against_itself["blessing"][0].get_int_custom_property("blessed") == 1
    keys = _metric_keys(against_itself["evaluation"])
    assert not any(key.is_diff for key in keys)  # one model: no baseline comparison ran
    # The candidate's metrics are the ones the Evaluator computes without a baseline.
    assert _values(against_itself["evaluation"]) == _values(evaluator["evaluation"])
    assert tfma.load_validation_result(against_itself["evaluation"][0].uri).validation_ok


def test_a_different_baseline_is_still_compared(against_a_copy, evaluator):
    keys = _metric_keys(against_a_copy["evaluation"])
    assert any(key.is_diff and key.name == "auc" for key in keys)  # candidate minus baseline
    assert against_a_copy["blessing"][0].get_int_custom_property("blessed") == 1
    assert _values(against_a_copy["evaluation"], "candidate")["auc"] == _values(evaluator["evaluation"])["auc"]
