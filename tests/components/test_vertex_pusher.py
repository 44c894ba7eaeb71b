"""The Vertex Pusher (components/vertex_pusher.py): what a version is labelled with, what the
pipeline wires into it, and that a model that is not blessed registers nothing. Its pushes
through the real client are in test_registry.py and the rehearsals (test_two_problems.py)."""

from __future__ import annotations

import json

import pytest
from tfx.types import standard_artifacts

from components import vertex_pusher
from components.drift_gate import PIPELINE_ROOT
from components.vertex_pusher import EVALUATION, EXAMPLES, REGISTRY_KEY, Executor, run_of, version_labels
from models import signatures
from pipeline.config import PipelineConfig, VertexEndpoint
from pipeline.pipeline import create_pipeline
from tests.support.harness import node
from tests.support.problems import SHIPPED


def test_the_run_is_the_job_folder_under_the_pipeline_root():
    root = "gs://b/out/pipelines/taxi"
    assert run_of(f"{root}/123456/taxi-20261128/Trainer_5/model", root) == "taxi-20261128"  # Vertex's layout
    assert run_of(f"{root}/rehearsal/job-7/Trainer_5/model", root + "/") == "job-7"  # the rehearsal's
    assert run_of("gs://b/elsewhere/1/2/model", root) == vertex_pusher.UNKNOWN_RUN
    assert run_of(f"{root}/model", root) == vertex_pusher.UNKNOWN_RUN
    assert run_of(f"{root}/1/2/model", None) == vertex_pusher.UNKNOWN_RUN


def test_the_span_is_the_property_or_the_custom_property_a_compiled_job_hands_over():
    examples = standard_artifacts.Examples()
    examples.span = 3
    assert vertex_pusher.span_of(examples) == 3
    handed_over = standard_artifacts.Examples()
    handed_over.set_json_value_custom_property("span", 2.0)
    assert vertex_pusher.span_of(handed_over) == 2


def test_version_labels():
    assert version_labels("job-7", 3, "accuracy", 0.91234) == {
        "run": "job-7",
        "metric": "accuracy",
        "metric-value": "0.9123",
        "span": "3",
    }
    assert version_labels("job-7", None, "rmse", None) == {"run": "job-7", "metric": "rmse"}


@pytest.mark.parametrize("problem_name", ["taxi", "penguins", "penguin-body-mass"])
def test_the_pipeline_wires_the_registry_pusher_for_each_task(problem_name):
    problem = SHIPPED[problem_name]
    endpoint = VertexEndpoint("p", "us-central1", "e", canary_percent=25)
    config = PipelineConfig(
        output_root="gs://b/out", data_root="gs://b/data", problem=problem, vertex_endpoint=endpoint
    )
    pusher = node(create_pipeline(config), "Pusher")
    assert isinstance(pusher, vertex_pusher.Pusher)
    settings = json.loads(pusher.exec_properties["custom_config"])[REGISTRY_KEY]
    assert settings == {
        "pipeline_name": problem.name,
        "task": problem.task.value,
        "metric": problem.blessing.metric,
        "endpoint_name": "e",
        "canary_percent": 25,
        "prediction_key": signatures.prediction_key(problem),
        "explanations": False,
    }
    assert pusher.exec_properties[PIPELINE_ROOT] == config.pipeline_root
    assert pusher.inputs[EVALUATION].producer_component_id == "Evaluator"
    assert pusher.inputs[EXAMPLES].producer_component_id == "CsvExampleGen"


def test_a_model_that_is_not_blessed_registers_nothing(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the registry was called for a model that is not blessed")

    monkeypatch.setattr(vertex_pusher.registry, "push", refuse)
    model, blessing, pushed = (
        standard_artifacts.Model(),
        standard_artifacts.ModelBlessing(),
        standard_artifacts.PushedModel(),
    )
    model.uri, blessing.uri, pushed.uri = str(tmp_path / "model"), str(tmp_path / "blessing"), str(tmp_path / "pushed")
    blessing.set_int_custom_property("blessed", 0)
    custom_config = {
        "ai_platform_serving_args": {"project_id": "p", "endpoint_name": "e"},
        "ai_platform_vertex_region": "us-central1",
        "ai_platform_vertex_container_image_uri": "image",
        "ai_platform_enable_vertex": True,
        REGISTRY_KEY: {
            "pipeline_name": "taxi",
            "task": "binary",
            "metric": "auc",
            "endpoint_name": "e",
            "canary_percent": 0,
        },
    }
    Executor().Do(
        {"model": [model], "model_blessing": [blessing]},
        {"pushed_model": [pushed]},
        {"custom_config": json.dumps(custom_config), PIPELINE_ROOT: str(tmp_path)},
    )
    assert pushed.get_int_custom_property("pushed") == 0
    assert not (tmp_path / "pushed").exists()  # nothing copied either
