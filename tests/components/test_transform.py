"""components.transform: the pipeline's Transform runs this executor, which runs TFX's
own inside the Transform speedups (tests/runtime/speedups/test_transform_traces.py and
test_transform_columns.py test what they do), and without them when they are switched off
(its ``speedups`` parameter, or the process's switch).
tests/pipeline/test_pipeline_components.py compares what it computes on the sample with
what TFX's own Transform computes there."""

from __future__ import annotations

import dataclasses
import os

from tensorflow_transform import impl_helper
from tfx.components.transform import executor as tfx_transform_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils
from tfx_bsl.tfxio import tf_example_record

from components import transform
from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline
from runtime import speedups
from runtime.speedups import transform_columns, transform_traces
from tests.support.harness import node


def test_the_pipelines_transform_runs_this_executor(tmp_path):
    pipe = create_pipeline(PipelineConfig(data_root=str(tmp_path), output_root=str(tmp_path / "out")))
    assert node(pipe, "Transform").executor_spec.executor_class is transform.Executor


def _during_do(monkeypatch, exec_properties: dict | None = None) -> tuple[object, object]:
    """The tracer and the TFXIO maker TFX's executor calls, as they are during its Do."""
    seen = []
    monkeypatch.setattr(
        transform.tfx_transform.Executor,
        "Do",
        lambda self, *args: seen.append(
            (impl_helper.trace_preprocessing_function, tfx_transform_executor.TransformProcessor._CreateTFXIO)
        ),
    )
    transform.Executor().Do({}, {}, exec_properties or {})
    return seen[0]


def test_the_executor_runs_tfx_own_inside_the_transform_speedups(monkeypatch):
    monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    tracer, create_tfxio = _during_do(monkeypatch)
    assert tracer is not transform_traces.TRACE_PREPROCESSING_FUNCTION
    assert create_tfxio is not transform_columns.CREATE_TFXIO
    assert impl_helper.trace_preprocessing_function is transform_traces.TRACE_PREPROCESSING_FUNCTION
    assert tfx_transform_executor.TransformProcessor._CreateTFXIO is transform_columns.CREATE_TFXIO


def test_switched_off_tfx_own_executor_runs_as_tfx_ships_it(monkeypatch):
    monkeypatch.setenv(speedups.ENV_VAR, "0")
    assert _during_do(monkeypatch) == (transform_traces.TRACE_PREPROCESSING_FUNCTION, transform_columns.CREATE_TFXIO)


def test_with_its_parameter_off_tfx_own_executor_runs_as_tfx_ships_it(monkeypatch):
    """The pipeline's switch reaches Transform as its parameter: off, neither the one trace
    nor the kept columns (which examples from a run with the speedups may still carry)."""
    monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    off = {speedups.PARAMETER: 0}
    assert _during_do(monkeypatch, off) == (
        transform_traces.TRACE_PREPROCESSING_FUNCTION,
        transform_columns.CREATE_TFXIO,
    )


def test_the_pipelines_switch_is_transforms_parameter(tmp_path):
    config = PipelineConfig(data_root=str(tmp_path), output_root=str(tmp_path / "out"))
    assert node(create_pipeline(config), "Transform").exec_properties[speedups.PARAMETER] == 1
    plain = dataclasses.replace(config, speedups=False)
    assert node(create_pipeline(plain), "Transform").exec_properties[speedups.PARAMETER] == 0


def test_the_pipelines_examples_carry_the_columns_transform_reads(examples, validated_schema):
    """ExampleGen keeps every split's columns, of the validated schema's types, so the
    sample's Transform (whose outputs are compared with TFX's in tests/pipeline) reads them
    rather than the records."""
    schema = io_utils.SchemaReader().read(os.path.join(validated_schema[0].uri, "schema.pbtxt"))
    for split in artifact_utils.decode_split_names(examples[0].split_names):
        pattern = artifact_utils.get_split_uri(examples, split) + "/*"
        made = tf_example_record.TFExampleRecord(pattern, schema=schema)
        assert isinstance(
            transform_columns._kept_columns_tfxio(made, pattern, schema), transform_columns.KeptColumnsRecord
        )
