"""runtime.speedups.transform_traces: TFX's inspections of ``preprocessing_fn`` share one trace and
answer as each of their own traces did; analysis and TF1 traces are made as before; the
analysis' preliminary schema is read from its trace and equals tf.Transform's own."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform import graph_context, impl_helper, schema_inference
from tensorflow_transform.beam import analysis_graph_builder
from tensorflow_transform.beam.analyzer_cache import DatasetKey
from tfx.utils import io_utils
from tfx_bsl.tfxio import tf_example_record

from models import preprocessing as preprocessing_module
from runtime.speedups import transform_traces
from tests.support.problems import TAXI, with_problem

SCHEMA = Path(TAXI.contract_path)
# As TFX's Transform executor hands preprocessing_fn its custom_config: one partial per execution.
taxi_preprocessing_fn = functools.partial(preprocessing_module.preprocessing_fn, custom_config=with_problem())
DATASETS = [DatasetKey("train"), DatasetKey("eval")]


def two_phases_fn(inputs: dict) -> dict:
    """Analyzers over another analyzer's output (two phases), a vocabulary, and a column
    only the transform reads."""
    fare = tf.cast(inputs["fare"], tf.float32)
    centred = fare - tft.mean(fare)
    return {
        "scaled": tft.scale_to_z_score(centred),
        "company": tft.compute_and_apply_vocabulary(inputs["company"]),
        "miles": tf.cast(inputs["trip_miles"], tf.float32) * 2.0,
    }


def overridden_outputs_fn(inputs: dict) -> dict:
    """Outputs that carry schema overrides (a vocabulary's and buckets' indices, returned
    as they are), one that does not, and a sparse column passed through."""
    return {
        "company": tft.compute_and_apply_vocabulary(inputs["company"]),
        "fare_bucket": tft.bucketize(tf.cast(inputs["fare"], tf.float32), 4),
        "miles": tf.cast(inputs["trip_miles"], tf.float32) * 2.0,
        "tract": inputs["pickup_census_tract"],
    }


@pytest.fixture(scope="module")
def specs() -> dict:
    """The raw columns' TypeSpecs, as TFX's Transform executor gets them (through TFXIO)."""
    schema = io_utils.parse_pbtxt_file(str(SCHEMA), schema_pb2.Schema())
    return tf_example_record.TFExampleRecord(file_pattern="unused", schema=schema).TensorAdapter().OriginalTypeSpecs()


def counted(fn, traces: list):
    @functools.wraps(fn)
    def wrapper(inputs):
        traces.append(1)
        return fn(inputs)

    return wrapper


def inspections(fn, specs) -> tuple:
    """What TFX's Transform executor asks before its pipeline runs, in its order."""
    return (
        tft.get_analyze_input_columns(fn, specs),
        tft.get_analyze_input_columns(fn, specs),
        tft.get_transform_input_columns(fn, specs),
        analysis_graph_builder.get_analysis_cache_entry_keys(fn, specs, DATASETS, False),
    )


@pytest.mark.parametrize("fn", [taxi_preprocessing_fn, two_phases_fn], ids=["pipeline", "two_phases"])
def test_the_inspections_trace_once_and_answer_as_before(fn, specs):
    alone: list = []
    expected = inspections(counted(fn, alone), specs)
    shared: list = []
    with transform_traces.one_inspection_trace():
        answers = inspections(counted(fn, shared), specs)
    assert (len(alone), len(shared)) == (4, 1)
    assert answers == expected
    analyzed, _, transformed, cache_keys = answers
    assert analyzed and cache_keys and set(analyzed) < set(transformed)


def test_an_inspection_after_the_cache_keys_still_sees_every_analyzer(specs):
    """Listing cache entry keys empties the trace's TENSOR_REPLACEMENTS; the next inspection
    gets the collections back as the trace left them."""
    expected = tft.get_analyze_input_columns(two_phases_fn, specs)
    traces: list = []
    fn = counted(two_phases_fn, traces)
    with transform_traces.one_inspection_trace():
        analysis_graph_builder.get_analysis_cache_entry_keys(fn, specs, DATASETS, False)
        after = tft.get_analyze_input_columns(fn, specs)
    assert sorted(expected) == ["company", "fare"]
    assert (after, len(traces)) == (expected, 1)


def test_other_specs_or_functions_get_their_own_trace(specs):
    traces: list = []
    fn = counted(two_phases_fn, traces)
    fewer = {key: specs[key] for key in ("fare", "company", "trip_miles")}
    with transform_traces.one_inspection_trace():
        first = tft.get_transform_input_columns(fn, specs)
        second = tft.get_transform_input_columns(fn, fewer)
        tft.get_transform_input_columns(counted(two_phases_fn, traces), specs)
    assert sorted(first) == sorted(second) and len(traces) == 3


def test_analysis_and_tf1_traces_are_made_afresh(specs, tmp_path):
    """An analysis trace writes its temporary assets under its directory; a TF1 trace is
    a different graph: neither is shared."""
    traces: list = []
    fn = counted(two_phases_fn, traces)
    with transform_traces.one_inspection_trace():
        graphs = [impl_helper.trace_preprocessing_function(fn, specs, False, str(tmp_path))[0] for _ in range(2)]
        graphs += [impl_helper.trace_preprocessing_function(fn, specs, True)[0] for _ in range(2)]
    assert len(traces) == 4 and len({id(graph) for graph in graphs}) == 4


def test_the_tracer_is_tf_transforms_own_outside_the_block(specs):
    with pytest.raises(RuntimeError, match="inside"):
        with transform_traces.one_inspection_trace():
            assert impl_helper.trace_preprocessing_function is not transform_traces.TRACE_PREPROCESSING_FUNCTION
            raise RuntimeError("inside")
    assert impl_helper.trace_preprocessing_function is transform_traces.TRACE_PREPROCESSING_FUNCTION
    assert schema_inference.get_traced_metadata_fn is transform_traces.GET_TRACED_METADATA_FN
    traces: list = []
    fn = counted(two_phases_fn, traces)
    tft.get_transform_input_columns(fn, specs)
    tft.get_transform_input_columns(fn, specs)
    assert len(traces) == 2


def preliminary_schema(fn, specs, temp_dir: str) -> schema_pb2.Schema:
    """What tf.Transform's analysis does for its schema before any analyzer ran."""
    graph, inputs, outputs = impl_helper.trace_preprocessing_function(fn, specs, False, temp_dir)
    context = graph_context.TFGraphContext(module_to_export=tf.Module(), temp_dir=temp_dir, evaluated_replacements={})
    metadata_fn = schema_inference.get_traced_metadata_fn(fn, inputs, context, evaluate_schema_overrides=False)
    return schema_inference.infer_feature_schema_v2(outputs, metadata_fn, evaluate_schema_overrides=False)


@pytest.mark.parametrize(
    "fn",
    [taxi_preprocessing_fn, two_phases_fn, overridden_outputs_fn],
    ids=["pipeline", "two_phases", "overridden_outputs"],
)
def test_the_preliminary_schema_is_read_from_the_analysis_trace(fn, specs, tmp_path):
    alone: list = []
    expected = preliminary_schema(counted(fn, alone), specs, str(tmp_path / "alone"))
    shared: list = []
    with transform_traces.one_inspection_trace():
        schema = preliminary_schema(counted(fn, shared), specs, str(tmp_path / "shared"))
    assert (len(alone), len(shared)) == (2, 1)
    assert schema == expected
    if fn is overridden_outputs_fn:
        categorical = {f.name for f in expected.feature if f.int_domain.is_categorical}
        assert categorical == {"company", "fare_bucket"}


def test_the_final_schema_is_traced_as_before(specs, tmp_path):
    """Its overrides are evaluated with the analyzers' results: tf.Transform traces it."""
    traces: list = []
    fn = counted(overridden_outputs_fn, traces)
    with transform_traces.one_inspection_trace():
        _, inputs, _ = impl_helper.trace_preprocessing_function(fn, specs, False, str(tmp_path))
        context = graph_context.TFGraphContext(module_to_export=tf.Module(), temp_dir=str(tmp_path))
        schema_inference.get_traced_metadata_fn(fn, inputs, context, evaluate_schema_overrides=True)
    assert len(traces) == 2
