"""TFX's Transform, its inspections of ``preprocessing_fn`` sharing one trace
(``runtime.speedups.transform_traces`` says how, and the switch that turns it off).

Same inputs, outputs, parameters and transform graph as ``tfx.components.Transform``.
"""

from __future__ import annotations

from typing import Any

from tfx.components.transform import component as tfx_component
from tfx.components.transform import executor as tfx_transform
from tfx.dsl.components.base import executor_spec

from runtime import speedups


class Executor(tfx_transform.Executor):
    """TFX's Transform executor, run with the Transform speedups (none when switched off)."""

    def Do(self, input_dict: dict[str, list], output_dict: dict[str, list], exec_properties: dict[str, Any]) -> None:
        with speedups.active(speedups.Stage.TRANSFORM):
            super().Do(input_dict, output_dict, exec_properties)


class Transform(tfx_component.Transform):
    """Drop-in for ``tfx.components.Transform`` (same inputs, outputs and parameters)."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
