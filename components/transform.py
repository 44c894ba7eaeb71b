"""TFX's Transform, tracing ``preprocessing_fn`` once where TFX traced it four times to
inspect it.

Before its pipeline runs, TFX's Transform executor asks tf.Transform three questions about
``preprocessing_fn``: which columns the analyzers read (asked twice), which columns the
transform reads, and which analyzer cache entries it would use. Each answer traced the
whole function again, with the same input specs, only to read the graph. Here the first
trace is kept for the duration of the component and handed to the others. What tf.Transform
then does with ``preprocessing_fn`` (analysis and the saved transform graph) traces as
before, so the answers, the transform graph and its outputs do not change.

One inspection clears a graph collection as it reads it (``analysis_graph_builder.build``
empties ``TENSOR_REPLACEMENTS``); every hand-out restores the collections as the trace left
them, so each inspection sees the graph it would have traced itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tensorflow_transform import impl_helper
from tfx.components.transform import component as tfx_component
from tfx.components.transform import executor as tfx_transform
from tfx.dsl.components.base import executor_spec

# tf.Transform's tracer, which every inspection calls through the module attribute.
TRACE_PREPROCESSING_FUNCTION = impl_helper.trace_preprocessing_function


class _Trace:
    """A trace kept with its graph's collections as they were when it was made."""

    def __init__(self, traced: tuple) -> None:
        self.traced = traced
        graph = traced[0]
        self.collections = {name: list(graph.get_collection(name)) for name in graph.get_all_collection_keys()}

    def handed_out(self) -> tuple:
        graph = self.traced[0]
        for name in set(graph.get_all_collection_keys()) | set(self.collections):
            graph.clear_collection(name)
            for value in self.collections.get(name, ()):
                graph.add_to_collection(name, value)
        return self.traced


def _specs_key(specs: Mapping[str, Any]) -> tuple | None:
    """A hashable key for input specs, or None when they cannot be compared (then the
    function is traced as tf.Transform would)."""
    try:
        key = tuple(sorted(specs.items()))
        hash(key)
    except TypeError:
        return None
    return key


@contextlib.contextmanager
def one_inspection_trace() -> Iterator[None]:
    """Within this block, tracing the same ``preprocessing_fn`` with the same specs for
    inspection (a TF2 trace without a temporary directory: what the inspections ask for)
    returns the first such trace. Traces for analysis pass a temporary directory for the
    assets they write and are made afresh, as are TF1 traces."""
    kept: dict[tuple, _Trace] = {}

    def trace(
        preprocessing_fn: Callable, input_specs: Mapping[str, Any], use_tf_compat_v1: bool, base_temp_dir=None
    ) -> tuple:
        specs_key = None if use_tf_compat_v1 or base_temp_dir is not None else _specs_key(input_specs)
        if specs_key is None:
            return TRACE_PREPROCESSING_FUNCTION(preprocessing_fn, input_specs, use_tf_compat_v1, base_temp_dir)
        key = (preprocessing_fn, specs_key)
        if key not in kept:
            kept[key] = _Trace(TRACE_PREPROCESSING_FUNCTION(preprocessing_fn, input_specs, use_tf_compat_v1))
        return kept[key].handed_out()

    impl_helper.trace_preprocessing_function = trace
    try:
        yield
    finally:
        impl_helper.trace_preprocessing_function = TRACE_PREPROCESSING_FUNCTION


class Executor(tfx_transform.Executor):
    """TFX's Transform executor, its inspections sharing one trace (module docstring)."""

    def Do(self, input_dict: dict[str, list], output_dict: dict[str, list], exec_properties: dict[str, Any]) -> None:
        with one_inspection_trace():
            super().Do(input_dict, output_dict, exec_properties)


class Transform(tfx_component.Transform):
    """Drop-in for ``tfx.components.Transform`` (same inputs, outputs and parameters)."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)
