"""The Vertex AI Pusher, TFX's with a change: each blessed model becomes the next version of
the pipeline's own registry model (``components.registry``), labelled with its run, span and
blessing metric, its Evaluator metrics attached, deployed to the endpoint (in full or as a
canary) or only registered; then recorded in the champion record (docs/release.md).
"""

from __future__ import annotations

import dataclasses
import json

from absl import logging
from tfx.dsl.components.base import executor_spec
from tfx.extensions.google_cloud_ai_platform import constants
from tfx.extensions.google_cloud_ai_platform.pusher import executor as tfx_vertex_pusher
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils

from components import pusher, registry
from components.drift_gate import PIPELINE_ROOT
from runtime.paths import is_under

# custom_config[REGISTRY_KEY]: the pipeline's name, the problem's task, blessing metric and
# prediction output, the endpoint (none: register only), the canary share, and whether the
# upload carries an explanation spec (components/explanation.py).
REGISTRY_KEY = "registry"
EVALUATION, EXAMPLES = pusher.EVALUATION, pusher.EXAMPLES
# On the push's output, beside TFX's ``pushed`` and ``pushed_destination``.
REGISTRY_VERSION, REGISTRY_CHANGES, MODEL_EVALUATION = "registry_version", "registry_changes", "model_evaluation"
UNKNOWN_RUN = "unknown"


def run_of(uri: str, pipeline_root: str | None) -> str:
    """The pipeline job an artifact was written by: Vertex lays artifacts out as
    ``<pipeline_root>/<project number>/<job id>/<task>_<id>/<output>`` (the rehearsal as
    ``<pipeline_root>/rehearsal/<job id>/...``)."""
    if not pipeline_root or not is_under(uri, pipeline_root):
        return UNKNOWN_RUN
    parts = uri[len(pipeline_root.rstrip("/")) :].strip("/").split("/")
    return parts[1] if len(parts) > 2 else UNKNOWN_RUN


def version_labels(run: str, span: int | None, metric: str, value: float | None) -> dict[str, str]:
    """The labels a version carries (values as Vertex allows them: ``0.9123`` is ``0-9123``)."""
    labels = {"run": run, "metric": metric}
    if value is not None:
        labels["metric-value"] = f"{value:.4f}"
    if span is not None:
        labels["span"] = str(span)
    return labels


def span_of(examples) -> int:
    """The examples' span: the ``span`` property, or, where a compiled job's metadata handed
    it over as a custom property of the same name (TFX's Vertex entrypoint does, for a value
    that does not fit the property's type), that one."""
    if examples.has_custom_property("span"):
        for read in (examples.get_json_value_custom_property, examples.get_custom_property):
            value = read("span")
            if value is not None:
                return int(float(value))
    return int(examples.span)


def _single(input_dict: dict, key: str):
    found = input_dict.get(key) or []
    return found[0] if len(found) == 1 else None


@dataclasses.dataclass(frozen=True)
class VersionFacts:
    """What a version is labelled and described with: the run that trained it, its span, and
    the Evaluator's overall metrics (with the blessing ``metric`` among them)."""

    run: str
    span: int | None
    metric: str
    metrics: dict[str, float]
    evaluation_uri: str | None

    @property
    def labels(self) -> dict[str, str]:
        return version_labels(self.run, self.span, self.metric, self.metrics.get(self.metric))

    @property
    def description(self) -> str:
        value = self.metrics.get(self.metric)
        shown = f"{self.metric} {value:.4f}" if value is not None else f"{self.metric} not measured"
        return f"{shown} on the eval split; run {self.run}" + (f", span {self.span}" if self.span is not None else "")


def version_facts(input_dict: dict, pushed_uri: str, pipeline_root: str | None, metric: str) -> VersionFacts:
    """The facts of the pushed model: its run from the Trainer's output (else the push's),
    its span from the examples, its metrics from the evaluation (none without one)."""
    trained = _single(input_dict, standard_component_specs.MODEL_KEY)
    run = run_of(trained.uri if trained else pushed_uri, pipeline_root)
    examples, evaluation = _single(input_dict, EXAMPLES), _single(input_dict, EVALUATION)
    span = span_of(examples) if examples is not None else None
    metrics = _metrics(evaluation.uri) if evaluation is not None else {}
    return VersionFacts(run, span, metric, metrics, evaluation.uri if evaluation is not None else None)


def registry_model(custom_config: dict, pipeline_root: str | None) -> registry.RegistryModel:
    """The pipeline's registry model, in the project and region of the push."""
    project = custom_config[constants.SERVING_ARGS_KEY]["project_id"]
    pipeline_name = custom_config[REGISTRY_KEY]["pipeline_name"]
    return registry.RegistryModel.of_pipeline(
        project, custom_config[constants.VERTEX_REGION_KEY], pipeline_name, pipeline_root
    )


def upload(custom_config: dict, pushed_uri: str, facts: VersionFacts) -> registry.Push:
    """The version to upload from the copy at ``pushed_uri``, with an explanation spec when
    the settings ask for one (``components.explanation``)."""
    settings = custom_config[REGISTRY_KEY]
    explanation = None
    if settings.get("explanations"):
        from components.explanation import explanation_spec

        explanation = explanation_spec(pushed_uri, settings["prediction_key"])
    return registry.Push(
        artifact_uri=pushed_uri,
        serving_image=custom_config[constants.VERTEX_CONTAINER_IMAGE_URI_KEY],
        labels=facts.labels,
        description=facts.description,
        explanation=explanation,
    )


def deployment(custom_config: dict) -> registry.Deployment | None:
    """Where the version is deployed, and with what share of the traffic; None: registered only."""
    settings, serving = custom_config[REGISTRY_KEY], custom_config[constants.SERVING_ARGS_KEY]
    if not settings.get("endpoint_name"):
        return None
    return registry.Deployment(
        settings["endpoint_name"], serving.get("machine_type", "n1-standard-2"), settings["canary_percent"]
    )


def attach_metrics(uploaded, model: registry.RegistryModel, task: str, facts: VersionFacts, model_push) -> str:
    """Imports the Evaluator's metrics into the uploaded version, names the evaluation on the
    push's output, and says so in one line."""
    name = registry.import_evaluation(
        uploaded,
        task,
        facts.metrics,
        display_name=f"{model.display_name} run {facts.run}",
        metadata={
            "run": facts.run,
            "span": facts.span,
            "blessing_metric": facts.metric,
            "evaluation_uri": facts.evaluation_uri,
        },
    )
    model_push.set_string_custom_property(MODEL_EVALUATION, name)
    return f"attached the Evaluator's metrics to version {uploaded.version_id} ({name})"


class Executor(tfx_vertex_pusher.Executor):
    """TFX's Vertex Pusher's checks and copy, then the registry and the champion record."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        custom_config = json_utils.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null")
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            logging.info("The model is not blessed: nothing is registered or deployed.")
            self._MarkNotPushed(model_push)
            return
        if (champion := pusher.already_serving(input_dict, exec_properties)) is not None:
            pusher.mark_already_serving(model_push, champion, self.GetModelPath(input_dict))
            return
        # Copied under the output first, as TFX's Pusher does: the copy is the version's artifact_uri.
        io_utils.copy_dir(src=self.GetModelPath(input_dict), dst=model_push.uri)
        pipeline_root = exec_properties.get(PIPELINE_ROOT)
        model = registry_model(custom_config, pipeline_root)
        facts = version_facts(input_dict, model_push.uri, pipeline_root, custom_config[REGISTRY_KEY]["metric"])
        uploaded, changes, role = registry.push(
            model, upload(custom_config, model_push.uri, facts), deployment(custom_config)
        )
        if facts.metrics:
            changes.append(attach_metrics(uploaded, model, custom_config[REGISTRY_KEY]["task"], facts, model_push))
        self._mark_registered(model_push, uploaded, changes)
        pusher.record_push(
            input_dict,
            exec_properties,
            uploaded.versioned_resource_name,
            str(uploaded.version_id),
            canary=role == registry.CANDIDATE,
        )

    def _mark_registered(self, model_push, uploaded, changes: list[str]) -> None:
        """The push's output names the version (``pushed_destination``: ``.../models/ID@VERSION``),
        its id and every change made, one line each (also logged)."""
        for change in changes:
            logging.info("Registry: %s", change)
        self._MarkPushed(model_push, pushed_destination=uploaded.versioned_resource_name)
        model_push.set_string_custom_property(REGISTRY_VERSION, uploaded.version_id)
        model_push.set_string_custom_property(REGISTRY_CHANGES, json.dumps(changes))


def _metrics(evaluation_uri: str) -> dict[str, float]:
    from models.evaluation import overall_metrics

    return overall_metrics(evaluation_uri)


class Pusher(pusher.Pusher):
    """TFX's Vertex Pusher pushing into the pipeline's registry model and recording the champion."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
