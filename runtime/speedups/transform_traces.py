"""tf.Transform's tracing of ``preprocessing_fn`` in one Transform execution: once where TFX
traced it four times to inspect it, and not again for the analysis' preliminary schema
(docs/speedups.md). The answers, the transform graph and its outputs do not change. Written
against tensorflow-transform 1.16.0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import tensorflow as tf
from tensorflow_transform import impl_helper, schema_inference

# tf.Transform's tracer, which every inspection calls through the module attribute.
TRACE_PREPROCESSING_FUNCTION = impl_helper.trace_preprocessing_function
# tf.Transform's schema tracer, which its analysis calls through the module attribute.
GET_TRACED_METADATA_FN = schema_inference.get_traced_metadata_fn
# The graph collection of the tensors that carry a schema override (tf.Transform's key).
OVERRIDE_COLLECTION = schema_inference._TF_METADATA_TENSOR_COLLECTION


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


class _Overrides:
    """Which outputs of one analysis trace carry a schema override, as tf.Transform's
    ``metadata_fn`` finds them: the override collection's tensors that are outputs
    (their values, for sparse and ragged ones), named by output key."""

    def __init__(self, graph: tf.Graph, structured_inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
        self.structured_inputs = structured_inputs
        keys_by_name = schema_inference._get_tensor_value_to_key_map(outputs)
        overridden = graph.get_collection(OVERRIDE_COLLECTION)
        self.keys = [keys_by_name[tensor.name] for tensor in overridden if tensor.name in keys_by_name]

    def metadata_fn(self) -> dict:
        """What tf.Transform's ``metadata_fn`` returns without evaluating overrides."""
        return {OVERRIDE_COLLECTION: [tf.constant(key) for key in self.keys]} if self.keys else {}


def _analysis_trace(
    preprocessing_fn: Callable, input_specs: Mapping[str, Any], base_temp_dir: str
) -> tuple[tuple, _Overrides | None]:
    """A TF2 trace for analysis, made as tf.Transform makes it, and its overrides (None if
    the function did not return one mapping in one call)."""
    returned: list = []

    def recording(inputs):
        outputs = preprocessing_fn(inputs)
        returned.append(outputs)
        return outputs

    traced = TRACE_PREPROCESSING_FUNCTION(recording, input_specs, False, base_temp_dir)
    graph, structured_inputs, _ = traced
    if len(returned) != 1 or not isinstance(returned[0], Mapping):
        return traced, None
    return traced, _Overrides(graph, structured_inputs, returned[0])


@contextlib.contextmanager
def one_inspection_trace() -> Iterator[None]:
    """Within this block, tracing the same ``preprocessing_fn`` with the same specs for
    inspection (a TF2 trace without a temporary directory: what the inspections ask for)
    returns the first such trace. Traces for analysis pass a temporary directory for the
    assets they write and are made afresh, as are TF1 traces; the preliminary schema of an
    analysis trace is read from it (module docstring)."""
    kept: dict[tuple, _Trace] = {}
    # By function and the identity of the analysis trace's inputs (kept alive by the
    # entry, so no other object takes that identity while the block lasts).
    overrides: dict[tuple, _Overrides] = {}

    def trace(
        preprocessing_fn: Callable, input_specs: Mapping[str, Any], use_tf_compat_v1: bool, base_temp_dir=None
    ) -> tuple:
        if not use_tf_compat_v1 and base_temp_dir is not None:
            traced, found = _analysis_trace(preprocessing_fn, input_specs, base_temp_dir)
            if found is not None:
                overrides[(preprocessing_fn, id(found.structured_inputs))] = found
            return traced
        specs_key = None if use_tf_compat_v1 else _specs_key(input_specs)
        if specs_key is None:
            return TRACE_PREPROCESSING_FUNCTION(preprocessing_fn, input_specs, use_tf_compat_v1, base_temp_dir)
        key = (preprocessing_fn, specs_key)
        if key not in kept:
            kept[key] = _Trace(TRACE_PREPROCESSING_FUNCTION(preprocessing_fn, input_specs, use_tf_compat_v1))
        return kept[key].handed_out()

    def get_traced_metadata_fn(
        preprocessing_fn: Callable, structured_inputs: Mapping[str, Any], tf_graph_context, evaluate_schema_overrides
    ):
        found = overrides.get((preprocessing_fn, id(structured_inputs)))
        # Only the preliminary schema: overrides not evaluated, no analyzer results given.
        replacements = getattr(tf_graph_context, "_evaluated_replacements", "unknown")
        preliminary = not evaluate_schema_overrides and not replacements
        if found is not None and preliminary:
            return found.metadata_fn
        return GET_TRACED_METADATA_FN(preprocessing_fn, structured_inputs, tf_graph_context, evaluate_schema_overrides)

    impl_helper.trace_preprocessing_function = trace
    schema_inference.get_traced_metadata_fn = get_traced_metadata_fn
    try:
        yield
    finally:
        impl_helper.trace_preprocessing_function = TRACE_PREPROCESSING_FUNCTION
        schema_inference.get_traced_metadata_fn = GET_TRACED_METADATA_FN
