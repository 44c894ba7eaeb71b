"""The DAG's shape and gates, read from the pipeline object ``create_pipeline`` returns."""

from __future__ import annotations

import dataclasses
import json

import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx import v1 as tfx

from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline


@pytest.fixture(scope="module")
def pipe():
    return create_pipeline(PipelineConfig())


def _ids(pipe) -> dict:
    return {c.id: c for c in pipe.components}


def _upstream(component) -> set[str]:
    return {n.id for n in component.upstream_nodes}


def test_every_component_is_in_the_dag(pipe):
    assert set(_ids(pipe)) == {
        "CsvExampleGen", "StatisticsGen", "SchemaGen", "ExampleValidator", "AnomalyGate",
        "Transform", "Trainer", "latest_blessed_model_resolver", "Evaluator", "Pusher",
    }


def test_transform_and_trainer_wait_for_the_anomaly_gate(pipe):
    ids = _ids(pipe)
    assert _upstream(ids["AnomalyGate"]) == {"ExampleValidator", "SchemaGen"}
    assert "AnomalyGate" in _upstream(ids["Transform"])
    assert "AnomalyGate" in _upstream(ids["Trainer"])
    assert "SchemaGen" not in _upstream(ids["Transform"])


def test_evaluator_compares_against_the_latest_blessed_model(pipe):
    ids = _ids(pipe)
    assert _upstream(ids["Evaluator"]) == {"CsvExampleGen", "Trainer", "latest_blessed_model_resolver"}
    assert _upstream(ids["Pusher"]) == {"Trainer", "Evaluator"}


def test_evaluator_has_an_auc_floor_and_a_no_regression_threshold():
    config = PipelineConfig(min_eval_auc=0.91, max_auc_regression=0.003)
    evaluator = _ids(create_pipeline(config))["Evaluator"]
    # The Evaluator keeps its config as JSON, as it will reach the executor.
    eval_config = json_format.Parse(evaluator.exec_properties["eval_config"], tfma.EvalConfig())
    (auc,) = [m for spec in eval_config.metrics_specs for m in spec.metrics if m.class_name == "AUC"]
    assert auc.threshold.value_threshold.lower_bound.value == pytest.approx(0.91)
    assert auc.threshold.change_threshold.absolute.value == pytest.approx(-0.003)
    assert eval_config.model_specs[0].label_key == "big_tipper_xf"


def test_a_curated_schema_replaces_inference():
    pipe = create_pipeline(dataclasses.replace(PipelineConfig(), schema_path="/some/schema.pbtxt"))
    kinds = [type(c) for c in pipe.components]
    assert tfx.components.ImportSchemaGen in kinds and tfx.components.SchemaGen not in kinds
    assert _upstream(_ids(pipe)["ExampleValidator"]) == {"StatisticsGen", "ImportSchemaGen"}


def test_hyperparameters_reach_the_trainer(pipe):
    trainer = _ids(pipe)["Trainer"]
    assert json.loads(trainer.exec_properties["custom_config"]) == PipelineConfig().hparams.to_custom_config()
    assert trainer.exec_properties["run_fn"] == "models.trainer.run_fn"
