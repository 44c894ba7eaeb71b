"""Stand-ins for Vertex AI's Model, Endpoint, Operations and Prediction services (gRPC, with the
REST routes of ``rest.py``), so a rehearsal's Pusher and the calls to a deployed model run
unchanged here; each deployed model is served by a model server of its own (``model_servers.py``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import random
import re
import shutil
import threading
from collections.abc import Callable

import grpc
import proto
from google.api import httpbody_pb2
from google.cloud import aiplatform_v1 as v1
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2, json_format, struct_pb2

from rehearsal.cloud.api_error import ApiError
from rehearsal.cloud.batch import BatchPredictions
from rehearsal.cloud.model_servers import PREDICT_ROUTE, ModelServer, ModelServerError, http_request
from rehearsal.cloud.registry import Registry, Version, copy, now, parse_name
from rehearsal.cloud.rest import RestCalls, RestServer

log = logging.getLogger(__name__)

V1 = "google.cloud.aiplatform.v1."
FILTER_TERM = re.compile(r'^\s*(?P<key>display_name|labels\.[\w-]+)\s*=\s*"(?P<value>[^"]*)"\s*$')


# --- Resource names and filters -------------------------------------------------------------


def _parent(parent: str) -> tuple[str, str]:
    match = re.fullmatch(r"projects/([^/]+)/locations/([^/]+)", parent)
    if not match:
        raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"not a location: {parent!r}")
    return match.group(1), match.group(2)


def _matches(filter_text: str, resource) -> bool:
    """Whether ``resource`` passes a Vertex list filter of ``key="value"`` terms joined by AND
    (``display_name``, ``labels.KEY``): the filters the SDK and TFX send."""
    for term in re.split(r"\s+AND\s+", filter_text.strip()) if filter_text.strip() else []:
        match = FILTER_TERM.match(term)
        if not match:
            raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"filter not understood by the stand-in: {filter_text!r}")
        key, value = match.group("key"), match.group("value")
        actual = resource.display_name if key == "display_name" else resource.labels.get(key[len("labels.") :])
        if actual != value:
            return False
    return True


# --- The stand-in ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Deployment:
    """One model deployed to one endpoint, for the rehearsal's summary."""

    endpoint: str
    endpoint_display_name: str
    deployed_model_id: str
    model: str
    model_version_id: str
    model_display_name: str
    artifact_uri: str
    traffic_percentage: int
    serving_url: str

    def describe(self) -> str:
        return (
            f"{self.endpoint_display_name} ({self.endpoint}) serves {self.model_display_name} "
            f"({self.model} version {self.model_version_id}, "
            f"from {self.artifact_uri}) as deployed model {self.deployed_model_id} with {self.traffic_percentage}% "
            "of its traffic, answering TensorFlow Serving's REST API from the serving TensorFlow"
        )


def _serialize(message) -> bytes:
    """The wire bytes of a proto-plus or a protobuf message."""
    return type(message).serialize(message) if isinstance(message, proto.Message) else message.SerializeToString()


def _handler(fn: Callable, request_type) -> grpc.RpcMethodHandler:
    """``fn(request) -> response`` as a unary method; an ``ApiError`` becomes the RPC's status."""

    def handle(request, context: grpc.ServicerContext):
        try:
            return fn(request)
        except ApiError as e:
            context.abort(e.code, e.message)

    deserialize = request_type.deserialize if issubclass(request_type, proto.Message) else request_type.FromString
    return grpc.unary_unary_rpc_method_handler(handle, request_deserializer=deserialize, response_serializer=_serialize)


class _Service(grpc.GenericRpcHandler):
    """One gRPC service's methods; a method it does not have is logged (then UNIMPLEMENTED)."""

    def __init__(self, name: str, methods: dict[str, tuple[Callable, type]], unimplemented: list[str]) -> None:
        self.name, self.unimplemented = name, unimplemented
        self.handlers = {method: _handler(fn, request_type) for method, (fn, request_type) in methods.items()}

    def service(self, handler_call_details):
        service, _, method = handler_call_details.method.lstrip("/").rpartition("/")
        if service != self.name:
            return None
        if method not in self.handlers:
            log.warning("Vertex AI stand-in: %s is not implemented", handler_call_details.method)
            self.unimplemented.append(handler_call_details.method)
        return self.handlers.get(method)


class VertexModels:
    """Vertex AI's models, endpoints, their operations and predictions, on this machine.

    ``gcs_folder``: where ``gs://B/NAME`` lives, as ``<gcs_folder>/B/NAME``;
    ``serving_python``: the TensorFlow 2.15 environment's Python, which runs the model servers;
    ``workdir``: where deployed models are copied and model servers write their logs;
    ``state_path``: a JSON file keeping the models, versions, evaluations and endpoints from
    one rehearsal to the next, as a project keeps them on Vertex (a model deployed by an
    earlier rehearsal gets its model server again when first asked to predict).
    """

    def __init__(
        self,
        gcs_folder: str,
        serving_python: str,
        workdir: str,
        ready_timeout: float = 300.0,
        state_path: str | None = None,
    ) -> None:
        self.gcs_folder, self.serving_python, self.workdir = gcs_folder, serving_python, workdir
        self.ready_timeout, self.state_path = ready_timeout, state_path
        self.unimplemented: list[str] = []
        self._lock = threading.Condition()
        self._ids = itertools.count(1_000_000_001)
        self.registry = Registry(self._ids)
        self.batch = BatchPredictions(self)
        self._endpoints: dict[str, v1.Endpoint] = {}  # by endpoint ID
        self._servers: dict[str, ModelServer] = {}  # by deployed model ID
        self._operations: dict[str, operations_pb2.Operation] = {}
        self._rest: RestServer | None = None
        self._stopped = False  # a deploy finishing later stops its own server
        if state_path and os.path.exists(state_path):
            self._load(state_path)

    # --- State kept across rehearsals ---

    def _load(self, path: str) -> None:
        with open(path) as f:
            state = json.load(f)
        self._ids = itertools.count(state["next_id"])  # ids only grow, across rehearsals too
        self.registry = Registry(self._ids)
        self.registry.from_state(state["models"])
        self._endpoints = {k: v1.Endpoint(v) for k, v in state["endpoints"].items()}

    def _save(self) -> None:
        """Writes the state (when there is a ``state_path``); call after each change."""
        if not self.state_path:
            return
        with self._lock:
            state = {
                "next_id": next(self._ids),  # spent here: a later rehearsal starts from it
                "models": self.registry.to_state(),
                "endpoints": {k: v1.Endpoint.to_dict(e) for k, e in self._endpoints.items()},
            }
            os.makedirs(os.path.dirname(os.path.abspath(self.state_path)), exist_ok=True)
            with open(self.state_path + ".tmp", "w") as f:
                json.dump(state, f, indent=1, sort_keys=True)
            os.replace(self.state_path + ".tmp", self.state_path)

    # --- Wiring ---

    def add_to_server(self, server: grpc.Server) -> None:
        """Registers the four services on ``server`` (before it starts)."""
        server.add_generic_rpc_handlers(self.services())

    def services(self) -> tuple[grpc.GenericRpcHandler, ...]:
        model, endpoint, prediction = (
            {
                "UploadModel": (self.upload_model, v1.UploadModelRequest),
                "GetModel": (self.get_model, v1.GetModelRequest),
                "ListModels": (self.list_models, v1.ListModelsRequest),
                "ListModelVersions": (self.list_model_versions, v1.ListModelVersionsRequest),
                "MergeVersionAliases": (self.merge_version_aliases, v1.MergeVersionAliasesRequest),
                "ImportModelEvaluation": (self.import_model_evaluation, v1.ImportModelEvaluationRequest),
                "ListModelEvaluations": (self.list_model_evaluations, v1.ListModelEvaluationsRequest),
                "GetModelEvaluation": (self.get_model_evaluation, v1.GetModelEvaluationRequest),
            },
            {
                "CreateEndpoint": (self.create_endpoint, v1.CreateEndpointRequest),
                "GetEndpoint": (self.get_endpoint, v1.GetEndpointRequest),
                "UpdateEndpoint": (self.update_endpoint, v1.UpdateEndpointRequest),
                "ListEndpoints": (self.list_endpoints, v1.ListEndpointsRequest),
                "DeployModel": (self.deploy_model, v1.DeployModelRequest),
                "UndeployModel": (self.undeploy_model, v1.UndeployModelRequest),
                "DeleteEndpoint": (self.delete_endpoint, v1.DeleteEndpointRequest),
            },
            {"Predict": (self.predict, v1.PredictRequest), "RawPredict": (self.raw_predict, v1.RawPredictRequest)},
        )
        operations = {
            "GetOperation": (self.get_operation, operations_pb2.GetOperationRequest),
            "WaitOperation": (self.wait_operation, operations_pb2.WaitOperationRequest),
        }
        return (
            _Service(V1 + "ModelService", model, self.unimplemented),
            # Batch prediction only: custom jobs are jobs.py's (registered first when there).
            _Service(V1 + "JobService", self.batch.methods(), self.unimplemented),
            _Service(V1 + "EndpointService", endpoint, self.unimplemented),
            _Service(V1 + "PredictionService", prediction, self.unimplemented),
            _Service("google.longrunning.Operations", operations, self.unimplemented),
        )

    def start_rest(self) -> int:
        """Starts the REST server (``:predict``, ``:rawPredict``) on 127.0.0.1; its port."""
        calls = RestCalls(self.predict_json, self.raw_predict_bytes, self.model_display_name)
        self._rest = RestServer(("127.0.0.1", 0), calls)
        threading.Thread(target=self._rest.serve_forever, name="vertex-rest", daemon=True).start()
        return self._rest.server_address[1]

    def deployments(self) -> list[Deployment]:
        with self._lock:
            return [
                Deployment(
                    endpoint=endpoint.name,
                    endpoint_display_name=endpoint.display_name,
                    deployed_model_id=deployed.id,
                    model=deployed.model,
                    model_version_id=deployed.model_version_id,
                    model_display_name=model.resource.display_name,
                    artifact_uri=model.resource.artifact_uri,
                    traffic_percentage=endpoint.traffic_split.get(deployed.id, 0),
                    serving_url=self._servers[deployed.id].url if deployed.id in self._servers else "",
                )
                for endpoint in self._endpoints.values()
                for deployed in endpoint.deployed_models
                for model in [self.registry.version(f"{deployed.model}@{deployed.model_version_id}")]
            ]

    def stop(self) -> None:
        """Stops the REST server and every model server."""
        if self._rest is not None:
            self._rest.shutdown()
            self._rest.server_close()
            self._rest = None
        with self._lock:
            servers, self._servers, self._stopped = list(self._servers.values()), {}, True
        for server in servers:
            server.stop()

    # --- Operations ---

    def _operation(self, parent: str, metadata) -> operations_pb2.Operation:
        """A new operation under ``parent``, not done, with ``metadata`` (proto-plus) packed."""
        with self._lock:
            operation = operations_pb2.Operation(name=f"{parent}/operations/{next(self._ids)}")
            operation.metadata.Pack(type(metadata).pb(metadata))
            self._operations[operation.name] = operation
            return operations_pb2.Operation.FromString(operation.SerializeToString())

    def _finish(self, name: str, response=None, error: ApiError | None = None) -> operations_pb2.Operation:
        """Marks an operation done with ``response`` (proto-plus or protobuf) or ``error``."""
        with self._lock:
            operation = self._operations[name]
            if error is not None:
                operation.error.CopyFrom(error.status())
            else:
                operation.response.Pack(
                    type(response).pb(response) if isinstance(response, proto.Message) else response
                )
            operation.done = True
            self._lock.notify_all()
            return operations_pb2.Operation.FromString(operation.SerializeToString())

    def get_operation(self, request: operations_pb2.GetOperationRequest) -> operations_pb2.Operation:
        with self._lock:
            if request.name not in self._operations:
                raise ApiError(grpc.StatusCode.NOT_FOUND, f"Operation {request.name} not found")
            return operations_pb2.Operation.FromString(self._operations[request.name].SerializeToString())

    def wait_operation(self, request: operations_pb2.WaitOperationRequest) -> operations_pb2.Operation:
        timeout = request.timeout.ToTimedelta().total_seconds() if request.HasField("timeout") else 60.0
        with self._lock:
            self._lock.wait_for(lambda: self._operations.get(request.name, _DONE).done, timeout)
        return self.get_operation(operations_pb2.GetOperationRequest(name=request.name))

    @staticmethod
    def _metadata(kind):
        moment = now()
        return kind(generic_metadata=v1.GenericOperationMetadata(create_time=moment, update_time=moment))

    # --- ModelService ---

    def upload_model(self, request: v1.UploadModelRequest) -> operations_pb2.Operation:
        """A new model, or with ``parent_model`` its next version (``registry.py``)."""
        project, location = _parent(request.parent)
        model_dir = self._local_model_dir(request.model.artifact_uri)
        image = request.model.container_spec.image_uri
        if "/vertex-ai/prediction/tf2-" not in image:
            log.warning("Vertex AI stand-in: %s is served as TensorFlow Serving would serve it", image or "no image")
        version = self.registry.add(f"projects/{project}/locations/{location}", request, model_dir)
        self._save()
        resource = version.resource
        operation = self._operation(resource.name, self._metadata(v1.UploadModelOperationMetadata))
        return self._finish(
            operation.name, v1.UploadModelResponse(model=resource.name, model_version_id=resource.version_id)
        )

    def _local_model_dir(self, artifact_uri: str) -> str:
        """The folder ``artifact_uri`` names; it must hold a SavedModel, as the TF container needs."""
        if not artifact_uri.startswith("gs://"):
            raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"artifact_uri must be a gs:// URI, not {artifact_uri!r}")
        local = os.path.join(self.gcs_folder, artifact_uri[len("gs://") :].rstrip("/"))
        if not any(os.path.isfile(os.path.join(local, name)) for name in ("saved_model.pb", "saved_model.pbtxt")):
            found = "it does not exist" if not os.path.isdir(local) else f"it holds {sorted(os.listdir(local))}"
            raise ApiError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Model directory {artifact_uri} is expected to contain exactly one of: "
                f"[saved_model.pb, saved_model.pbtxt] ({found}; the stand-in reads it at {local})",
            )
        return local

    def get_model(self, request: v1.GetModelRequest) -> v1.Model:
        return copy(self.registry.version(request.name).resource)

    def list_models(self, request: v1.ListModelsRequest) -> v1.ListModelsResponse:
        project, location = _parent(request.parent)
        models = self.registry.defaults(f"projects/{project}/locations/{location}/")
        return v1.ListModelsResponse(models=[m for m in models if _matches(request.filter, m)])

    def list_model_versions(self, request: v1.ListModelVersionsRequest) -> v1.ListModelVersionsResponse:
        versions = self.registry.versions(request.name)
        return v1.ListModelVersionsResponse(models=[m for m in versions if _matches(request.filter, m)])

    def merge_version_aliases(self, request: v1.MergeVersionAliasesRequest) -> v1.Model:
        merged = self.registry.merge_aliases(request.name, list(request.version_aliases))
        self._save()
        return merged

    def import_model_evaluation(self, request: v1.ImportModelEvaluationRequest) -> v1.ModelEvaluation:
        imported = self.registry.import_evaluation(request.parent, request.model_evaluation)
        self._save()
        return imported

    def list_model_evaluations(self, request: v1.ListModelEvaluationsRequest) -> v1.ListModelEvaluationsResponse:
        return v1.ListModelEvaluationsResponse(model_evaluations=self.registry.evaluations(request.parent))

    def get_model_evaluation(self, request: v1.GetModelEvaluationRequest) -> v1.ModelEvaluation:
        return self.registry.evaluation(request.name)

    # --- EndpointService ---

    def create_endpoint(self, request: v1.CreateEndpointRequest) -> operations_pb2.Operation:
        project, location = _parent(request.parent)
        with self._lock:
            endpoint_id = request.endpoint_id or str(next(self._ids))
            if endpoint_id in self._endpoints:
                raise ApiError(grpc.StatusCode.ALREADY_EXISTS, f"Endpoint {endpoint_id} already exists")
            endpoint = copy(request.endpoint)
            endpoint.name = f"projects/{project}/locations/{location}/endpoints/{endpoint_id}"
            endpoint.create_time = endpoint.update_time = now()
            endpoint.etag = "1"
            self._endpoints[endpoint_id] = endpoint
            created = copy(endpoint)
            self._save()
        operation = self._operation(endpoint.name, self._metadata(v1.CreateEndpointOperationMetadata))
        return self._finish(operation.name, created)

    def _endpoint(self, name: str) -> v1.Endpoint:
        """The endpoint (not a copy: hold the lock) ``name`` or its ID names."""
        _, location, endpoint_id = parse_name(name, "endpoints") if "/" in name else ("", "", name)
        endpoint = self._endpoints.get(endpoint_id)
        if endpoint is None or (location and parse_name(endpoint.name, "endpoints")[1] != location):
            raise ApiError(grpc.StatusCode.NOT_FOUND, f"Endpoint {name} not found.")
        return endpoint

    def get_endpoint(self, request: v1.GetEndpointRequest) -> v1.Endpoint:
        with self._lock:
            return copy(self._endpoint(request.name))

    def update_endpoint(self, request: v1.UpdateEndpointRequest) -> v1.Endpoint:
        """Changes the fields ``update_mask`` names: the traffic split (of deployed models
        only, adding up to 100), display name, description or labels."""
        paths = list(request.update_mask.paths)
        if unknown := sorted(set(paths) - {"traffic_split", "display_name", "description", "labels"}):
            raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"the stand-in does not update {unknown}")
        with self._lock:
            endpoint = self._endpoint(request.endpoint.name)
            if "traffic_split" in paths:
                split = {k: v for k, v in request.endpoint.traffic_split.items() if v}
                known = {d.id for d in endpoint.deployed_models}
                if unknown_ids := sorted(set(split) - known):
                    raise ApiError(
                        grpc.StatusCode.INVALID_ARGUMENT, f"traffic_split names unknown deployed models {unknown_ids}"
                    )
                if endpoint.deployed_models and sum(split.values()) != 100:
                    raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"traffic_split must add up to 100, not {split}")
                endpoint.traffic_split = split
            for field in ("display_name", "description", "labels"):
                if field in paths:
                    setattr(endpoint, field, getattr(request.endpoint, field))
            endpoint.update_time = now()
            endpoint.etag = str(int(endpoint.etag or "0") + 1)
            self._save()
            return copy(endpoint)

    def list_endpoints(self, request: v1.ListEndpointsRequest) -> v1.ListEndpointsResponse:
        project, location = _parent(request.parent)
        prefix = f"projects/{project}/locations/{location}/"
        with self._lock:
            endpoints = [copy(e) for e in self._endpoints.values() if e.name.startswith(prefix)]
        return v1.ListEndpointsResponse(endpoints=[e for e in endpoints if _matches(request.filter, e)])

    def deploy_model(self, request: v1.DeployModelRequest) -> operations_pb2.Operation:
        """Answers at once; a thread starts the model server and finishes the operation."""
        model = self.registry.version(request.deployed_model.model)
        with self._lock:
            endpoint = self._endpoint(request.endpoint)
            deployed = copy(request.deployed_model)
            deployed.id = deployed.id or str(next(self._ids))
            deployed.model, deployed.model_version_id = model.resource.name, model.resource.version_id
            deployed.display_name = deployed.display_name or model.resource.display_name
            deployed.create_time = now()
            split = _traffic_after_deploy(endpoint, deployed.id, dict(request.traffic_split))
            name = endpoint.name
        operation = self._operation(name, self._metadata(v1.DeployModelOperationMetadata))
        threading.Thread(
            target=self._deploy, args=(operation.name, name, deployed, model, split), name=f"deploy-{deployed.id}"
        ).start()
        return operation

    def _deploy(self, operation: str, endpoint_name: str, deployed: v1.DeployedModel, model: Version, split) -> None:
        try:
            server = self._serve(deployed.id, model)
        except ModelServerError as e:
            log.error("Vertex AI stand-in: deploying %s failed: %s", model.resource.name, e)
            error = ApiError(grpc.StatusCode.FAILED_PRECONDITION, f"Model server never became ready: {e}")
            self._finish(operation, error=error)
            return
        except Exception as e:  # the operation must finish, or the SDK polls on
            log.exception("Vertex AI stand-in: deploying %s failed", model.resource.name)
            self._finish(operation, error=ApiError(grpc.StatusCode.INTERNAL, f"deploying failed: {e!r}"))
            return
        with self._lock:
            try:
                if self._stopped:
                    raise ApiError(grpc.StatusCode.UNAVAILABLE, "the Vertex AI stand-in has stopped")
                endpoint = self._endpoint(endpoint_name)
            except ApiError as e:
                server.stop()
                self._finish(operation, error=e)
                return
            endpoint.deployed_models.append(deployed)
            endpoint.traffic_split = split
            endpoint.update_time = now()
            model.resource.deployed_models.append(
                v1.DeployedModelRef(endpoint=endpoint_name, deployed_model_id=deployed.id)
            )
            self._servers[deployed.id] = server
            self._save()
            self._finish(operation, v1.DeployModelResponse(deployed_model=deployed))
        log.info("Vertex AI stand-in: %s serves %s at %s", endpoint_name, model.resource.artifact_uri, server.url)

    def _serve(self, deployed_id: str, model: Version) -> ModelServer:
        """Copies the model's folder (Vertex copies ``artifact_uri`` into its container) and
        starts a model server on the copy."""
        folder = os.path.join(self.workdir, "deployed", deployed_id)
        copy = os.path.join(folder, "model")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(model.model_dir, copy)
        return ModelServer.start(self.serving_python, copy, folder, self.ready_timeout)

    def server_for(self, version: Version) -> tuple[int, Callable[[], None]]:
        """A model server's port for ``version`` and how to release it: the one serving it on
        an endpoint, else one started for the caller (stopped on release)."""
        with self._lock:
            for endpoint in self._endpoints.values():
                for deployed in endpoint.deployed_models:
                    if f"{deployed.model}@{deployed.model_version_id}" == version.versioned_name:
                        if deployed.id not in self._servers:
                            self._servers[deployed.id] = self._serve(deployed.id, version)
                        return self._servers[deployed.id].port, lambda: None
        server = self._serve(f"batch-{next(self._ids)}", version)
        return server.port, server.stop

    def undeploy_model(self, request: v1.UndeployModelRequest) -> operations_pb2.Operation:
        with self._lock:
            endpoint = self._endpoint(request.endpoint)
            remaining = [d for d in endpoint.deployed_models if d.id != request.deployed_model_id]
            if len(remaining) == len(endpoint.deployed_models):
                raise ApiError(grpc.StatusCode.NOT_FOUND, f"Deployed model {request.deployed_model_id} not found.")
            split = dict(request.traffic_split) or {
                k: v for k, v in endpoint.traffic_split.items() if k != request.deployed_model_id
            }
            if remaining and sum(split.values()) != 100:
                raise ApiError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"undeploying {request.deployed_model_id} leaves a traffic split of {split}, not 100%",
                )
            endpoint.deployed_models, endpoint.traffic_split = remaining, split
            server = self._servers.pop(request.deployed_model_id, None)
            self.registry.drop_deployment(request.deployed_model_id)
            self._save()
            name = endpoint.name
        if server is not None:
            server.stop()
        operation = self._operation(name, self._metadata(v1.UndeployModelOperationMetadata))
        return self._finish(operation.name, v1.UndeployModelResponse())

    def delete_endpoint(self, request: v1.DeleteEndpointRequest) -> operations_pb2.Operation:
        with self._lock:
            endpoint = self._endpoint(request.name)
            if endpoint.deployed_models:
                raise ApiError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"Endpoint {endpoint.name} has deployed models; undeploy them first.",
                )
            del self._endpoints[parse_name(endpoint.name, "endpoints")[2]]
            self._save()
        operation = self._operation(endpoint.name, self._metadata(v1.DeleteOperationMetadata))
        return self._finish(operation.name, empty_pb2.Empty())

    # --- PredictionService, and the REST server's calls ---

    def _pick(self, endpoint_name: str) -> tuple[v1.DeployedModel, ModelServer]:
        """The deployed model a request goes to, drawn by the endpoint's traffic split."""
        with self._lock:
            endpoint = self._endpoint(endpoint_name)
            if not endpoint.deployed_models:
                raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, f"Endpoint {endpoint.name} has no deployed model.")
            weights = [endpoint.traffic_split.get(d.id, 0) for d in endpoint.deployed_models]
            if not any(weights):
                raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, f"Endpoint {endpoint.name} sends no traffic.")
            (deployed,) = random.choices(list(endpoint.deployed_models), weights=weights)
            if deployed.id not in self._servers:  # deployed by an earlier rehearsal
                version = self.registry.version(f"{deployed.model}@{deployed.model_version_id}")
                self._servers[deployed.id] = self._serve(deployed.id, version)
            return copy(deployed), self._servers[deployed.id]

    def predict_json(self, endpoint_name: str, instances: list) -> tuple[v1.DeployedModel, list]:
        """The deployed model that answered and its predictions for ``instances`` (JSON)."""
        deployed, server = self._pick(endpoint_name)
        body = json.dumps({"instances": instances}).encode()
        status, _, answer = http_request(server.port, "POST", PREDICT_ROUTE, body)
        if status != 200:
            # Vertex passes the container's own error body on as the message.
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, answer.decode(errors="replace"))
        return deployed, json.loads(answer)["predictions"]

    def raw_predict_bytes(self, endpoint_name: str, body: bytes, content_type: str):
        """``(deployed model, status, content type, body)``: ``body`` sent as it is."""
        deployed, server = self._pick(endpoint_name)
        return (deployed, *http_request(server.port, "POST", PREDICT_ROUTE, body, content_type or "application/json"))

    def model_display_name(self, deployed: v1.DeployedModel) -> str:
        return self.registry.version(f"{deployed.model}@{deployed.model_version_id}").resource.display_name

    def predict(self, request: v1.PredictRequest) -> v1.PredictResponse:
        raw = v1.PredictRequest.pb(request)
        if raw.HasField("parameters"):
            log.warning("Vertex AI stand-in: predict parameters are not passed to TensorFlow Serving")
        deployed, predictions = self.predict_json(
            request.endpoint, [json_format.MessageToDict(v) for v in raw.instances]
        )
        answer = v1.PredictResponse.pb()(
            deployed_model_id=deployed.id,
            model=deployed.model,
            model_version_id=deployed.model_version_id,
            model_display_name=self.model_display_name(deployed),
        )
        answer.predictions.extend(json_format.ParseDict(p, struct_pb2.Value()) for p in predictions)
        return v1.PredictResponse.wrap(answer)

    def raw_predict(self, request: v1.RawPredictRequest) -> httpbody_pb2.HttpBody:
        body = request.http_body
        _, status, content_type, answer = self.raw_predict_bytes(request.endpoint, body.data, body.content_type)
        if status != 200:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, answer.decode(errors="replace"))
        return httpbody_pb2.HttpBody(content_type=content_type, data=answer)


_DONE = operations_pb2.Operation(done=True)  # what WaitOperation sees for an unknown name


def _traffic_after_deploy(endpoint: v1.Endpoint, new_id: str, requested: dict[str, int]) -> dict[str, int]:
    """The endpoint's traffic split once ``new_id`` is deployed: the requested one ("0" is the
    new model), or all of it to the new model on an empty endpoint, or the current one."""
    if not requested:
        return dict(endpoint.traffic_split) if endpoint.deployed_models else {new_id: 100}
    split = {(new_id if key == "0" else key): value for key, value in requested.items()}
    known = {d.id for d in endpoint.deployed_models} | {new_id}
    if unknown := sorted(set(split) - known):
        raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"traffic_split names unknown deployed models {unknown}")
    if sum(split.values()) != 100:
        raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"traffic_split must add up to 100, not {split}")
    return split
