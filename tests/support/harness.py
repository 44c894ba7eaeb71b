"""Runs one TFX component's real executor on its own, outside any orchestrator.

The component objects come from ``create_pipeline`` itself, so each test exercises the
exact configuration the pipeline runs (split config, eval config, run_fn, ...); only the
orchestration (drivers, MLMD, caching) is left out, and that is covered end to end.
"""

from __future__ import annotations

import os
from typing import Any

from google.protobuf import message
from tfx.dsl.components.base import base_beam_executor, base_executor
from tfx.types import Artifact
from tfx.utils import json_utils, proto_utils

from pipeline.config import PipelineConfig

Artifacts = dict[str, list[Artifact]]


def _serialize(value: Any) -> Any:
    """Exec properties as the launcher hands them over: protos and dicts as JSON."""
    if isinstance(value, message.Message):
        return proto_utils.proto_to_json(value)
    if isinstance(value, (dict, list)):
        return json_utils.dumps(value)
    return value


def node(pipeline, node_id: str):
    """The component with ``node_id`` from a pipeline built by ``create_pipeline``."""
    for component in pipeline.components:
        if component.id == node_id:
            return component
    raise KeyError(f"{node_id} not in {[c.id for c in pipeline.components]}")


def run_component(
    component, inputs: Artifacts, root: str, beam_args: list[str] | None = None, execution: str = ""
) -> Artifacts:
    """Runs ``component``'s executor with ``inputs``; returns its output artifacts.

    Outputs go to ``root/<component id>/<output key>[/<execution>]``: with ``execution``,
    the layout TFX's local orchestrator uses for successive executions of one node."""
    outputs: Artifacts = {}
    for key, channel in component.outputs.items():
        artifact = channel.type()
        artifact.uri = os.path.join(root, component.id, key, *([execution] if execution else []))
        os.makedirs(artifact.uri, exist_ok=True)
        outputs[key] = [artifact]
    exec_properties = {k: _serialize(v) for k, v in component.exec_properties.items() if v is not None}
    executor_class = component.executor_spec.executor_class
    tmp_dir = os.path.join(root, "tmp", component.id) + "/"
    if issubclass(executor_class, base_beam_executor.BaseBeamExecutor):
        context = base_beam_executor.BaseBeamExecutor.Context(
            beam_pipeline_args=beam_args or PipelineConfig().beam_pipeline_args,
            tmp_dir=tmp_dir,
            unique_id=component.id,
        )
    else:
        context = base_executor.BaseExecutor.Context(tmp_dir=tmp_dir, unique_id=component.id)
    executor_class(context).Do(inputs, outputs, exec_properties)
    return outputs
