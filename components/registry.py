"""The pipeline's own model in the Vertex AI Model Registry: a version per blessed push
(``push``, which the Vertex AI Pusher calls), aliases that follow the champion, the
Evaluator's metrics on each version, and on an endpoint a canary, ``promote``, ``rollback``
and ``describe`` (the release command's). docs/release.md says how each moves what serves.
The ``aiplatform`` client is imported when called, never at import.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any

CHAMPION, CANDIDATE, PREVIOUS, DEFAULT = "champion", "candidate", "previous", "default"
OWNER_LABEL = "pipeline-root"
CLASSIFICATION_SCHEMA = "gs://google-cloud-aiplatform/schema/modelevaluation/classification_metrics_1.0.0.yaml"
REGRESSION_SCHEMA = "gs://google-cloud-aiplatform/schema/modelevaluation/regression_metrics_1.0.0.yaml"
# TFMA's metric names as Vertex's evaluation schemata name them; every metric also goes into
# the evaluation's metadata under TFMA's own name.
SCHEMA_NAMES = {
    "auc": "auRoc",
    "auc_precision_recall": "auPrc",
    "binary_crossentropy": "logLoss",
    "sparse_categorical_crossentropy": "logLoss",
    "root_mean_squared_error": "rootMeanSquaredError",
    "rmse": "rootMeanSquaredError",
    "mean_absolute_error": "meanAbsoluteError",
    "mae": "meanAbsoluteError",
    "mean_absolute_percentage_error": "meanAbsolutePercentageError",
}


class ReleaseError(RuntimeError):
    """What a push, promotion or rollback cannot do, and why; nothing was changed."""


def label_value(text: str) -> str:
    """``text`` as a Vertex label value: at most 63 lower-case letters, digits, ``-`` or ``_``."""
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:63] or "none"


@dataclasses.dataclass(frozen=True)
class RegistryModel:
    """Where a pipeline's registry model lives, and how it is found."""

    project: str
    region: str
    display_name: str
    owner: str  # label value: a digest of the pipeline's root

    @classmethod
    def of_pipeline(cls, project: str, region: str, pipeline_name: str, pipeline_root: str) -> RegistryModel:
        owner = hashlib.sha256(pipeline_root.rstrip("/").encode()).hexdigest()[:32]
        return cls(project, region, pipeline_name, owner)

    @property
    def list_filter(self) -> str:
        return f'labels.{OWNER_LABEL}="{self.owner}"'


@dataclasses.dataclass(frozen=True)
class Version:
    """One version as the release commands show it."""

    version_id: str
    aliases: tuple[str, ...]
    labels: dict[str, str]
    description: str
    traffic: int | None = None  # its share of the endpoint's traffic, when one was named

    def describe(self) -> str:
        aliases = f" [{', '.join(self.aliases)}]" if self.aliases else ""
        traffic = "" if self.traffic is None else f", {self.traffic}% of the traffic"
        return f"version {self.version_id}{aliases}{traffic}: {self.description}"


def _aiplatform(model: RegistryModel):
    from google.cloud import aiplatform

    aiplatform.init(project=model.project, location=model.region)
    return aiplatform


def find(model: RegistryModel):
    """The pipeline's registry model (its default version), or None before the first push."""
    aiplatform = _aiplatform(model)
    found = aiplatform.Model.list(filter=model.list_filter)
    if len(found) > 1:
        names = ", ".join(m.resource_name for m in found)
        raise ReleaseError(
            f"{len(found)} registry models carry the label {OWNER_LABEL}={model.owner} ({names}): one is "
            "this pipeline's; remove the label from the others"
        )
    return found[0] if found else None


def _registry(model: RegistryModel):
    found = find(model)
    if found is None:
        raise ReleaseError(
            f"the pipeline {model.display_name} has no model in the registry of {model.project}/{model.region} yet: "
            "a blessed push registers its first version"
        )
    from google.cloud import aiplatform

    return found, aiplatform.models.ModelRegistry(found.resource_name)


def _versions(registry) -> dict[str, Any]:
    """Every version's resource (``google.cloud.aiplatform_v1.Model``) by version id."""
    listed = registry.client.list_model_versions(name=registry.model_resource_name)
    return {m.version_id: m for m in listed}


def _holder(versions: dict[str, Any], alias: str) -> str | None:
    return next((v for v, m in versions.items() if alias in m.version_aliases), None)


def _endpoint(model: RegistryModel, name: str, create: bool = False):
    """The endpoint with display name ``name`` (created when ``create``), as TFX finds it."""
    aiplatform = _aiplatform(model)
    found = aiplatform.Endpoint.list(filter=f'display_name="{name}"')
    if found:
        return found[0]
    if not create:
        raise ReleaseError(
            f"the endpoint {name} does not exist in {model.project}/{model.region}: check --endpoint-name, "
            "or push to it first"
        )
    return aiplatform.Endpoint.create(display_name=name)


def _deployed_by_version(endpoint, registry_name: str) -> dict[str, list[str]]:
    """The endpoint's deployed model ids of the registry model, by version id."""
    found: dict[str, list[str]] = {}
    for deployed in endpoint.list_models():
        if deployed.model.partition("@")[0] == registry_name:
            found.setdefault(deployed.model_version_id, []).append(deployed.id)
    return found


def _set_traffic(endpoint, deployed_ids: list[str]) -> None:
    """All of the endpoint's traffic to the first of ``deployed_ids``."""
    endpoint.update(traffic_split={deployed_ids[0]: 100})


def _undeploy(endpoint, deployed_ids: list[str]) -> None:
    for deployed_id in deployed_ids:
        endpoint.undeploy(deployed_model_id=deployed_id, traffic_split=dict(endpoint.traffic_split))


@dataclasses.dataclass(frozen=True)
class Push:
    """What to upload: the SavedModel's gs:// folder, the serving image, and what the version
    is labelled and described with."""

    artifact_uri: str
    serving_image: str
    labels: dict[str, str]
    description: str
    explanation: tuple[Any, Any] | None = None  # (ExplanationMetadata, ExplanationParameters)


@dataclasses.dataclass(frozen=True)
class Deployment:
    endpoint_name: str
    machine_type: str
    canary_percent: int = 0


def push(model: RegistryModel, pushed: Push, deployment: Deployment | None = None) -> tuple[Any, list[str], str]:
    """Uploads ``pushed`` as the registry model's next version (the first one creates it)
    and deploys it when ``deployment`` says where; the uploaded version, what changed, and
    its role (``CHAMPION``, or ``CANDIDATE`` for a canary)."""
    aiplatform = _aiplatform(model)
    parent = find(model)
    before = _versions(aiplatform.models.ModelRegistry(parent.resource_name)) if parent else {}
    champion = _holder(before, CHAMPION)
    endpoint = _endpoint(model, deployment.endpoint_name, create=True) if deployment else None
    serving = _deployed_by_version(endpoint, parent.resource_name) if endpoint is not None and parent else {}
    changes: list[str] = []
    canary = bool(deployment and deployment.canary_percent)
    if canary and not serving.get(champion or ""):
        changes.append(f"no champion of {model.display_name} serves on {deployment.endpoint_name}: deployed in full")
        canary = False
    uploaded = _upload(aiplatform, model, pushed, parent, canary)
    role = CANDIDATE if canary else CHAMPION
    changes.append(
        f"registered {model.display_name} version {uploaded.version_id} ({uploaded.resource_name}) as {role}"
    )
    if not canary:
        changes += _aliases_to_new_champion(aiplatform, uploaded, champion, _holder(before, CANDIDATE))
    if endpoint is None:
        return uploaded, changes, role
    if canary:
        changes += _withdraw_earlier_candidates(endpoint, serving, champion, deployment.endpoint_name)
    changes += _deploy(endpoint, model, uploaded, deployment, canary)
    if not canary:
        changes += _undeploy_replaced(endpoint, serving, deployment.endpoint_name)
    return uploaded, changes, role


def _upload(aiplatform, model: RegistryModel, pushed: Push, parent, canary: bool):
    """The next version of ``parent`` (a new registry model without one): a canary holds the
    ``CANDIDATE`` alias, any other version the ``CHAMPION`` alias and the default."""
    explanation = pushed.explanation or (None, None)
    return aiplatform.Model.upload(
        display_name=model.display_name,
        artifact_uri=pushed.artifact_uri,
        serving_container_image_uri=pushed.serving_image,
        parent_model=parent.resource_name if parent else None,
        is_default_version=not canary,
        version_aliases=[CANDIDATE] if canary else [CHAMPION],
        version_description=pushed.description,
        labels={OWNER_LABEL: model.owner, **{k: label_value(v) for k, v in pushed.labels.items()}},
        explanation_metadata=explanation[0],
        explanation_parameters=explanation[1],
    )


def _aliases_to_new_champion(aiplatform, uploaded, champion: str | None, candidate: str | None) -> list[str]:
    """The champion the new version replaces becomes ``PREVIOUS``; a canary it replaces loses
    the ``CANDIDATE`` alias."""
    registry = aiplatform.models.ModelRegistry(uploaded.resource_name)
    changes = []
    if champion is not None:
        registry.add_version_aliases([PREVIOUS], version=champion)
        changes.append(f"version {champion} is now {PREVIOUS}")
    if candidate is not None:
        registry.remove_version_aliases([CANDIDATE], version=candidate)
        changes.append(f"version {candidate} is no longer the {CANDIDATE}")
    return changes


def _withdraw_earlier_candidates(
    endpoint, serving: dict[str, list[str]], champion: str | None, endpoint_name: str
) -> list[str]:
    """Every version on the endpoint but the champion (an earlier candidate) undeployed, its
    traffic back to the champion."""
    changes = []
    for version_id, deployed_ids in serving.items():
        if version_id != champion:
            _set_traffic(endpoint, serving[champion])
            _undeploy(endpoint, deployed_ids)
            changes.append(f"withdrew version {version_id} from {endpoint_name}")
    return changes


def _deploy(endpoint, model: RegistryModel, uploaded, deployment: Deployment, canary: bool) -> list[str]:
    """The uploaded version deployed with the canary's share of the traffic, or all of it."""
    percent = deployment.canary_percent if canary else 100
    uploaded.deploy(
        endpoint=endpoint,
        traffic_percentage=percent,
        machine_type=deployment.machine_type,
        deployed_model_display_name=f"{model.display_name}-v{uploaded.version_id}",
    )
    return [f"deployed version {uploaded.version_id} to {deployment.endpoint_name} with {percent}% of its traffic"]


def _undeploy_replaced(endpoint, serving: dict[str, list[str]], endpoint_name: str) -> list[str]:
    """Every version that served before the push undeployed (at 0% it would still be billed)."""
    changes = []
    for version_id, deployed_ids in serving.items():
        _undeploy(endpoint, deployed_ids)
        changes.append(f"undeployed version {version_id} from {endpoint_name}")
    return changes


def promote(model: RegistryModel, endpoint_name: str | None) -> list[str]:
    """The candidate becomes the champion: all of the endpoint's traffic, the champion's
    deployment undeployed, the aliases moved (the old champion becomes the previous)."""
    found, registry = _registry(model)
    versions = _versions(registry)
    candidate, champion = _holder(versions, CANDIDATE), _holder(versions, CHAMPION)
    if candidate is None:
        raise ReleaseError(
            f"nothing to promote: no version of {model.display_name} is the {CANDIDATE} "
            "(a push with --canary-percent makes one)"
        )
    changes = []
    if endpoint_name:
        endpoint = _endpoint(model, endpoint_name)
        serving = _deployed_by_version(endpoint, found.resource_name)
        if not serving.get(candidate):
            raise ReleaseError(f"the {CANDIDATE}, version {candidate}, is not deployed on {endpoint_name}")
        _set_traffic(endpoint, serving[candidate])
        changes.append(f"{endpoint_name}: version {candidate} has 100% of the traffic")
        for version_id, deployed_ids in serving.items():
            if version_id != candidate:
                _undeploy(endpoint, deployed_ids)
                changes.append(f"{endpoint_name}: undeployed version {version_id}")
    registry.add_version_aliases([CHAMPION, DEFAULT], version=candidate)
    registry.remove_version_aliases([CANDIDATE], version=candidate)
    changes.append(f"version {candidate} is now {CHAMPION} (and {DEFAULT})")
    if champion is not None:
        registry.add_version_aliases([PREVIOUS], version=champion)
        changes.append(f"version {champion} is now {PREVIOUS}")
    return changes


def rollback(model: RegistryModel, endpoint_name: str | None) -> list[str]:
    """Back to the champion while a canary runs (the candidate undeployed, its alias
    removed); after a promotion, back to the previous champion (redeployed with all of the
    traffic, the current one undeployed)."""
    found, registry = _registry(model)
    versions = _versions(registry)
    candidate, champion, previous = (_holder(versions, a) for a in (CANDIDATE, CHAMPION, PREVIOUS))
    changes = []
    endpoint = _endpoint(model, endpoint_name) if endpoint_name else None
    serving = _deployed_by_version(endpoint, found.resource_name) if endpoint is not None else {}
    if candidate is not None:
        if endpoint is not None and serving.get(candidate):
            if not serving.get(champion or ""):
                raise ReleaseError(
                    f"the {CHAMPION} (version {champion}) is not deployed on {endpoint_name}: "
                    f"undeploying the {CANDIDATE} would leave it empty"
                )
            _set_traffic(endpoint, serving[champion])
            _undeploy(endpoint, serving[candidate])
            changes.append(
                f"{endpoint_name}: version {champion} has 100% of the traffic; undeployed version {candidate}"
            )
        registry.remove_version_aliases([CANDIDATE], version=candidate)
        changes.append(f"version {candidate} is no longer the {CANDIDATE}")
        return changes
    if previous is None:
        raise ReleaseError(
            f"nothing to roll back to: no version of {model.display_name} is the {CANDIDATE} or the {PREVIOUS} "
            f"champion (the {CHAMPION} is version {champion})"
        )
    if endpoint is not None:
        from google.cloud import aiplatform

        restored = aiplatform.Model(found.resource_name, version=previous)
        restored.deploy(
            endpoint=endpoint,
            traffic_percentage=100,
            machine_type=_machine_type(endpoint, serving.get(champion or "", [])),
            deployed_model_display_name=f"{model.display_name}-v{previous}",
        )
        changes.append(f"{endpoint_name}: redeployed version {previous} with 100% of the traffic")
        for version_id, deployed_ids in serving.items():
            _undeploy(endpoint, deployed_ids)
            changes.append(f"{endpoint_name}: undeployed version {version_id}")
    registry.add_version_aliases([CHAMPION, DEFAULT], version=previous)
    registry.remove_version_aliases([PREVIOUS], version=previous)
    changes.append(f"version {previous} is {CHAMPION} (and {DEFAULT}) again; version {champion} holds no alias")
    return changes


def _machine_type(endpoint, deployed_ids: list[str]) -> str:
    """The machine type the champion was deployed on (a redeployment keeps it)."""
    for deployed in endpoint.list_models():
        if deployed.id in deployed_ids and deployed.dedicated_resources.machine_spec.machine_type:
            return deployed.dedicated_resources.machine_spec.machine_type
    return "n1-standard-2"


def describe(model: RegistryModel, endpoint_name: str | None) -> list[Version]:
    """Every version of the pipeline's registry model, newest first, with its aliases and,
    when an endpoint is named, its share of that endpoint's traffic."""
    found, registry = _registry(model)
    traffic: dict[str, int] = {}
    if endpoint_name:
        endpoint = _endpoint(model, endpoint_name)
        split = dict(endpoint.traffic_split)
        for version_id, deployed_ids in _deployed_by_version(endpoint, found.resource_name).items():
            traffic[version_id] = sum(split.get(d, 0) for d in deployed_ids)
    return [
        Version(
            m.version_id,
            tuple(m.version_aliases),
            dict(m.labels),
            m.version_description,
            traffic.get(m.version_id, 0) if endpoint_name else None,
        )
        for m in sorted(_versions(registry).values(), key=lambda m: -int(m.version_id))
    ]


def import_evaluation(version, task: str, metrics: dict[str, float], display_name: str, metadata: dict) -> str:
    """Attaches the Evaluator's metrics to the uploaded ``version`` (``ImportModelEvaluation``):
    those Vertex's schema for the task names under its names, all of them (TFMA's names) and
    ``metadata`` in the evaluation's metadata; the evaluation's resource name."""
    from google.cloud.aiplatform_v1 import ModelEvaluation
    from google.protobuf import json_format, struct_pb2

    schema = REGRESSION_SCHEMA if task == "regression" else CLASSIFICATION_SCHEMA
    named = {SCHEMA_NAMES[name]: value for name, value in sorted(metrics.items()) if name in SCHEMA_NAMES}
    evaluation = ModelEvaluation(
        display_name=display_name,
        metrics_schema_uri=schema,
        metrics=json_format.ParseDict(named, struct_pb2.Value()),
        metadata=json_format.ParseDict({"tfma_metrics": metrics, **metadata}, struct_pb2.Value()),
    )
    imported = version.api_client.import_model_evaluation(
        parent=version.versioned_resource_name, model_evaluation=evaluation
    )
    return imported.name
