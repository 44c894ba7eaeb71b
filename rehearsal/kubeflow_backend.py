"""What the open-source Kubeflow Pipelines v2 backend accepts and does (executors, parameter
values, placeholders, hooks, output URIs), as rules a compiled job is checked against: by the
rehearsal's Kubeflow mode before it runs anything, and by the tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

IMPLEMENTED_EXECUTORS = ("container", "importer")
SCHEMA_VERSION = "2.1.0"
PLACEHOLDERS = (
    "{{$.pipeline_job_name}}",
    "{{$.pipeline_job_resource_name}}",
    "{{$.pipeline_job_uuid}}",
    "{{$.pipeline_task_name}}",
    "{{$.pipeline_task_uuid}}",
)


def _parameters(job: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(task, parameter, its source) for every task's input parameter."""
    for task, spec in job["pipelineSpec"]["root"]["dag"]["tasks"].items():
        for name, source in spec.get("inputs", {}).get("parameters", {}).items():
            yield task, name, source


def refusals(job: Mapping[str, Any]) -> list[str]:
    """Why the open-source backend would refuse or mis-run ``job`` (empty: it runs it as
    compiled), one line each, naming the task and the backend's rule."""
    spec = job["pipelineSpec"]
    found = []
    if spec.get("schemaVersion") != SCHEMA_VERSION:
        found.append(
            f"pipeline spec {spec.get('schemaVersion')}: its values are read from {SCHEMA_VERSION}'s `constant` "
            "(driver/resolve.go)"
        )
    for label, executor in spec["deploymentSpec"]["executors"].items():
        kind = next(iter(executor))
        if kind not in IMPLEMENTED_EXECUTORS:
            found.append(f"executor {label}: {kind} executors are not implemented (compiler/argocompiler/dag.go)")
        elif kind == "container" and "lifecycle" in executor["container"]:
            found.append(
                f"executor {label}: a lifecycle hook, which this backend never runs (Vertex AI runs TFX's "
                "ExampleGen driver there)"
            )
    for task, name, source in _parameters(job):
        runtime = source.get("runtimeValue", {})
        if "constantValue" in runtime:
            found.append(f"task {task}: parameter {name} is a constantValue, which driver/resolve.go does not read")
        constant = runtime.get("constant")
        text = constant if isinstance(constant, str) else json.dumps(constant)
        if "{{$" in text and text not in PLACEHOLDERS:
            found.append(f"task {task}: parameter {name} holds {text!r}, which reaches the task unsubstituted")
    return found


def substitute(value: Any, run_id: str, run_name: str, task_name: str, task_id: str) -> Any:
    """A parameter constant as the backend's driver hands it to the task."""
    if not isinstance(value, str) or value not in PLACEHOLDERS:
        return value
    return {
        "{{$.pipeline_job_name}}": run_name,
        "{{$.pipeline_job_resource_name}}": run_name,
        "{{$.pipeline_job_uuid}}": run_id,
        "{{$.pipeline_task_name}}": task_name,
        "{{$.pipeline_task_uuid}}": task_id,
    }[value]


def output_uri(pipeline_root: str, pipeline_name: str, run_id: str, task_name: str, output_key: str) -> str:
    return f"{pipeline_root.rstrip('/')}/{pipeline_name}/{run_id}/{task_name}/{output_key}"
