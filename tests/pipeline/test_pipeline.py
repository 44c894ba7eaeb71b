"""The DAG's shape and gates, read from the pipeline object ``create_pipeline`` returns."""

from __future__ import annotations

import dataclasses
import json

import pytest
import tensorflow_model_analysis as tfma
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, SetupOptions, StandardOptions
from google.protobuf import json_format
from tfx import v1 as tfx
from tfx.dsl.compiler import compiler
from tfx.proto.orchestration import executable_spec_pb2, pipeline_pb2

from models import batched_metrics, signatures
from models.hparams import PIPELINE_ROOT_KEY, WARM_START_KEY
from models.preprocessing import PROBLEM_KEY
from models.problem import Problem
from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline
from runtime.beam_args import POOLED_RUNNER
from tests.support.problems import SHIPPED, TAXI
from tests.support.runs import EXECUTED_COMPONENTS


@pytest.fixture(scope="module")
def pipe():
    return create_pipeline(PipelineConfig())


def _ids(pipe) -> dict:
    return {c.id: c for c in pipe.components}


def _upstream(component) -> set[str]:
    return {n.id for n in component.upstream_nodes}


def test_every_component_is_in_the_dag(pipe):
    assert set(_ids(pipe)) == set(EXECUTED_COMPONENTS)


def test_transform_and_trainer_wait_for_the_anomaly_gate(pipe):
    ids = _ids(pipe)
    assert _upstream(ids["AnomalyGate"]) == {"ExampleValidator", "ImportSchemaGen", "CsvExampleGen", "StatisticsGen"}
    assert "AnomalyGate" in _upstream(ids["Transform"])
    assert "AnomalyGate" in _upstream(ids["Trainer"])
    assert "ImportSchemaGen" not in _upstream(ids["Transform"])


def test_the_trainer_reads_the_raw_examples_and_transform_writes_none(pipe):
    """The Trainer applies the transform graph to ExampleGen's examples (models/data.py)."""
    ids = _ids(pipe)
    assert "transformed_examples" not in ids["Transform"].outputs
    assert ids["Trainer"].inputs["examples"].producer_component_id == "CsvExampleGen"
    assert ids["Trainer"].inputs["examples"].output_key == "examples"
    assert ids["Trainer"].inputs["transform_graph"].producer_component_id == "Transform"


def test_transform_waits_for_the_drift_gate_without_taking_its_output(pipe):
    ids = _ids(pipe)
    assert _upstream(ids["DriftGate"]) == {"StatisticsGen", "AnomalyGate", "Champion"}
    assert ids["DriftGate"].inputs["baseline"].output_key == "model_blessing"
    assert "DriftGate" in _upstream(ids["Transform"])
    # An ordering edge only: a new baseline must not invalidate Transform's cache.
    assert all(channel.producer_component_id != "DriftGate" for channel in ids["Transform"].inputs.values())


def test_serving_data_gets_its_own_example_gen_and_statistics_for_the_skew_check(pipe):
    assert not {"ServingExampleGen", "ServingStatisticsGen"} & set(_ids(pipe))
    ids = _ids(create_pipeline(PipelineConfig(serving_data_root="/srv/requests")))
    assert ids["ServingExampleGen"].exec_properties["input_base"] == "/srv/requests"
    output = json.loads(ids["ServingExampleGen"].exec_properties["output_config"])
    assert [split["name"] for split in output["split_config"]["splits"]] == ["serving"]
    assert _upstream(ids["ServingStatisticsGen"]) == {"ServingExampleGen"}
    assert ids["DriftGate"].inputs["serving_statistics"].producer_component_id == "ServingStatisticsGen"
    # Serving data never reaches Transform, training or evaluation.
    downstream = {n.id for n in ids["ServingStatisticsGen"].downstream_nodes}
    assert downstream == {"DriftGate"} and _upstream(ids["ServingExampleGen"]) == set()


def test_drift_is_accepted_only_when_asked(pipe):
    assert _ids(pipe)["DriftGate"].exec_properties["accept_drift"] is False
    accepting = create_pipeline(PipelineConfig(accept_drift=True))
    assert _ids(accepting)["DriftGate"].exec_properties["accept_drift"] is True


def test_evaluator_compares_against_the_latest_blessed_model(pipe):
    ids = _ids(pipe)
    assert _upstream(ids["Evaluator"]) == {"CsvExampleGen", "Trainer", "Champion", "StatisticsGen"}
    assert ids["Evaluator"].inputs["statistics"].producer_component_id == "StatisticsGen"
    assert _upstream(ids["Pusher"]) == {"Trainer", "Evaluator"}


def _eval_config(pipe) -> tfma.EvalConfig:
    # The Evaluator keeps its config as JSON, as it will reach the executor.
    return json_format.Parse(_ids(pipe)["Evaluator"].exec_properties["eval_config"], tfma.EvalConfig())


def _gated(eval_config: tfma.EvalConfig) -> tfma.MetricConfig:
    (gated,) = [m for spec in eval_config.metrics_specs for m in spec.metrics if m.per_slice_thresholds]
    return gated


def test_evaluator_has_an_auc_floor_and_a_no_regression_threshold():
    config = PipelineConfig(blessing_threshold=0.91, max_regression=0.003)
    eval_config = _eval_config(create_pipeline(config))
    auc = _gated(eval_config)
    assert auc.class_name == "BatchedAUC"
    (per_slice,) = auc.per_slice_thresholds
    assert list(per_slice.slicing_specs) == [tfma.SlicingSpec()]  # the overall slice decides
    assert per_slice.threshold.value_threshold.lower_bound.value == pytest.approx(0.91)
    assert per_slice.threshold.change_threshold.absolute.value == pytest.approx(-0.003)
    assert not auc.HasField("threshold")
    sliced = {key for spec in eval_config.slicing_specs for key in spec.feature_keys}
    assert sliced == {"payment_type", "trip_start_hour"}
    assert eval_config.model_specs[0].label_key == "big_tipper_xf"


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_evaluator_follows_each_problems_spec(name):
    """Slices, label, prediction and the blessing gate come from the problem's spec; every
    task's metrics are the batched ones, fed by the batched extractors."""
    problem = SHIPPED[name]
    pipe = create_pipeline(PipelineConfig(problem=problem))
    eval_config = _eval_config(pipe)
    sliced = [key for spec in eval_config.slicing_specs for key in spec.feature_keys]
    assert sliced == list(problem.slices)
    (model_spec,) = eval_config.model_specs
    assert model_spec.label_key == problem.label_key
    assert model_spec.prediction_key == signatures.prediction_key(problem)
    gate = _gated(eval_config).per_slice_thresholds[0].threshold
    bound = gate.value_threshold.lower_bound if problem.higher_is_better else gate.value_threshold.upper_bound
    assert bound.value == pytest.approx(problem.blessing.threshold)
    assert json.loads(_gated(eval_config).config or "{}").get("name", "auc") == problem.blessing.metric
    assert _ids(pipe)["Evaluator"].exec_properties.get("module_path") == "models.evaluation"
    assert all(batched_metrics.is_batched(m) for spec in eval_config.metrics_specs for m in spec.metrics)


def test_an_error_metric_is_gated_by_a_ceiling_and_may_not_grow():
    problem = SHIPPED["penguin-body-mass"]
    gate = _gated(_eval_config(create_pipeline(PipelineConfig(problem=problem)))).per_slice_thresholds[0].threshold
    assert gate.value_threshold.upper_bound.value == pytest.approx(problem.blessing.threshold)
    assert not gate.value_threshold.HasField("lower_bound")
    assert gate.change_threshold.direction == tfma.MetricDirection.LOWER_IS_BETTER
    assert gate.change_threshold.absolute.value == pytest.approx(problem.blessing.max_regression)


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_problem_spec_reaches_transform_the_trainer_and_the_gate(name):
    problem = SHIPPED[name]
    ids = _ids(create_pipeline(PipelineConfig(problem=problem)))
    transform_config = json.loads(ids["Transform"].exec_properties["custom_config"])
    trainer_config = json.loads(ids["Trainer"].exec_properties["custom_config"])
    assert Problem.from_json(transform_config[PROBLEM_KEY]) == problem
    assert Problem.from_json(trainer_config[PROBLEM_KEY]) == problem
    assert Problem.from_json(ids["AnomalyGate"].exec_properties["problem"]) == problem
    assert ids["ImportSchemaGen"].exec_properties["schema_file"] == problem.contract_path


def test_the_problems_contract_applies_unless_inference_is_asked_for():
    pipe = create_pipeline(dataclasses.replace(PipelineConfig(), schema_path="/some/schema.pbtxt"))
    kinds = [type(c) for c in pipe.components]
    assert tfx.components.ImportSchemaGen in kinds and tfx.components.SchemaGen not in kinds
    assert _upstream(_ids(pipe)["ExampleValidator"]) == {"StatisticsGen", "ImportSchemaGen"}
    assert _ids(create_pipeline(PipelineConfig()))["ImportSchemaGen"].exec_properties["schema_file"] == (
        TAXI.contract_path
    )
    inferred = create_pipeline(PipelineConfig(infer_schema=True))
    assert tfx.components.SchemaGen in [type(c) for c in inferred.components]


def test_hyperparameters_reach_the_trainer(pipe):
    trainer = _ids(pipe)["Trainer"]
    custom_config = json.loads(trainer.exec_properties["custom_config"])
    assert custom_config.pop(PROBLEM_KEY) == TAXI.to_json()
    # Whether to warm-start, and the root a base model must lie under to be this pipeline's.
    assert custom_config.pop(WARM_START_KEY) is False
    assert custom_config.pop(PIPELINE_ROOT_KEY) == PipelineConfig().pipeline_root
    assert custom_config.pop("speedups") == 1
    assert custom_config == PipelineConfig().hparams.to_custom_config()
    assert trainer.exec_properties["run_fn"] == "models.trainer.run_fn"
    assert "base_model" not in trainer.inputs


def test_data_in_spans_ingests_the_newest_span_with_a_window_and_warm_starts(tmp_path):
    config = PipelineConfig(data_root=str(tmp_path), data_pattern="span-{SPAN}/*.csv", window_spans=3)
    components = _ids(create_pipeline(config))
    example_gen = components["CsvExampleGen"]
    assert example_gen.exec_properties["window_spans"] == 3
    assert example_gen.exec_properties["span_pattern"] == "span-{SPAN}/*.csv"
    assert example_gen.exec_properties["window_splits"] == "train"
    assert not example_gen.exec_properties.get("range_config")
    trainer = components["Trainer"]
    assert json.loads(trainer.exec_properties["custom_config"])[WARM_START_KEY] is True
    # The champion: what the Evaluator compares with is what the Trainer starts from.
    assert trainer.inputs["base_model"] is components["Evaluator"].inputs["baseline_model"]


def test_a_given_span_is_tfx_s_static_range(tmp_path):
    config = PipelineConfig(data_root=str(tmp_path), data_pattern="{YYYY}-{MM}-{DD}/*.csv", span=19000)
    range_config = json.loads(_ids(create_pipeline(config))["CsvExampleGen"].exec_properties["range_config"])
    assert range_config == {"static_range": {"start_span_number": 19000, "end_span_number": 19000}}


def _compiled_beam_args(pipe) -> dict[str, list[str]]:
    """node id -> the Beam args the orchestrator hands each Beam component's executor."""
    deployment = pipeline_pb2.IntermediateDeploymentConfig()
    compiler.Compiler().compile(pipe).deployment_config.Unpack(deployment)
    found = {}
    for node_id, spec in deployment.executor_specs.items():
        beam = executable_spec_pb2.BeamExecutableSpec()
        if spec.Unpack(beam):
            found[node_id] = list(beam.beam_pipeline_args)
    return found


def test_transform_computes_statistics_only_when_asked():
    assert _ids(create_pipeline(PipelineConfig())).get("Transform").exec_properties["disable_statistics"]
    with_statistics = create_pipeline(PipelineConfig(transform_statistics=True))
    assert not _ids(with_statistics)["Transform"].exec_properties["disable_statistics"]


def test_transform_traces_a_tf1_graph_only_when_asked():
    assert not _ids(create_pipeline(PipelineConfig()))["Transform"].exec_properties["force_tf_compat_v1"]
    tf1 = create_pipeline(PipelineConfig(transform_tf1_graph=True))
    assert _ids(tf1)["Transform"].exec_properties["force_tf_compat_v1"]


def test_transform_writes_no_analyzer_cache_nothing_would_read():
    transform = _ids(create_pipeline(PipelineConfig()))["Transform"]
    assert "updated_analyzer_cache" not in transform.outputs
    assert "analyzer_cache" not in transform.inputs


def test_with_worker_processes_a_transform_with_statistics_alone_runs_in_process():
    compiled = _compiled_beam_args(create_pipeline(PipelineConfig(beam_workers=2, transform_statistics=True)))
    assert set(compiled) == {"CsvExampleGen", "StatisticsGen", "Transform", "Evaluator"}
    modes = {node: PipelineOptions(args) for node, args in compiled.items()}

    def mode(node: str) -> tuple:
        direct = modes[node].view_as(DirectOptions)
        return modes[node].view_as(StandardOptions).runner, direct.direct_running_mode, direct.direct_num_workers

    assert mode("Transform") == ("DirectRunner", "in_memory", 1)
    for node in ("CsvExampleGen", "StatisticsGen", "Evaluator"):
        assert mode(node)[::2] == (POOLED_RUNNER, 2)
    # Without Transform's statistics, or with one worker: no per-component override.
    for config in (PipelineConfig(beam_workers=2), PipelineConfig(transform_statistics=True)):
        assert all(
            args == list(config.beam_pipeline_args) for args in _compiled_beam_args(create_pipeline(config)).values()
        )


@pytest.mark.parametrize(("extra", "library"), [((), "cloudpickle"), (("--pickle_library=dill",), "dill")])
def test_every_beam_component_pickles_with_the_local_pickler_unless_the_user_chose(extra, library):
    """Transform's own in-process args come after the user's: they must not undo a choice."""
    config = PipelineConfig(beam_workers=2, transform_statistics=True, extra_beam_args=extra)
    compiled = _compiled_beam_args(create_pipeline(config))
    assert {node: PipelineOptions(args).view_as(SetupOptions).pickle_library for node, args in compiled.items()} == {
        node: library for node in ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator")
    }


def test_no_tuner_unless_asked(pipe):
    assert "Tuner" not in _ids(pipe) and "hyperparameters" not in _ids(pipe)["Trainer"].inputs


def test_with_tuning_the_trainer_takes_the_tuners_best_hyperparameters():
    from pipeline.config import Tuning

    ids = _ids(create_pipeline(PipelineConfig(tuning=Tuning(trials=3))))
    tuner, trainer = ids["Tuner"], ids["Trainer"]
    assert trainer.inputs["hyperparameters"] is tuner.outputs["best_hyperparameters"]
    assert tuner.inputs["examples"] is trainer.inputs["examples"]
    assert tuner.inputs["transform_graph"] is trainer.inputs["transform_graph"]
    assert tuner.exec_properties["tuner_fn"] == "models.tuning.tuner_fn"
    config = json.loads(tuner.exec_properties["custom_config"])
    assert config["max_trials"] == 3 and config["base_hparams"] == PipelineConfig().hparams.to_custom_config()
    assert trainer.exec_properties["train_args"] == tuner.exec_properties["train_args"]


@pytest.mark.parametrize(("trials", "parallel"), [(0, 1), (2, 3), (2, 0)])
def test_a_tuning_budget_that_cannot_run_is_refused(trials, parallel):
    from pipeline.config import Tuning

    with pytest.raises(ValueError, match="trial"):
        Tuning(trials, parallel)


# The components whose execution a run with and without the speedups tells apart.
SWITCHED = ("CsvExampleGen", "StatisticsGen", "Transform")


def _compiled_parameters(config: PipelineConfig) -> dict[str, dict]:
    """Each node's parameters as the compiled pipeline IR holds them (what TFX's cache key takes)."""
    ir = compiler.Compiler().compile(create_pipeline(config))
    return {
        node.pipeline_node.node_info.id: json_format.MessageToDict(node.pipeline_node.parameters) for node in ir.nodes
    }


def test_the_speedups_switch_is_in_the_compiled_job_and_the_cache_key():
    """With and without the speedups the compiled pipelines differ in each switched
    component's parameter, and in the Evaluator's metrics and module: a result cached by
    one is never reused by the other."""
    config = PipelineConfig()
    sped_up, plain = _compiled_parameters(config), _compiled_parameters(dataclasses.replace(config, speedups=False))
    for node_id in SWITCHED:
        assert sped_up[node_id]["parameters"]["speedups"]["fieldValue"]["intValue"] == "1"
        assert plain[node_id]["parameters"]["speedups"]["fieldValue"]["intValue"] == "0"
    assert sped_up["Evaluator"] != plain["Evaluator"]
    for parameters, on in ((sped_up, 1), (plain, 0)):  # run_fn reads it from its custom_config
        custom_config = parameters["Trainer"]["parameters"]["custom_config"]["fieldValue"]["stringValue"]
        assert json.loads(custom_config)["speedups"] == on
    unswitched = set(sped_up) - {*SWITCHED, "Evaluator", "Trainer"}
    assert all(sped_up[node_id] == plain[node_id] for node_id in unswitched)


def test_without_the_speedups_the_evaluator_runs_tfmas_own_metrics_and_extractors():
    plain = create_pipeline(PipelineConfig(speedups=False))
    evaluator = _ids(plain)["Evaluator"]
    assert evaluator.exec_properties.get("module_path") is None
    eval_config = _eval_config(plain)
    metrics = [m for spec in eval_config.metrics_specs for m in spec.metrics]
    assert not any(batched_metrics.is_batched(m) for m in metrics)
    gated = _gated(eval_config)
    assert (gated.class_name, gated.module) == ("AUC", "")
    batched = _eval_config(create_pipeline(PipelineConfig()))
    assert [batched_metrics.tfma_metric_config(m) for s in batched.metrics_specs for m in s.metrics] == metrics
