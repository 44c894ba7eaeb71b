"""The pipeline's Evaluator run both ways on one model: with the project's batched extractors
and metrics, and with TFMA's per-example defaults; what each wrote, and the two compared.
The binary problem's model is tests/models/test_evaluation.py's, the multi-class and
regression ones are the shipped problems' local runs (tests/problems/test_shipped_problems.py)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx.types import Artifact, standard_artifacts

from models import batched_metrics
from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline
from tests.support.harness import Artifacts, node, run_component


def results(evaluation_artifact: list[Artifact]) -> dict:
    """{(slice, metric or plot name, model): value as a dict} of an Evaluator output."""
    found = {}
    for record in tfma.load_metrics(evaluation_artifact[0].uri):
        for kv in record.metric_keys_and_values:
            key = (str(record.slice_key), kv.key.name, kv.key.model_name, kv.key.is_diff)
            found[key] = json_format.MessageToDict(kv.value)
    for record in tfma.load_plots(evaluation_artifact[0].uri):
        for kv in record.plot_keys_and_values:
            found[(str(record.slice_key), "plot", kv.key.name, str(kv.key.sub_key))] = json_format.MessageToDict(
                kv.value
            )
    return found


def assert_close(batched, default, path: str = "") -> None:
    """Equal, floats to 1e-6 relative: the model's float32 outputs can differ in the last
    bit with the batch sizes Beam happens to choose, which sums of predictions show."""
    if isinstance(default, dict):
        assert batched.keys() == default.keys(), path
        for key in default:
            assert_close(batched[key], default[key], f"{path}/{key}")
    elif isinstance(default, list):
        assert len(batched) == len(default), path
        for i, (b, d) in enumerate(zip(batched, default, strict=True)):
            assert_close(b, d, f"{path}[{i}]")
    elif isinstance(default, float):
        assert np.isclose(batched, default, rtol=1e-6, atol=1e-9, equal_nan=True), (path, batched, default)
    else:
        assert batched == default, path


def tfma_default(config: tfma.EvalConfig) -> tfma.EvalConfig:
    """``config`` with TFMA's own metric classes in place of the batched ones."""
    default = tfma.EvalConfig()
    default.CopyFrom(config)
    for spec in default.metrics_specs:
        for metric in spec.metrics:
            metric.CopyFrom(batched_metrics.tfma_metric_config(metric))
    return default


def evaluate_both_ways(
    config: PipelineConfig,
    examples: list[Artifact],
    model: list[Artifact],
    root: str,
    done: dict[tuple[str, bool], Artifacts] | None = None,
) -> dict[tuple[str, bool], Artifacts]:
    """The pipeline's Evaluator on ``model``, with the project's extractors and batched
    metrics ("batched") and with TFMA's defaults ("default": TFMA's metric classes, no
    module_path); without a baseline, and with a copy of the model as the baseline (so the
    change metrics and thresholds run too): (name, with a baseline) -> its outputs. Those in
    ``done`` (a run's own Evaluator's, "batched" without a baseline) are not run again."""
    base = node(create_pipeline(config), "Evaluator")
    eval_config = tfma.EvalConfig()
    json_format.Parse(base.exec_properties["eval_config"], eval_config)
    baseline = standard_artifacts.Model()
    # Under the pipeline's root: a baseline elsewhere is another pipeline's, and ignored.
    baseline.uri = os.path.join(config.pipeline_root, "baseline_model")
    shutil.copytree(model[0].uri, baseline.uri, dirs_exist_ok=True)
    outputs = dict(done or {})
    for name, module_path, evaluated_with in (
        ("batched", base.exec_properties["module_path"], eval_config),
        ("default", None, tfma_default(eval_config)),
    ):
        for with_baseline in (False, True):
            if (name, with_baseline) in outputs:
                continue
            evaluator = node(create_pipeline(config), "Evaluator")
            evaluator.exec_properties["eval_config"] = json_format.MessageToJson(evaluated_with)
            evaluator.exec_properties["module_path"] = module_path
            inputs = {"examples": examples, "model": model}
            if with_baseline:
                inputs["baseline_model"] = [baseline]
            outputs[name, with_baseline] = run_component(
                evaluator, inputs, os.path.join(root, "evaluations", name, str(with_baseline))
            )
    return outputs


def assert_same_validation(evaluations: dict, with_baseline: bool) -> None:
    """Both ways bless alike and write the same validation result, which TFMA reads back."""
    batched, default = evaluations["batched", with_baseline], evaluations["default", with_baseline]
    assert batched["blessing"][0].get_int_custom_property("blessed") == default["blessing"][0].get_int_custom_property(
        "blessed"
    )
    validation = {
        name: json_format.MessageToDict(tfma.load_validation_result(run["evaluation"][0].uri))
        for name, run in (("batched", batched), ("default", default))
    }
    assert_close(validation["batched"], validation["default"])
    # TFMA reads the batched evaluation as it reads its own.
    assert tfma.load_eval_result(batched["evaluation"][0].uri).slicing_metrics


def assert_same_metrics(evaluations: dict, with_baseline: bool) -> set[tuple]:
    """Both ways computed the same metrics and plots, with change metrics exactly when there
    is a baseline: the keys (slice, name, model, ...) they hold."""
    batched = results(evaluations["batched", with_baseline]["evaluation"])
    default = results(evaluations["default", with_baseline]["evaluation"])
    assert_close(batched, default)
    assert any(key[3] is True for key in default if len(key) == 4) == with_baseline  # change metrics
    return set(default)


def stored_artifact(connection_config, uri: str) -> Artifact:
    """The artifact a run wrote at ``uri``, as its ML Metadata store holds it (its type and
    properties, such as an Examples artifact's split names)."""
    from tfx.orchestration import metadata
    from tfx.types import artifact_utils

    with metadata.Metadata(connection_config) as store:
        found = store.store.get_artifacts_by_uri(uri)[0]
        (artifact_type,) = store.store.get_artifact_types_by_id([found.type_id])
    return artifact_utils.deserialize_artifact(artifact_type, found)
