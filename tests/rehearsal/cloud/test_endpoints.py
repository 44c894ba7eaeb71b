"""The Vertex AI stand-ins for models, endpoints and predictions (rehearsal/cloud/
endpoints.py), driven by the real ``google-cloud-aiplatform`` gapic clients on an insecure
channel and by plain HTTP to the REST server, with a small SavedModel served by
TensorFlow 2.15 (model_server.py) as Vertex's prebuilt container would serve it."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from concurrent import futures

import grpc
import pytest
import tensorflow as tf
from google.api_core import exceptions
from google.cloud import aiplatform_v1 as v1
from google.cloud.aiplatform_v1.services.endpoint_service.transports import EndpointServiceGrpcTransport
from google.cloud.aiplatform_v1.services.model_service.transports import ModelServiceGrpcTransport
from google.cloud.aiplatform_v1.services.prediction_service.transports import PredictionServiceGrpcTransport

from kubeflow_runner import DEFAULT_SERVING_PYTHON
from rehearsal.cloud.certificates import make_certificates
from rehearsal.cloud.endpoints import ApiError, VertexModels, _matches, _traffic_after_deploy
from rehearsal.cloud.proxy import Proxy, Route
from rehearsal.cloud.standins import proxy_environment
from tests.support.tiny_model import ROWS, TinyModel, b64_instances, example, expected_probability

PARENT = "projects/my-proj/locations/us-central1"
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"
ARTIFACT_URI = "gs://bucket/models/1"
REGION_HOST = "https://us-central1-aiplatform.googleapis.com"


@pytest.fixture(scope="module")
def gcs(tmp_path_factory) -> str:
    """A "gcs folder" holding the model at gs://bucket/models/1, and a model that does not load."""
    folder = tmp_path_factory.mktemp("gcs")
    model = TinyModel()
    signatures = {"serving_default": model.default, "serving_raw": model.raw, "double": model.double}
    tf.saved_model.save(model, str(folder / "bucket/models/1"), signatures=signatures)
    (folder / "bucket/broken").mkdir(parents=True)
    (folder / "bucket/broken/saved_model.pb").write_bytes(b"not a SavedModel")
    return str(folder)


@pytest.fixture(scope="module")
def vertex(gcs, tmp_path_factory):
    assert os.path.exists(DEFAULT_SERVING_PYTHON), "make test installs it (make serving-env)"
    models = VertexModels(gcs, DEFAULT_SERVING_PYTHON, str(tmp_path_factory.mktemp("endpoints")))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    models.add_to_server(server)
    models.grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    models.rest_port = models.start_rest()
    yield models
    models.stop()
    server.stop(grace=None)


@pytest.fixture(scope="module")
def channel(vertex):
    with grpc.insecure_channel(f"127.0.0.1:{vertex.grpc_port}") as channel:
        yield channel


@pytest.fixture(scope="module")
def model_client(channel):
    return v1.ModelServiceClient(transport=ModelServiceGrpcTransport(channel=channel))


@pytest.fixture(scope="module")
def endpoint_client(channel):
    return v1.EndpointServiceClient(transport=EndpointServiceGrpcTransport(channel=channel))


@pytest.fixture(scope="module")
def prediction_client(channel):
    return v1.PredictionServiceClient(transport=PredictionServiceGrpcTransport(channel=channel))


def upload(model_client, artifact_uri: str = ARTIFACT_URI, display_name: str = "v1") -> v1.UploadModelResponse:
    model = v1.Model(
        display_name=display_name, artifact_uri=artifact_uri, container_spec=v1.ModelContainerSpec(image_uri=IMAGE)
    )
    return model_client.upload_model(parent=PARENT, model=model).result(timeout=30)


def create_endpoint(endpoint_client, display_name: str) -> v1.Endpoint:
    endpoint = v1.Endpoint(display_name=display_name, labels={"tfx_version": "1-16-0"})
    return endpoint_client.create_endpoint(parent=PARENT, endpoint=endpoint).result(timeout=30)


@pytest.fixture(scope="module")
def deployed(model_client, endpoint_client):
    """What TFX's VertexPredictionClient does: an endpoint, the model uploaded, deployed to it."""
    endpoint = create_endpoint(endpoint_client, "taxi")
    uploaded = upload(model_client)
    operation = endpoint_client.deploy_model(
        endpoint=endpoint.name,
        deployed_model=v1.DeployedModel(
            model=f"{uploaded.model}@1",
            dedicated_resources=v1.DedicatedResources(
                machine_spec=v1.MachineSpec(machine_type="n1-standard-2"), min_replica_count=1, max_replica_count=1
            ),
        ),
        traffic_split={"0": 100},
    )
    deployed_model = operation.result(timeout=120).deployed_model
    return endpoint_client.get_endpoint(name=endpoint.name), uploaded, deployed_model


def listed(endpoint_client, filter_text: str, parent: str = PARENT) -> list[v1.Endpoint]:
    return list(endpoint_client.list_endpoints(request=v1.ListEndpointsRequest(parent=parent, filter=filter_text)))


def post(vertex, path: str, body, headers=None) -> tuple[int, dict, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", vertex.rest_port, timeout=60)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, dict(response.getheaders()), answer


def test_upload_create_list_and_deploy_as_the_pusher_does(vertex, deployed, model_client, endpoint_client):
    endpoint, uploaded, deployed_model = deployed
    assert uploaded.model.startswith(f"{PARENT}/models/") and uploaded.model_version_id == "1"
    model = model_client.get_model(name=f"{uploaded.model}@1")
    assert (model.name, model.version_id, model.display_name) == (uploaded.model, "1", "v1")
    assert model.artifact_uri == ARTIFACT_URI and model.container_spec.image_uri == IMAGE
    assert v1.Model.DeploymentResourcesType.DEDICATED_RESOURCES in model.supported_deployment_resources_types
    assert [r.deployed_model_id for r in model.deployed_models] == [deployed_model.id]

    assert (deployed_model.model, deployed_model.model_version_id) == (uploaded.model, "1")
    assert deployed_model.display_name == "v1"  # the model's, as TFX's undeploy by display name expects
    assert dict(endpoint.traffic_split) == {deployed_model.id: 100}
    assert [d.id for d in endpoint.deployed_models] == [deployed_model.id]
    assert endpoint.deployed_models[0].dedicated_resources.machine_spec.machine_type == "n1-standard-2"

    create_endpoint(endpoint_client, "another")
    found = listed(endpoint_client, 'display_name="taxi"')
    assert [e.name for e in found] == [endpoint.name] and found[0].labels["tfx_version"] == "1-16-0"
    assert not listed(endpoint_client, 'display_name="none"')
    assert not listed(endpoint_client, "", parent="projects/my-proj/locations/europe-west4")

    (deployment,) = [d for d in vertex.deployments() if d.endpoint == endpoint.name]
    assert (deployment.endpoint_display_name, deployment.artifact_uri) == ("taxi", ARTIFACT_URI)
    assert deployment.serving_url.endswith("/v1/models/default:predict") and "taxi" in deployment.describe()


def test_predict_answers_with_serving_default_in_tensorflow_2_15(deployed, prediction_client, gcs):
    endpoint, uploaded, deployed_model = deployed
    response = prediction_client.predict(endpoint=endpoint.name, instances=b64_instances(ROWS))
    assert (response.deployed_model_id, response.model, response.model_version_id) == (
        deployed_model.id,
        uploaded.model,
        "1",
    )
    assert response.model_display_name == "v1"
    predictions = [dict(p) for p in response.predictions]
    # What the model gives here, in the project's TensorFlow, and what it is meant to give.
    direct = tf.saved_model.load(os.path.join(gcs, "bucket/models/1")).signatures["serving_default"](
        examples=tf.constant([example(row) for row in ROWS])
    )
    for i, (prediction, row) in enumerate(zip(predictions, ROWS, strict=True)):
        assert prediction["probability"][0] == pytest.approx(direct["probability"].numpy()[i][0], abs=1e-6)
        assert prediction["probability"][0] == pytest.approx(expected_probability(row), abs=1e-6)
        assert prediction["big_tipper"] == [1 if expected_probability(row) > 0.5 else 0]
        assert prediction["company"] == row["company"]


def test_raw_predict_passes_the_body_and_its_answer_unchanged(vertex, deployed):
    endpoint, uploaded, deployed_model = deployed
    path = f"/v1/{endpoint.name}:rawPredict"
    status, headers, answer = post(vertex, path, {"signature_name": "serving_raw", "instances": ROWS})
    assert status == 200, answer
    assert headers["X-Vertex-AI-Deployed-Model-Id"] == deployed_model.id
    assert headers["X-Vertex-AI-Model"] == uploaded.model and headers["X-Vertex-AI-Model-Version-Id"] == "1"
    assert set(answer) == {"predictions"}  # TF Serving's own body, nothing of Vertex's added
    assert [p["probability"][0] for p in answer["predictions"]] == pytest.approx(
        [expected_probability(row) for row in ROWS], abs=1e-6
    )
    # One output: TF Serving's bare values; a bare instance for a single-input signature.
    assert post(vertex, path, {"signature_name": "double", "instances": [1, 2.5]})[2] == {"predictions": [2.0, 5.0]}
    # The model server's own errors, status and body, are passed on too.
    status, _, answer = post(vertex, path, {"signature_name": "serving_raw", "instances": [{"fare": "1"}]})
    assert status == 400 and "does not have the named input(s) ['company']" in answer["error"]


def test_rest_predict_answers_as_vertex_does(vertex, deployed):
    endpoint, uploaded, deployed_model = deployed
    status, _, answer = post(vertex, f"/v1/{endpoint.name}:predict", {"instances": b64_instances(ROWS[:1])})
    assert status == 200, answer
    assert answer["deployedModelId"] == deployed_model.id and answer["model"] == uploaded.model
    assert (answer["modelDisplayName"], answer["modelVersionId"]) == ("v1", "1")
    assert answer["predictions"][0]["probability"][0] == pytest.approx(expected_probability(ROWS[0]), abs=1e-6)

    status, _, answer = post(vertex, f"/v1/{endpoint.name}:predict", {"instances": [{"fare": 1}]})
    assert status == 400 and answer["error"]["status"] == "FAILED_PRECONDITION"
    assert "does not have the named input(s) ['fare']" in answer["error"]["message"]
    status, _, answer = post(vertex, f"/v1/{endpoint.name}:predict", b"not json")
    assert status == 400 and answer["error"]["status"] == "INVALID_ARGUMENT"


def test_an_unknown_endpoint_is_404_and_an_empty_one_400(vertex, endpoint_client, prediction_client):
    status, _, answer = post(vertex, f"/v1/{PARENT}/endpoints/404:rawPredict", {"instances": []})
    assert status == 404 and answer["error"]["code"] == 404 and answer["error"]["status"] == "NOT_FOUND"
    empty = create_endpoint(endpoint_client, "empty")
    status, _, answer = post(vertex, f"/v1/{empty.name}:predict", {"instances": [1]})
    assert status == 400 and "no deployed model" in answer["error"]["message"]
    with pytest.raises(exceptions.FailedPrecondition, match="no deployed model"):
        prediction_client.predict(endpoint=empty.name, instances=[1])


def test_an_upload_from_a_folder_without_a_model_fails_saying_where(model_client):
    with pytest.raises(exceptions.InvalidArgument, match=r"gs://bucket/nothing is expected to contain .*saved_model"):
        upload(model_client, "gs://bucket/nothing")
    with pytest.raises(exceptions.InvalidArgument, match="must be a gs:// URI"):
        upload(model_client, "/tmp/model")


def test_a_model_that_does_not_load_fails_its_deploy_with_the_server_log(model_client, endpoint_client):
    endpoint = create_endpoint(endpoint_client, "broken")
    uploaded = upload(model_client, "gs://bucket/broken", "broken")
    operation = endpoint_client.deploy_model(
        endpoint=endpoint.name, deployed_model=v1.DeployedModel(model=uploaded.model)
    )
    with pytest.raises(exceptions.FailedPrecondition, match=r"(?s)never became ready.*exited with code 1.*Error"):
        operation.result(timeout=120)
    assert not endpoint_client.get_endpoint(name=endpoint.name).deployed_models


def test_undeploy_stops_the_model_server_and_the_endpoint_can_go(vertex, model_client, endpoint_client, deployed):
    endpoint = create_endpoint(endpoint_client, "short-lived")
    uploaded = upload(model_client, display_name="v2")
    deployed_model = (
        endpoint_client.deploy_model(endpoint=endpoint.name, deployed_model=v1.DeployedModel(model=uploaded.model))
        .result(timeout=120)
        .deployed_model
    )
    (deployment,) = [d for d in vertex.deployments() if d.endpoint == endpoint.name]
    with pytest.raises(exceptions.FailedPrecondition, match="has deployed models"):
        endpoint_client.delete_endpoint(name=endpoint.name).result(timeout=30)
    endpoint_client.undeploy_model(endpoint=endpoint.name, deployed_model_id=deployed_model.id).result(timeout=30)
    assert not [d for d in vertex.deployments() if d.endpoint == endpoint.name]
    with pytest.raises(ConnectionError):
        http.client.HTTPConnection(deployment.serving_url.split("/")[2]).request("GET", "/v1/models/default")
    endpoint_client.delete_endpoint(name=endpoint.name).result(timeout=30)
    with pytest.raises(exceptions.NotFound):
        endpoint_client.get_endpoint(name=endpoint.name)
    assert [d.endpoint for d in vertex.deployments()] == [deployed[0].name]  # the other one still serves


def test_a_method_not_served_is_unimplemented_and_noted(vertex, model_client):
    with pytest.raises(exceptions.MethodNotImplemented):
        model_client.delete_model(name=f"{PARENT}/models/1")
    assert "/google.cloud.aiplatform.v1.ModelService/DeleteModel" in vertex.unimplemented


def test_list_filters_are_display_names_and_labels():
    endpoint = v1.Endpoint(display_name="taxi", labels={"team": "ml"})
    assert _matches('display_name="taxi"', endpoint) and _matches("", endpoint)
    assert _matches('display_name = "taxi" AND labels.team="ml"', endpoint)
    assert not _matches('labels.team="ops"', endpoint)
    with pytest.raises(ApiError, match="not understood"):
        _matches("create_time>2024", endpoint)


def test_the_traffic_split_after_a_deploy():
    empty = v1.Endpoint()
    assert _traffic_after_deploy(empty, "7", {}) == {"7": 100}
    serving = v1.Endpoint(deployed_models=[v1.DeployedModel(id="5")], traffic_split={"5": 100})
    assert _traffic_after_deploy(serving, "7", {}) == {"5": 100}
    assert _traffic_after_deploy(serving, "7", {"0": 30, "5": 70}) == {"7": 30, "5": 70}
    assert _traffic_after_deploy(serving, "7", {"0": 100, "5": 0}) == {"7": 100, "5": 0}  # the SDK's, to a new model
    with pytest.raises(ApiError, match="add up to 100"):
        _traffic_after_deploy(serving, "7", {"0": 30})


# What the rehearsed Pusher does (TFX's own Vertex client), then the documented calls to
# the deployed model, in a process that knows only the proxy and its certificate authority.
# Anonymous credentials: the OAuth stand-in is not this module's.
TASK = """
import json, sys
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform
from tfx.extensions.google_cloud_ai_platform.prediction_clients import VertexPredictionClient

given = json.loads(sys.argv[1])
project = given["project"]
aiplatform.init(project=project, credentials=AnonymousCredentials())
model = VertexPredictionClient().deploy_model(
    serving_path=given["artifact_uri"],
    model_version_name="v1700000000",
    ai_platform_serving_args={"project_id": project, "endpoint_name": "pushed", "machine_type": "n1-standard-2"},
    labels={"tfx_version": "1-16-0"},
    serving_container_image_uri=given["image"],
    endpoint_region="us-central1",
)
(listed,) = aiplatform.Endpoint.list(filter='display_name="pushed"')
endpoint = aiplatform.Endpoint(listed.name.split("/")[-1], project=project, location="us-central1")
predicted = endpoint.predict(instances=given["instances"])
raw = endpoint.raw_predict(
    body=json.dumps({"signature_name": "serving_raw", "instances": given["rows"]}).encode(),
    headers={"Content-Type": "application/json"},
)
print(json.dumps({
    "model": model,
    "endpoint": endpoint.resource_name,
    "labels": dict(endpoint.labels),
    "deployed": [m.display_name for m in endpoint.list_models()],
    "predictions": predicted.predictions,
    "deployed_model_id": predicted.deployed_model_id,
    "raw": [raw.status_code, raw.json()],
}))
"""


def test_tfx_pushes_and_the_sdk_and_curl_predict_through_the_proxy(vertex, tmp_path):
    certificates = make_certificates(str(tmp_path / "tls"))
    proxy = Proxy([Route("*-aiplatform.googleapis.com", http1=vertex.rest_port, h2=vertex.grpc_port)], certificates)
    address = f"http://127.0.0.1:{proxy.start()}"
    env = {**os.environ, **proxy_environment(address, certificates.authority)}
    given = {
        "project": "my-proj",
        "artifact_uri": ARTIFACT_URI,
        "image": IMAGE,
        "instances": b64_instances(ROWS),
        "rows": ROWS,
    }
    try:
        task = subprocess.run(
            [sys.executable, "-c", TASK, json.dumps(given)], env=env, capture_output=True, text=True, timeout=300
        )
        assert task.returncode == 0, task.stderr[-3000:]
        done = json.loads(task.stdout.strip().splitlines()[-1])
        raw_body = json.dumps({"signature_name": "serving_raw", "instances": ROWS})
        curl = subprocess.run(
            ["curl", "-sS", "-X", "POST", "-H", "Content-Type: application/json", "-d", raw_body]
            + [f"{REGION_HOST}/v1/{done['endpoint']}:rawPredict"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        proxy.stop()
    assert done["model"].startswith(f"{PARENT}/models/") and done["deployed"] == ["v1700000000"]
    assert done["labels"] == {"tfx_version": "1-16-0"}
    probabilities = [expected_probability(row) for row in ROWS]
    assert [p["probability"][0] for p in done["predictions"]] == pytest.approx(probabilities, abs=1e-6)
    status, raw = done["raw"]
    assert status == 200 and [p["probability"][0] for p in raw["predictions"]] == pytest.approx(probabilities, abs=1e-6)
    assert curl.returncode == 0 and json.loads(curl.stdout) == raw, curl.stderr
    assert not [c for c in proxy.connections() if c.refused]
    assert set(vertex.unimplemented) <= {"/google.cloud.aiplatform.v1.ModelService/DeleteModel"}  # that test's
