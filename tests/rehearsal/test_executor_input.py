"""ExecutorInput as Vertex builds it, the driver's output merged, placeholders resolved."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from rehearsal import executor_input as ei
from rehearsal.job import CompiledJob, JobError
from tests.support import cloud

EXAMPLES_TYPE = {"instanceSchema": "title: tfx.Examples\ntype: object\n"}


def _artifact(name: str, uri: str, metadata=None) -> dict:
    return {"name": name, "uri": uri, "type": EXAMPLES_TYPE, "metadata": metadata or {}}


@pytest.fixture(scope="module")
def job(compiled_job) -> CompiledJob:
    return CompiledJob.load(str(compiled_job[0]))


def test_parameters_are_typed_as_compiled_and_keep_their_gs_paths(job):
    params = ei.parameter_values(job.tasks()["CsvExampleGen"], job.runtime_parameters)
    assert params["input_base"] == {"stringValue": cloud.DATA_ROOT}
    assert params["output_data_format"] == {"intValue": "6"}
    pusher = ei.parameter_values(job.tasks()["Pusher"], job.runtime_parameters)
    destination = json.loads(pusher["push_destination"]["stringValue"])["filesystem"]["base_directory"]
    assert destination == f"gs://{cloud.BUCKET}/tfx/serving_model/taxi-big-tipper"


def test_the_executor_input_fills_both_parameter_fields_and_parses_as_kfp_proto(job, tmp_path):
    params = ei.parameter_values(job.tasks()["CsvExampleGen"], {})
    out = _artifact("projects/p/locations/l/metadataStores/default/artifacts/3", "/r/CsvExampleGen_3/examples")
    built = ei.build(params, {}, {"examples": [out]}, "/r/CsvExampleGen_3/executor_output.json")
    assert built["inputs"]["parameterValues"]["output_data_format"] == 6
    assert built["inputs"]["parameters"]["output_data_format"] == {"intValue": "6"}
    proto = json_format.Parse(json.dumps(built), pipeline_spec_pb2.ExecutorInput())
    assert proto.outputs.artifacts["examples"].artifacts[0].name.endswith("/artifacts/3")
    assert proto.outputs.output_file.endswith("executor_output.json")


def test_the_drivers_values_reach_both_fields_and_the_output_metadata():
    built = ei.build({"input_config": {"stringValue": "{}"}}, {}, {"examples": [_artifact("n", "u")]}, "/o")
    ei.merge_driver_output(
        built,
        {
            "parameterValues": {"span": 0.0, "input_fingerprint": "split:x", "input_config": '{"a": 1}'},
            "artifacts": {"examples": {"artifacts": [{"metadata": {"custom:span": 0.0, "input_fingerprint": "f"}}]}},
        },
    )
    assert built["inputs"]["parameters"]["span"] == {"intValue": "0"}
    assert built["inputs"]["parameters"]["input_config"] == {"stringValue": '{"a": 1}'}
    assert built["inputs"]["parameterValues"]["input_fingerprint"] == "split:x"
    assert built["outputs"]["artifacts"]["examples"]["artifacts"][0]["metadata"]["input_fingerprint"] == "f"


def test_placeholders_resolve_against_the_executor_input():
    model = _artifact("projects/p/artifacts/9", "/m", {"current_model_id": "projects/p/artifacts/8"})
    built = ei.build({"k": {"stringValue": "v"}}, {"input": [model]}, {}, "/o/out.json")
    assert json.loads(ei.resolve("{{$}}", built)) == built
    assert ei.resolve("name=\"{{$.inputs.artifacts['input'].metadata['current_model_id']}}\"", built) == (
        'name="projects/p/artifacts/8"'
    )
    assert ei.resolve("{{$.inputs.artifacts['input'].uri}} {{$.inputs.parameters['k']}}", built) == "/m v"
    assert ei.resolve("{{$.outputs.output_file}}", built) == "/o/out.json"


def test_an_unknown_placeholder_is_an_error_and_an_empty_input_is_said_so():
    built = ei.build({}, {"input": []}, {}, "/o")
    with pytest.raises(JobError, match="does not know the placeholder"):
        ei.resolve("{{$.pipeline_job_name}}", built)
    with pytest.raises(ei.EmptyInputError, match="no input artifact 'input'"):
        ei.resolve("{{$.inputs.artifacts['input'].uri}}", built)
