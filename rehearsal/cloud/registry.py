"""The Vertex AI Model Registry's stand-in: models with versions, version aliases and the
evaluations imported into a version, kept by the rules Vertex documents
(``endpoints.VertexModels`` serves them).
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import re
import threading

import grpc
from google.cloud import aiplatform_v1 as v1

from rehearsal.cloud.api_error import ApiError

DEFAULT = "default"
ALIAS = re.compile(r"^[a-z][a-z0-9-]{0,126}[a-z0-9]$")


def parse_name(name: str, collection: str) -> tuple[str, str, str]:
    """``(project, location, id)`` of ``projects/P/locations/L/<collection>/ID[@version]``."""
    match = re.fullmatch(rf"projects/([^/]+)/locations/([^/]+)/{collection}/([^/@]+)(?:@[^/]+)?", name)
    if not match:
        raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"not a {collection[:-1]} resource name: {name!r}")
    return match.group(1), match.group(2), match.group(3)


def copy(message):
    """A copy of a proto-plus message, so an answer is not changed while it is sent."""
    return type(message).deserialize(type(message).serialize(message))


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def check_explanation_spec(model: v1.Model) -> None:
    """What Vertex checks of an uploaded explanation spec: one method with its bounds (sampled
    Shapley's path count 1-50), named inputs, and exactly one output to explain."""
    if "explanation_spec" not in model:
        return
    spec = model.explanation_spec
    method = spec.parameters._pb.WhichOneof("method")
    if method is None:
        raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, "explanation_spec.parameters names no attribution method")
    paths = spec.parameters.sampled_shapley_attribution.path_count
    if method == "sampled_shapley_attribution" and not 1 <= paths <= 50:
        raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, "sampled_shapley_attribution.path_count must be 1-50")
    if not spec.metadata.inputs or len(spec.metadata.outputs) != 1:
        raise ApiError(
            grpc.StatusCode.INVALID_ARGUMENT,
            "explanation_spec.metadata needs its inputs and exactly one output, "
            f"not {len(spec.metadata.inputs)} input(s) and {len(spec.metadata.outputs)} output(s)",
        )


@dataclasses.dataclass
class Version:
    """One version of a registry model: its resource and the local folder its artifact_uri names."""

    resource: v1.Model
    model_dir: str
    evaluations: list[v1.ModelEvaluation] = dataclasses.field(default_factory=list)

    @property
    def versioned_name(self) -> str:
        return f"{self.resource.name}@{self.resource.version_id}"


class Registry:
    def __init__(self, ids: itertools.count) -> None:
        self._ids = ids
        self._lock = threading.RLock()
        self._models: dict[str, dict[str, Version]] = {}  # model ID -> version ID -> version

    def add(self, parent: str, request: v1.UploadModelRequest, model_dir: str) -> Version:
        """The version an ``UploadModel`` request creates (a new model, or the next version
        of ``parent_model``)."""
        check_explanation_spec(request.model)
        aliases = list(request.model.version_aliases)
        for alias in aliases:
            if not ALIAS.match(alias) or alias.isdigit():
                raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"invalid version alias {alias!r}")
        with self._lock:
            if request.parent_model:
                project, location, model_id = parse_name(request.parent_model, "models")
                if model_id not in self._models or parent != f"projects/{project}/locations/{location}":
                    raise ApiError(grpc.StatusCode.NOT_FOUND, f"Parent model {request.parent_model} not found")
                versions = self._models[model_id]
                version_id = str(max(int(v) for v in versions) + 1)
            else:
                model_id = request.model_id or str(next(self._ids))
                if model_id in self._models:
                    raise ApiError(grpc.StatusCode.ALREADY_EXISTS, f"Model {model_id} already exists")
                versions, version_id = {}, "1"
                if DEFAULT not in aliases:
                    aliases.append(DEFAULT)  # a model's first version is its default
            resource = copy(request.model)
            resource.name = f"{parent}/models/{model_id}"
            resource.version_id, resource.version_aliases = version_id, []
            resource.create_time = resource.update_time = resource.version_create_time = now()
            resource.version_update_time = resource.version_create_time
            resource.supported_deployment_resources_types = [v1.Model.DeploymentResourcesType.DEDICATED_RESOURCES]
            if versions:
                first = versions["1"].resource
                resource.create_time = first.create_time
            version = Version(resource, model_dir)
            versions[version_id] = version
            self._models[model_id] = versions
            self._apply(versions, version, aliases)
            return version

    @staticmethod
    def _apply(versions: dict[str, Version], target: Version, aliases: list[str]) -> None:
        """Applies aliases to ``target``, each moving from the version that held it; a
        ``-alias`` removes it from ``target``."""
        for alias in aliases:
            if alias.startswith("-"):
                name = alias[1:]
                if name == DEFAULT:
                    raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, "the default alias cannot be removed")
                target.resource.version_aliases = [a for a in target.resource.version_aliases if a != name]
                continue
            for other in versions.values():
                if alias in other.resource.version_aliases and other is not target:
                    other.resource.version_aliases = [a for a in other.resource.version_aliases if a != alias]
            if alias not in target.resource.version_aliases:
                target.resource.version_aliases = [*target.resource.version_aliases, alias]
        target.resource.version_update_time = now()

    def version(self, name: str) -> Version:
        """The version ``name`` names: ``models/ID`` (the default), ``@<version id>`` or ``@<alias>``."""
        _, _, model_id = parse_name(name, "models")
        wanted = name.partition("@")[2] or DEFAULT
        with self._lock:
            for version in self._models.get(model_id, {}).values():
                if wanted == version.resource.version_id or wanted in version.resource.version_aliases:
                    return version
        raise ApiError(grpc.StatusCode.NOT_FOUND, f"Model {name} not found")

    def defaults(self, prefix: str) -> list[v1.Model]:
        """Each model under ``prefix`` once, as its default version."""
        with self._lock:
            return [
                copy(version.resource)
                for versions in self._models.values()
                for version in versions.values()
                if DEFAULT in version.resource.version_aliases and version.resource.name.startswith(prefix)
            ]

    def versions(self, name: str) -> list[v1.Model]:
        """Every version of the model ``name`` names, oldest first."""
        _, _, model_id = parse_name(name, "models")
        with self._lock:
            if model_id not in self._models:
                raise ApiError(grpc.StatusCode.NOT_FOUND, f"Model {name} not found")
            return [copy(v.resource) for _, v in sorted(self._models[model_id].items(), key=lambda kv: int(kv[0]))]

    def merge_aliases(self, name: str, aliases: list[str]) -> v1.Model:
        """``MergeVersionAliases``: ``aliases`` applied to the version ``name`` names."""
        for alias in aliases:
            bare = alias.removeprefix("-")
            if not ALIAS.match(bare) or bare.isdigit():
                raise ApiError(grpc.StatusCode.INVALID_ARGUMENT, f"invalid version alias {alias!r}")
        with self._lock:
            target = self.version(name)
            _, _, model_id = parse_name(name, "models")
            self._apply(self._models[model_id], target, aliases)
            return copy(target.resource)

    def import_evaluation(self, parent: str, evaluation: v1.ModelEvaluation) -> v1.ModelEvaluation:
        """``ImportModelEvaluation`` into the version ``parent`` names."""
        if not evaluation.metrics_schema_uri.startswith("gs://google-cloud-aiplatform/schema/modelevaluation/"):
            raise ApiError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"metrics_schema_uri {evaluation.metrics_schema_uri!r} is not one of Vertex's evaluation schemata",
            )
        with self._lock:
            version = self.version(parent)
            imported = copy(evaluation)
            imported.name = f"{version.resource.name}/evaluations/{next(self._ids)}"
            imported.create_time = now()
            version.evaluations.append(imported)
            return copy(imported)

    def evaluations(self, parent: str) -> list[v1.ModelEvaluation]:
        with self._lock:
            return [copy(e) for e in self.version(parent).evaluations]

    def evaluation(self, name: str) -> v1.ModelEvaluation:
        model_name, _, _ = name.partition("/evaluations/")
        _, _, model_id = parse_name(model_name, "models")
        with self._lock:
            for version in self._models.get(model_id, {}).values():
                for evaluation in version.evaluations:
                    if evaluation.name == name:
                        return copy(evaluation)
        raise ApiError(grpc.StatusCode.NOT_FOUND, f"Model evaluation {name} not found")

    def to_state(self) -> dict:
        """Everything this registry holds, as JSON-ready values (``from_state`` reads it back)."""
        with self._lock:
            return {
                model_id: {
                    version_id: {
                        "resource": type(v.resource).to_dict(v.resource),
                        "model_dir": v.model_dir,
                        "evaluations": [type(e).to_dict(e) for e in v.evaluations],
                    }
                    for version_id, v in versions.items()
                }
                for model_id, versions in self._models.items()
            }

    def from_state(self, state: dict) -> None:
        with self._lock:
            self._models = {
                model_id: {
                    version_id: Version(
                        v1.Model(v["resource"]), v["model_dir"], [v1.ModelEvaluation(e) for e in v["evaluations"]]
                    )
                    for version_id, v in versions.items()
                }
                for model_id, versions in state.items()
            }

    def drop_deployment(self, deployed_model_id: str) -> None:
        with self._lock:
            for versions in self._models.values():
                for version in versions.values():
                    refs = [r for r in version.resource.deployed_models if r.deployed_model_id != deployed_model_id]
                    version.resource.deployed_models = refs
