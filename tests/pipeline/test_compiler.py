"""Compiling for Kubeflow Pipelines v2 / Vertex AI: the compiled job is the local DAG, runs
the project's image, and refers to code the image holds."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import tomllib
from pathlib import Path

import pytest

from pipeline import compiler
from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline
from tests.support import cloud

REPO = Path(compiler.__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("loopback_only")


def _node_of(task: str, node_ids: set[str]) -> str:
    """Vertex task names are node ids."""
    assert task in node_ids, task
    return task


def test_compiled_tasks_and_edges_are_exactly_the_local_dag(compiled_job):
    _, job = compiled_job
    local = create_pipeline(
        PipelineConfig(data_root=cloud.DATA_ROOT, output_root=cloud.OUTPUT_ROOT, schema_path=cloud.CONTRACT)
    )
    local_edges = {(up.id, c.id) for c in local.components for up in c.upstream_nodes}
    node_ids = {c.id for c in local.components}

    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    compiled_nodes = {_node_of(t, node_ids) for t in tasks}
    compiled_edges = {
        (_node_of(dep, node_ids), _node_of(t, node_ids))
        for t, spec in tasks.items()
        for dep in spec.get("dependentTasks", [])
    }
    assert compiled_nodes == node_ids
    assert compiled_edges == local_edges


def test_every_task_runs_the_projects_image(compiled_job):
    _, job = compiled_job
    executors = job["pipelineSpec"]["deploymentSpec"]["executors"]
    images = {e["container"]["image"] for e in executors.values() if "container" in e}
    assert images == {cloud.IMAGE}
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://bucket/tfx/pipelines/taxi-big-tipper"


def test_user_code_is_referenced_by_importable_module_paths(compiled_job):
    _, job = compiled_job
    text = json.dumps(job)
    referenced = set(re.findall(r"(?<![\w.])((?:models|components|pipeline)\.[a-z_]+(?:\.[A-Za-z_]+)*)", text))
    assert {"models.trainer.run_fn", "models.preprocessing.preprocessing_fn"} <= referenced
    assert "models.evaluation" in referenced  # the Evaluator's module_path
    assert any(ref.startswith("components.anomaly_gate") for ref in referenced)
    for ref in referenced:
        module, _, attribute = ref.rpartition(".")
        # module.attribute (models.trainer.run_fn), or a module itself (models.evaluation).
        assert hasattr(importlib.import_module(module), attribute) or importlib.util.find_spec(ref) is not None, ref
    dockerfile = (REPO / "Dockerfile").read_text()
    for package in {ref.split(".")[0] for ref in referenced}:
        assert f"COPY {package}/ /pipeline/{package}/" in dockerfile, package
    assert "ENV PYTHONPATH=/pipeline" in dockerfile


def test_the_compiler_names_the_locked_tfx_version():
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    (locked,) = [p["version"] for p in lock["package"] if p["name"] == "tfx"]
    assert locked == compiler.TFX_VERSION


def test_missing_kfp_is_reported_instead_of_silently_dropped():
    with pytest.raises(compiler.KfpMissingError, match="kfp package is not installed"):
        compiler.require_kfp(find_spec=lambda name: None)


def test_the_job_is_pipeline_spec_2_1_as_tfx_compiles_it(compiled_job):
    """2.1's values are ``constant``, which every backend reads; no task is a resolver."""
    _, job = compiled_job
    assert job["pipelineSpec"]["schemaVersion"] == "2.1.0"
    assert "constantValue" not in json.dumps(job)
    kinds = {next(iter(e)) for e in job["pipelineSpec"]["deploymentSpec"]["executors"].values()}
    assert kinds == {"container"}


def test_the_champion_task_takes_the_runs_own_id(compiled_job):
    """The Champion reads a record that changes between runs: the run's id in its inputs
    keeps any cache from answering for it."""
    from components.champion import NODE_ID, RUN_ID_PLACEHOLDER

    _, job = compiled_job
    task = job["pipelineSpec"]["root"]["dag"]["tasks"][NODE_ID]
    parameters = task["inputs"]["parameters"]
    assert parameters["run_id"]["runtimeValue"]["constant"] == RUN_ID_PLACEHOLDER
    assert parameters["pipeline_root"]["runtimeValue"]["constant"] == "gs://bucket/tfx/pipelines/taxi-big-tipper"
