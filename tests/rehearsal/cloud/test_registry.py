"""The Model Registry's stand-in (rehearsal/cloud/registry.py): versions, aliases
and imported evaluations, as Vertex documents them."""

from __future__ import annotations

import itertools

import pytest
from google.cloud import aiplatform_v1 as v1

from rehearsal.cloud.api_error import ApiError
from rehearsal.cloud.registry import Registry

PARENT = "projects/p/locations/l"
SCHEMA = "gs://google-cloud-aiplatform/schema/modelevaluation/classification_metrics_1.0.0.yaml"


@pytest.fixture
def registry() -> Registry:
    return Registry(itertools.count(100))


def _upload(registry: Registry, parent_model: str = "", aliases: tuple[str, ...] = ()) -> str:
    model = v1.Model(display_name="taxi", artifact_uri="gs://b/m", version_aliases=list(aliases))
    version = registry.add(PARENT, v1.UploadModelRequest(parent=PARENT, model=model, parent_model=parent_model), "/m")
    return version.versioned_name


def _aliases(registry: Registry, name: str) -> dict[str, list[str]]:
    return {m.version_id: list(m.version_aliases) for m in registry.versions(name)}


def test_a_parent_model_gets_numbered_versions_and_the_first_is_the_default(registry):
    first = _upload(registry)
    model = first.partition("@")[0]
    second = _upload(registry, parent_model=model, aliases=("champion",))
    assert (first, second) == (f"{model}@1", f"{model}@2")
    assert _aliases(registry, model) == {"1": ["default"], "2": ["champion"]}
    assert registry.version(model).resource.version_id == "1"  # no @: the default version
    assert registry.version(f"{model}@champion").resource.version_id == "2"
    assert [m.version_id for m in registry.defaults(PARENT + "/")] == ["1"]  # listed once


def test_an_alias_moves_and_default_moves_but_cannot_be_removed(registry):
    model = _upload(registry, aliases=("champion",)).partition("@")[0]
    _upload(registry, parent_model=model)
    registry.merge_aliases(f"{model}@2", ["champion", "default", "previous"])
    assert _aliases(registry, model) == {"1": [], "2": ["champion", "default", "previous"]}
    registry.merge_aliases(f"{model}@2", ["-previous"])
    assert _aliases(registry, model)["2"] == ["champion", "default"]
    with pytest.raises(ApiError, match="default alias cannot be removed"):
        registry.merge_aliases(f"{model}@2", ["-default"])
    with pytest.raises(ApiError, match="invalid version alias '3'"):
        registry.merge_aliases(f"{model}@2", ["3"])
    with pytest.raises(ApiError, match="not found"):
        registry.version(f"{model}@previous")


def test_a_missing_parent_is_not_found(registry):
    with pytest.raises(ApiError, match="Parent model .*/models/9 not found"):
        _upload(registry, parent_model=f"{PARENT}/models/9")


def test_evaluations_belong_to_the_version_they_were_imported_into(registry):
    model = _upload(registry).partition("@")[0]
    _upload(registry, parent_model=model)
    evaluation = v1.ModelEvaluation(display_name="run-2", metrics_schema_uri=SCHEMA)
    imported = registry.import_evaluation(f"{model}@2", evaluation)
    assert imported.name.startswith(f"{model}/evaluations/")
    assert [e.name for e in registry.evaluations(f"{model}@2")] == [imported.name]
    assert registry.evaluations(f"{model}@1") == []
    assert registry.evaluation(imported.name).display_name == "run-2"
    with pytest.raises(ApiError, match="not one of Vertex's evaluation schemata"):
        registry.import_evaluation(model, v1.ModelEvaluation(metrics_schema_uri="gs://mine/schema.yaml"))


def test_the_models_and_endpoints_outlive_the_stand_ins(tmp_path):
    """A later rehearsal finds the versions, aliases, evaluations and endpoints an earlier one made."""
    from rehearsal.cloud.endpoints import VertexModels
    from tests.support import tiny_model

    tiny_model.save(str(tmp_path / "gcs" / "b" / "m"))
    state = str(tmp_path / "cloud" / "vertex_models.json")

    def stand_ins() -> VertexModels:
        return VertexModels(str(tmp_path / "gcs"), "/no/python", str(tmp_path / "work"), state_path=state)

    first = stand_ins()
    model = v1.Model(display_name="taxi", artifact_uri="gs://b/m")
    uploaded = first.upload_model(v1.UploadModelRequest(parent=PARENT, model=model))
    name = v1.UploadModelResponse.deserialize(uploaded.response.value).model
    first.import_model_evaluation(
        v1.ImportModelEvaluationRequest(parent=name, model_evaluation=v1.ModelEvaluation(metrics_schema_uri=SCHEMA))
    )
    first.create_endpoint(v1.CreateEndpointRequest(parent=PARENT, endpoint=v1.Endpoint(display_name="serving")))
    first.stop()
    later = stand_ins()
    again = later.upload_model(v1.UploadModelRequest(parent=PARENT, model=model, parent_model=name))
    assert v1.UploadModelResponse.deserialize(again.response.value).model_version_id == "2"
    assert [e.display_name for e in later.list_endpoints(v1.ListEndpointsRequest(parent=PARENT)).endpoints] == [
        "serving"
    ]
    assert len(later.list_model_evaluations(v1.ListModelEvaluationsRequest(parent=f"{name}@1")).model_evaluations) == 1
    # New resources never reuse an earlier rehearsal's ids.
    assert int(again.name.rsplit("/", 1)[1]) > int(name.rsplit("/", 1)[1])


def test_an_explanation_spec_is_kept_when_its_shape_is_what_vertex_takes(registry):
    spec = v1.ExplanationSpec(
        parameters=v1.ExplanationParameters(sampled_shapley_attribution=v1.SampledShapleyAttribution(path_count=10)),
        metadata=v1.ExplanationMetadata(
            inputs={"fare": v1.ExplanationMetadata.InputMetadata(input_tensor_name="fare")},
            outputs={"probability": v1.ExplanationMetadata.OutputMetadata(output_tensor_name="probability")},
        ),
    )
    model = v1.Model(display_name="taxi", artifact_uri="gs://b/m", explanation_spec=spec)
    version = registry.add(PARENT, v1.UploadModelRequest(parent=PARENT, model=model), "/m")
    assert version.resource.explanation_spec == spec
    model.explanation_spec.parameters.sampled_shapley_attribution.path_count = 51
    with pytest.raises(ApiError, match="path_count must be 1-50"):
        registry.add(PARENT, v1.UploadModelRequest(parent=PARENT, model=model), "/m")
