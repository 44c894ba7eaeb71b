"""components.transform: the pipeline's Transform runs this executor, which runs TFX's
own inside the Transform speedups (tests/runtime/speedups/test_transform_traces.py tests
what they do), and without them when they are switched off."""

from __future__ import annotations

from tensorflow_transform import impl_helper

from components import transform
from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline
from runtime import speedups
from runtime.speedups import transform_traces
from tests.support.harness import node


def test_the_pipelines_transform_runs_this_executor(tmp_path):
    pipe = create_pipeline(PipelineConfig(data_root=str(tmp_path), output_root=str(tmp_path / "out")))
    assert node(pipe, "Transform").executor_spec.executor_class is transform.Executor


def _tracer_during_do(monkeypatch) -> object:
    seen = []
    monkeypatch.setattr(
        transform.tfx_transform.Executor,
        "Do",
        lambda self, *args: seen.append(impl_helper.trace_preprocessing_function),
    )
    transform.Executor().Do({}, {}, {})
    return seen[0]


def test_the_executor_runs_tfx_own_inside_the_transform_speedups(monkeypatch):
    monkeypatch.delenv(speedups.ENV_VAR, raising=False)
    assert _tracer_during_do(monkeypatch) is not transform_traces.TRACE_PREPROCESSING_FUNCTION
    assert impl_helper.trace_preprocessing_function is transform_traces.TRACE_PREPROCESSING_FUNCTION


def test_switched_off_tfx_own_executor_runs_with_tf_transforms_tracer(monkeypatch):
    monkeypatch.setenv(speedups.ENV_VAR, "0")
    assert _tracer_during_do(monkeypatch) is transform_traces.TRACE_PREPROCESSING_FUNCTION
