"""The Vertex Pusher (components/vertex_pusher.py): what a version is labelled with, what the
pipeline wires into it, what a blessed push hands the registry and records (the registry
stubbed), and that a model that is not blessed registers nothing. Its pushes through the real
client are in test_registry.py and the rehearsals (test_two_problems.py)."""

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
    inputs, pushed, exec_properties = _push_inputs(tmp_path, blessed=False)
    Executor().Do(inputs, {"pushed_model": [pushed]}, exec_properties)
    assert pushed.get_int_custom_property("pushed") == 0
    assert not (tmp_path / "pushed").exists()  # nothing copied either


def _push_inputs(root, blessed: bool = True, endpoint_name: str | None = "e", canary_percent: int = 0):
    """A model trained by run job-7 on span 3, its blessing and evaluation, and the config."""
    model, blessing, pushed = (
        standard_artifacts.Model(),
        standard_artifacts.ModelBlessing(),
        standard_artifacts.PushedModel(),
    )
    examples, evaluation = standard_artifacts.Examples(), standard_artifacts.ModelEvaluation()
    model.uri = f"{root}/rehearsal/job-7/Trainer_5/model"
    blessing.uri, pushed.uri = f"{root}/rehearsal/job-7/Evaluator_6/blessing", f"{root}/pushed"
    evaluation.uri = f"{root}/rehearsal/job-7/Evaluator_6/evaluation"
    examples.span = 3
    blessing.set_int_custom_property("blessed", int(blessed))
    (root / "rehearsal/job-7/Trainer_5/model/Format-Serving").mkdir(parents=True)
    (root / "rehearsal/job-7/Trainer_5/model/Format-Serving/saved_model.pb").write_bytes(b"model")
    custom_config = {
        "ai_platform_serving_args": {"project_id": "p", "endpoint_name": endpoint_name, "machine_type": "n1-x"},
        "ai_platform_vertex_region": "us-central1",
        "ai_platform_vertex_container_image_uri": "image",
        "ai_platform_enable_vertex": True,
        REGISTRY_KEY: {
            "pipeline_name": "taxi",
            "task": "binary",
            "metric": "auc",
            "endpoint_name": endpoint_name,
            "canary_percent": canary_percent,
        },
    }
    inputs = {"model": [model], "model_blessing": [blessing], EXAMPLES: [examples], EVALUATION: [evaluation]}
    return inputs, pushed, {"custom_config": json.dumps(custom_config), PIPELINE_ROOT: str(root)}


@pytest.mark.parametrize(
    ("endpoint_name", "canary_percent", "role"),
    [("e", 0, vertex_pusher.registry.CHAMPION), ("e", 25, vertex_pusher.registry.CANDIDATE), (None, 0, "champion")],
)
def test_a_blessed_model_becomes_a_labelled_version_with_its_metrics_and_is_recorded(
    tmp_path, monkeypatch, endpoint_name, canary_percent, role
):
    from types import SimpleNamespace

    from runtime import champion

    calls = {}
    uploaded = SimpleNamespace(version_id="2", versioned_resource_name="projects/p/locations/us-central1/models/9@2")

    def push(model, pushed, deployment):
        calls["push"] = (model, pushed, deployment)
        return uploaded, ["registered taxi version 2"], role

    def import_evaluation(version, task, metrics, display_name, metadata):
        calls["evaluation"] = (version, task, metrics, display_name, metadata)
        return "projects/p/locations/us-central1/models/9/evaluations/5"

    monkeypatch.setattr(vertex_pusher.registry, "push", push)
    monkeypatch.setattr(vertex_pusher.registry, "import_evaluation", import_evaluation)
    monkeypatch.setattr(vertex_pusher, "_metrics", lambda uri: {"auc": 0.91234, "loss": 0.3})
    inputs, pushed, exec_properties = _push_inputs(tmp_path, True, endpoint_name, canary_percent)

    Executor().Do(inputs, {"pushed_model": [pushed]}, exec_properties)

    model, upload, deployment = calls["push"]
    assert model == vertex_pusher.registry.RegistryModel.of_pipeline("p", "us-central1", "taxi", str(tmp_path))
    assert upload == vertex_pusher.registry.Push(
        artifact_uri=pushed.uri,
        serving_image="image",
        labels={"run": "job-7", "metric": "auc", "metric-value": "0.9123", "span": "3"},
        description="auc 0.9123 on the eval split; run job-7, span 3",
        explanation=None,
    )
    expected = vertex_pusher.registry.Deployment("e", "n1-x", canary_percent) if endpoint_name else None
    assert deployment == expected
    assert (tmp_path / "pushed" / "saved_model.pb").read_bytes() == b"model"  # the version's artifact_uri
    assert calls["evaluation"] == (
        uploaded,
        "binary",
        {"auc": 0.91234, "loss": 0.3},
        "taxi run job-7",
        {"run": "job-7", "span": 3, "blessing_metric": "auc", "evaluation_uri": inputs[EVALUATION][0].uri},
    )
    evaluation_name = "projects/p/locations/us-central1/models/9/evaluations/5"
    assert pushed.get_int_custom_property("pushed") == 1
    assert pushed.get_string_custom_property("pushed_destination") == uploaded.versioned_resource_name
    assert pushed.get_string_custom_property("registry_version") == "2"
    assert pushed.get_string_custom_property("model_evaluation") == evaluation_name
    assert json.loads(pushed.get_string_custom_property("registry_changes")) == [
        "registered taxi version 2",
        f"attached the Evaluator's metrics to version 2 ({evaluation_name})",
    ]
    record = champion.read(str(tmp_path))
    entry = record.candidate if role == vertex_pusher.registry.CANDIDATE else record.champion
    assert entry == champion.Entry(
        inputs["model"][0].uri,
        inputs["model_blessing"][0].uri,
        uploaded.versioned_resource_name,
        "2",
        entry.recorded_at,
    )
