"""The project's Transform: TFX's, which with its ``speedups`` parameter on traces
``preprocessing_fn`` once for TFX's inspections and reads the columns ExampleGen kept
(``runtime.speedups``: transform_traces, transform_columns); off, TFX's executor as shipped.

Same inputs, outputs and transform graph as ``tfx.components.Transform``.
"""

from __future__ import annotations

from typing import Any

from tfx.components.transform import component as tfx_component
from tfx.components.transform import executor as tfx_transform
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs
from tfx.types.component_spec import ExecutionParameter

from runtime import speedups


class Executor(tfx_transform.Executor):
    """TFX's Transform executor, run with the Transform speedups when its parameter says so."""

    def Do(self, input_dict: dict[str, list], output_dict: dict[str, list], exec_properties: dict[str, Any]) -> None:
        with speedups.active(speedups.Stage.TRANSFORM, on=speedups.component_on(exec_properties)):
            super().Do(input_dict, output_dict, exec_properties)


class TransformSpec(standard_component_specs.TransformSpec):
    """TFX's Transform spec, and whether to run with the Transform speedups."""

    PARAMETERS = {
        **standard_component_specs.TransformSpec.PARAMETERS,
        speedups.PARAMETER: ExecutionParameter(type=int, optional=True),
    }


class Transform(tfx_component.Transform):
    """Drop-in for ``tfx.components.Transform`` (same inputs, outputs and parameters, plus
    ``with_speedups``: False runs TFX's executor as shipped)."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, *, with_speedups: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.spec = speedups.with_parameter(self.spec, TransformSpec, with_speedups)
