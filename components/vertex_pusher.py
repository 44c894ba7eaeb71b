"""TFX's Vertex AI Pusher, pushing into the pipeline's own registry model
(``components.registry``): each blessed model becomes the next version, labelled with its
run, span and blessing metric, its Evaluator metrics attached; then deployed to the
endpoint (all of its traffic, or a canary share), or only registered.

A model that is not blessed registers nothing. The pushed model is copied under the
Pusher's output first, as TFX's does (that copy is the version's ``artifact_uri``). The
outputs say what happened: ``pushed_destination`` is the version's resource name
(``.../models/ID@VERSION``), with ``registry_version``, ``registry_changes`` (one line per
change) and ``model_evaluation`` beside it. The push is recorded in the champion record
(``components.pusher``): as the champion, or as the candidate for a canary.
"""

from __future__ import annotations

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


class Executor(tfx_vertex_pusher.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        custom_config = json_utils.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null")
        settings, serving = custom_config[REGISTRY_KEY], custom_config[constants.SERVING_ARGS_KEY]
        model_push = artifact_utils.get_single_instance(output_dict[standard_component_specs.PUSHED_MODEL_KEY])
        if not self.CheckBlessing(input_dict):
            logging.info("The model is not blessed: nothing is registered or deployed.")
            self._MarkNotPushed(model_push)
            return
        if (champion := pusher.already_serving(input_dict, exec_properties)) is not None:
            pusher.mark_already_serving(model_push, champion, self.GetModelPath(input_dict))
            return
        io_utils.copy_dir(src=self.GetModelPath(input_dict), dst=model_push.uri)
        pipeline_root = exec_properties.get(PIPELINE_ROOT)
        model = registry.RegistryModel.of_pipeline(
            serving["project_id"], custom_config[constants.VERTEX_REGION_KEY], settings["pipeline_name"], pipeline_root
        )
        trained = _single(input_dict, standard_component_specs.MODEL_KEY)
        run = run_of(trained.uri if trained else model_push.uri, pipeline_root)
        examples, evaluation = _single(input_dict, EXAMPLES), _single(input_dict, EVALUATION)
        span = span_of(examples) if examples is not None else None
        metrics = _metrics(evaluation.uri) if evaluation is not None else {}
        metric = settings["metric"]
        value = metrics.get(metric)
        shown = f"{metric} {value:.4f}" if value is not None else f"{metric} not measured"
        description = f"{shown} on the eval split; run {run}" + (f", span {span}" if span is not None else "")
        deployment = None
        if settings.get("endpoint_name"):
            deployment = registry.Deployment(
                settings["endpoint_name"], serving.get("machine_type", "n1-standard-2"), settings["canary_percent"]
            )
        explanation = None
        if settings.get("explanations"):
            from components.explanation import explanation_spec

            explanation = explanation_spec(model_push.uri, settings["prediction_key"])
        uploaded, changes, role = registry.push(
            model,
            registry.Push(
                artifact_uri=model_push.uri,
                serving_image=custom_config[constants.VERTEX_CONTAINER_IMAGE_URI_KEY],
                labels=version_labels(run, span, metric, value),
                description=description,
                explanation=explanation,
            ),
            deployment,
        )
        if metrics:
            name = registry.import_evaluation(
                uploaded,
                settings["task"],
                metrics,
                display_name=f"{model.display_name} run {run}",
                metadata={"run": run, "span": span, "blessing_metric": metric, "evaluation_uri": evaluation.uri},
            )
            model_push.set_string_custom_property("model_evaluation", name)
            changes.append(f"attached the Evaluator's metrics to version {uploaded.version_id} ({name})")
        for change in changes:
            logging.info("Registry: %s", change)
        self._MarkPushed(model_push, pushed_destination=uploaded.versioned_resource_name)
        model_push.set_string_custom_property("registry_version", uploaded.version_id)
        model_push.set_string_custom_property("registry_changes", json.dumps(changes))
        pusher.record_push(
            input_dict,
            exec_properties,
            uploaded.versioned_resource_name,
            str(uploaded.version_id),
            canary=role == registry.CANDIDATE,
        )


def _metrics(evaluation_uri: str) -> dict[str, float]:
    from models.evaluation import overall_metrics

    return overall_metrics(evaluation_uri)


class Pusher(pusher.Pusher):
    """TFX's Vertex Pusher with the registry and the champion record (module docstring)."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)
