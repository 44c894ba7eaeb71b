"""The Evaluator, TFX's with a change: it compares with the champion the Champion component
points at, never evaluates a model against itself, copies an identical earlier evaluation
rather than recomputing it, and keeps the data's statistics and the pipeline's root in the
blessing (docs/pipeline.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from typing import Any

import tensorflow as tf
import tensorflow_model_analysis as tfma
from absl import logging
from tfx import version as tfx_version
from tfx.components.evaluator import component as tfx_component
from tfx.components.evaluator import constants
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.components.util import udf_utils
from tfx.dsl.components.base import executor_spec
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ExecutionParameter
from tfx.utils import io_utils

from components.drift import STATISTICS_DIR
from components.drift_gate import IGNORED_BASELINE, PIPELINE_ROOT, foreign_baseline, ignored_baseline_line
from runtime import champion

MODEL = standard_component_specs.MODEL_KEY
BASELINE = standard_component_specs.BASELINE_MODEL_KEY
EXAMPLES = standard_component_specs.EXAMPLES_KEY
EVALUATION = standard_component_specs.EVALUATION_KEY
BLESSING = standard_component_specs.BLESSING_KEY
# Written last into each finished evaluation: what it was computed from, so a later
# execution with the same inputs can find it among its siblings.
KEY_FILE = "evaluation_key.json"
# Under the pipeline's root: one file per evaluation key, naming the evaluation that has it.
EVALUATION_INDEX = "evaluations"
REUSED_FROM = "reused_evaluation_from"
# On the evaluation and the blessing: the champion compared with ("" for none), and whether
# it was the candidate itself.
BASELINE_URI = "baseline_model_uri"
BASELINE_IS_CANDIDATE = "baseline_is_candidate"
STATISTICS = "statistics"


def is_self_comparison(input_dict: dict) -> bool:
    """True when the baseline model is the candidate model itself (the same artifact)."""
    candidate, baseline = input_dict.get(MODEL) or [], input_dict.get(BASELINE) or []
    if len(candidate) != 1 or len(baseline) != 1:
        return False
    a, b = candidate[0], baseline[0]
    same_id = a.id and b.id and a.id == b.id
    return bool(same_id or (a.uri and a.uri == b.uri))


def champion_baseline(input_dict: dict) -> dict:
    """``input_dict`` with the baseline pointer replaced by the champion's Model (the
    pointed directory), or without a baseline when there is no champion."""
    baseline = input_dict.get(BASELINE) or []
    if len(baseline) != 1:
        return input_dict
    uri, reason = champion.resolve(baseline[0].uri)
    if uri is None:
        logging.info("No baseline: %s. The candidate is evaluated on the absolute thresholds only.", reason)
        return {key: value for key, value in input_dict.items() if key != BASELINE}
    if uri == baseline[0].uri:
        return input_dict
    resolved = standard_artifacts.Model()
    resolved.uri = uri
    # The pointer's id: the blessing records the baseline's id, and Kubeflow's entrypoint
    # names it by the task's own input artifacts.
    resolved.id = baseline[0].id
    return {**input_dict, BASELINE: [resolved]}


def own_baseline_only(input_dict: dict, exec_properties: dict[str, Any]) -> tuple[dict, str | None]:
    """``input_dict`` without a baseline model that is not under the pipeline's root (see
    the module docstring), and that baseline's URI (None when kept, or there was none)."""
    baseline = input_dict.get(BASELINE) or []
    pipeline_root = exec_properties.get(PIPELINE_ROOT)
    if len(baseline) != 1 or not foreign_baseline(baseline[0].uri, pipeline_root):
        return input_dict, None
    ignored = baseline[0].uri
    logging.warning(
        ignored_baseline_line(
            "model",
            ignored,
            pipeline_root,
            "evaluating the candidate without a baseline, as on a first run (no change threshold applies).",
        )
    )
    return {key: value for key, value in input_dict.items() if key != BASELINE}, ignored


def _module_source_digest(exec_properties: dict[str, Any]) -> str:
    """Digest of the user module (custom extractors): its code changes the evaluation."""
    sources = []
    if exec_properties.get(standard_component_specs.MODULE_FILE_KEY):
        sources.append(exec_properties[standard_component_specs.MODULE_FILE_KEY])
    if exec_properties.get(standard_component_specs.MODULE_PATH_KEY):
        module, _ = udf_utils.decode_user_module_key(exec_properties[standard_component_specs.MODULE_PATH_KEY])
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin:
            raise ValueError(f"Evaluator module {module!r} cannot be found on the Python path")
        sources.append(spec.origin)
    digest = hashlib.sha256()
    for path in sources:
        with tf.io.gfile.GFile(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def evaluation_key(input_dict: dict, exec_properties: dict[str, Any]) -> str:
    """A digest of everything an evaluation depends on: the model, baseline and examples
    artifacts (id and URI: artifacts are immutable), the Evaluator's properties, its user
    module's source, and the TFX and TFMA versions."""

    def artifacts(key: str) -> list:
        return [[a.id, a.uri] for a in input_dict.get(key) or []]

    described = {
        "model": artifacts(MODEL),
        # By its directory only: the Champion's pointer to it is a new artifact every run.
        "baseline": [a.uri for a in input_dict.get(BASELINE) or []],
        "examples": artifacts(EXAMPLES),
        "exec_properties": {k: str(v) for k, v in sorted(exec_properties.items())},
        "module": _module_source_digest(exec_properties),
        "versions": [tfx_version.__version__, tfma.__version__],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _recorded_key(evaluation_uri: str) -> dict | None:
    """What a finished evaluation's key file records (None: unfinished, gone or not ours)."""
    try:
        return json.loads(io_utils.read_string_file(os.path.join(evaluation_uri, KEY_FILE)))
    except (ValueError, OSError, tf.errors.OpError):
        return None


def index_path(pipeline_root: str, key: str) -> str:
    """Where the pipeline notes which evaluation has ``key``: Vertex and Kubeflow give each
    run's outputs a directory of their own, so an earlier run's is not beside this one's."""
    return os.path.join(pipeline_root, EVALUATION_INDEX, key)


def find_previous_evaluation(output_uri: str, key: str, pipeline_root: str | None = None) -> tuple[str, dict] | None:
    """A finished evaluation with ``key`` beside ``output_uri`` (earlier local executions of
    this Evaluator write theirs into sibling directories) or noted in the pipeline root's
    index, and what its key file records; None when there is none."""
    output_uri = output_uri.rstrip("/")
    candidates = [
        os.path.dirname(m) for m in sorted(tf.io.gfile.glob(os.path.join(os.path.dirname(output_uri), "*", KEY_FILE)))
    ]
    if pipeline_root and tf.io.gfile.exists(index_path(pipeline_root, key)):
        candidates.append(io_utils.read_string_file(index_path(pipeline_root, key)).strip())
    for previous in candidates:
        if previous == output_uri:
            continue
        recorded = _recorded_key(previous)
        if recorded is not None and recorded.get("key") == key:
            return previous, recorded
    return None


def _bless(input_dict: dict, output_dict: dict, exec_properties: dict[str, Any], evaluation_uri: str) -> None:
    """The blessing TFX's Evaluator writes after validating (same properties and file)."""
    blessing = artifact_utils.get_single_instance(output_dict[BLESSING])
    model = input_dict[MODEL][0]
    blessing.set_string_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_URI_KEY, model.uri)
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY, model.id)
    if "current_component_id" in exec_properties:
        blessing.set_string_custom_property("component_id", exec_properties["current_component_id"])
    ok = tfma.load_validation_result(evaluation_uri).validation_ok
    io_utils.write_string_file(
        os.path.join(blessing.uri, constants.BLESSED_FILE_NAME if ok else constants.NOT_BLESSED_FILE_NAME), ""
    )
    blessing.set_int_custom_property(
        constants.ARTIFACT_PROPERTY_BLESSED_KEY, constants.BLESSED_VALUE if ok else constants.NOT_BLESSED_VALUE
    )
    logging.info("Blessing result %s written to %s.", ok, blessing.uri)


def keep_statistics(input_dict: dict, output_dict: dict) -> None:
    """Copies the examples' statistics into the blessing (see the module docstring)."""
    if input_dict.get(STATISTICS) and output_dict.get(BLESSING):
        statistics = artifact_utils.get_single_instance(input_dict[STATISTICS])
        blessing = artifact_utils.get_single_instance(output_dict[BLESSING])
        io_utils.copy_dir(statistics.uri, os.path.join(blessing.uri, STATISTICS_DIR))


def stamp_owner(output_dict: dict, exec_properties: dict[str, Any]) -> None:
    """Writes the pipeline's root on the blessing (see the module docstring)."""
    pipeline_root = exec_properties.get(PIPELINE_ROOT)
    for blessing in output_dict.get(BLESSING) or []:
        if pipeline_root:
            blessing.set_string_custom_property(PIPELINE_ROOT, pipeline_root)


def mark_baseline(output_dict: dict, input_dict: dict) -> None:
    """Records on the evaluation and the blessing which model the candidate was compared
    with ("" for none) and whether it was the candidate itself."""
    baseline = input_dict.get(BASELINE) or []
    for key in (EVALUATION, BLESSING):
        for artifact in output_dict.get(key) or []:
            artifact.set_string_custom_property(BASELINE_URI, baseline[0].uri if baseline else "")
            artifact.set_int_custom_property(BASELINE_IS_CANDIDATE, int(is_self_comparison(input_dict)))


def mark_ignored_baseline(output_dict: dict, uri: str) -> None:
    """Records on the evaluation and the blessing that the champion's baseline ``uri`` was
    another pipeline's and was not compared with."""
    for key in (EVALUATION, BLESSING):
        for artifact in output_dict.get(key) or []:
            artifact.set_string_custom_property(IGNORED_BASELINE, uri)


class Executor(tfx_evaluator.Executor):
    def Do(self, input_dict, output_dict, exec_properties) -> None:
        ignored = None
        input_dict = champion_baseline(input_dict)
        mark_baseline(output_dict, input_dict)
        if is_self_comparison(input_dict):
            logging.info(
                "The baseline is the candidate model itself (%s): evaluating it once, on the absolute "
                "thresholds; a change threshold against itself cannot fail.",
                input_dict[MODEL][0].uri,
            )
            input_dict = {key: value for key, value in input_dict.items() if key != BASELINE}
        else:
            input_dict, ignored = own_baseline_only(input_dict, exec_properties)
        self._evaluate(input_dict, output_dict, exec_properties)
        keep_statistics(input_dict, output_dict)
        stamp_owner(output_dict, exec_properties)
        if ignored:
            mark_ignored_baseline(output_dict, ignored)

    def _evaluate(self, input_dict, output_dict, exec_properties) -> None:
        evaluation = artifact_utils.get_single_instance(output_dict[EVALUATION])
        key = evaluation_key(input_dict, exec_properties)
        pipeline_root = exec_properties.get(PIPELINE_ROOT)
        found = find_previous_evaluation(evaluation.uri, key, pipeline_root)
        with_blessing = bool(output_dict.get(BLESSING))
        if found is not None and MODEL in input_dict:
            previous, recorded = found
            logging.info(
                "The same model was evaluated on the same examples with the same configuration in %s: "
                "reusing that evaluation.",
                previous,
            )
            io_utils.copy_dir(previous, evaluation.uri)
            evaluation.set_string_custom_property(REUSED_FROM, previous)
            if recorded["validated"] and with_blessing:
                _bless(input_dict, output_dict, exec_properties, evaluation.uri)
            return
        super().Do(input_dict, output_dict, exec_properties)
        validated = with_blessing and output_dict[BLESSING][0].has_custom_property(
            constants.ARTIFACT_PROPERTY_BLESSED_KEY
        )
        io_utils.write_string_file(
            os.path.join(evaluation.uri, KEY_FILE), json.dumps({"key": key, "validated": validated})
        )
        if pipeline_root:
            io_utils.write_string_file(index_path(pipeline_root, key), evaluation.uri)


class EvaluatorSpec(standard_component_specs.EvaluatorSpec):
    """TFX's Evaluator spec plus the statistics to keep with the blessing, and the pipeline's
    root, under which its own baseline lies."""

    PARAMETERS = {
        **standard_component_specs.EvaluatorSpec.PARAMETERS,
        PIPELINE_ROOT: ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        **standard_component_specs.EvaluatorSpec.INPUTS,
        STATISTICS: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
    }


class Evaluator(tfx_component.Evaluator):
    """Drop-in for ``tfx.components.Evaluator`` (same inputs and outputs, plus ``statistics``
    and ``pipeline_root``: unset, any baseline is compared, as TFX's does)."""

    SPEC_CLASS = EvaluatorSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def _validate_spec(self, spec) -> None:
        # TFX's __init__ validates the spec it builds (TFX's class), which __init__ below
        # then extends with ``statistics``.
        if not isinstance(spec, standard_component_specs.EvaluatorSpec):
            raise ValueError(f"Evaluator expects an EvaluatorSpec, got {spec!r}")

    def __init__(self, *, statistics=None, pipeline_root: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        spec = self.spec
        self.spec = EvaluatorSpec(
            **spec.exec_properties, **spec.inputs, **spec.outputs, statistics=statistics, pipeline_root=pipeline_root
        )
