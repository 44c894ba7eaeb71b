"""The one pipeline definition, run locally and compiled for Kubeflow/Vertex unchanged.

ExampleGen -> StatisticsGen -> ImportSchemaGen (the contract; SchemaGen with --infer-schema)
-> ExampleValidator -> AnomalyGate -> Champion -> DriftGate (against the champion's data) ->
Transform -> Trainer -> Evaluator (against the champion) -> Pusher (which records the new
champion). The Champion component reads the champion record under the pipeline's root: no
metadata query, the same on every orchestrator.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import tensorflow_model_analysis as tfma
from google.protobuf.wrappers_pb2 import BoolValue
from ml_metadata.proto import metadata_store_pb2

# TFX's modules rather than `tfx.v1`: importing `tfx.v1` also imports every component and
# the Vertex AI extensions (google-cloud-aiplatform), seconds of every local run, which
# use none of them. The Vertex components are imported only when the config asks for Vertex.
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.schema_gen.component import SchemaGen
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.components.trainer.component import Trainer
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, range_config_pb2, trainer_pb2

from components.anomaly_gate import AnomalyGate
from components.champion import NODE_ID as CHAMPION_ID
from components.champion import RUN_ID_PLACEHOLDER, Champion
from components.csv_example_gen import CsvExampleGen, CsvExampleGenWithoutDriver
from components.drift_gate import SERVING_SPLIT, DriftGate
from components.evaluator import Evaluator
from components.pusher import Pusher
from components.statistics_gen import StatisticsGen
from components.transform import Transform
from models import batched_metrics, signatures
from models.hparams import PIPELINE_ROOT_KEY, WARM_START_KEY
from models.preprocessing import PROBLEM_KEY
from models.problem import Task
from pipeline.config import EVALUATOR_MODULE, PREPROCESSING_FN, RUN_FN, TUNER_FN, PipelineConfig
from runtime import speedups

EVAL_SPLIT = "eval"
TRAIN_SPLIT = "train"
# The Evaluator's metrics per task, by the names the spec's [evaluation] metric uses: the
# class TFMA is given for each (its own, or Keras'), computed a batch at a time with the
# speedups on (models/batched_metrics.py).
_NAMED_METRICS = {
    "accuracy": "SparseCategoricalAccuracy",
    "rmse": "RootMeanSquaredError",
    "mae": "MeanAbsoluteError",
}


def _blessing_threshold(config: PipelineConfig) -> tfma.MetricThreshold:
    """The blessing metric's floor (ceiling for an error metric), and no regression against
    the champion beyond the tolerance (ignored while there is none yet)."""
    blessing, higher = config.blessing, config.problem.higher_is_better
    bound = {"lower_bound" if higher else "upper_bound": {"value": blessing.threshold}}
    slack = blessing.max_regression + 1e-10
    return tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(**bound),
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER if higher else tfma.MetricDirection.LOWER_IS_BETTER,
            absolute={"value": -slack if higher else slack},
        ),
    )


def _metric_configs(config: PipelineConfig) -> list[tfma.MetricConfig]:
    """The Evaluator's metrics: batched with the speedups (``models.batched_metrics``),
    TFMA's own without them (same names, thresholds and results)."""
    metrics = _batched_metric_configs(config)
    return metrics if config.speedups else [batched_metrics.tfma_metric_config(metric) for metric in metrics]


def _batched_metric_configs(config: PipelineConfig) -> list[tfma.MetricConfig]:
    """The Evaluator's metrics for the problem's task; the blessing metric carries the gate
    on the overall slice only: a threshold set on the metric itself applies to every slice,
    and a slice with a few dozen rows must not decide the blessing."""
    problem = config.problem
    gate = [tfma.PerSliceMetricThreshold(slicing_specs=[tfma.SlicingSpec()], threshold=_blessing_threshold(config))]

    def gated(name: str) -> dict:
        return {"per_slice_thresholds": gate} if name == config.blessing.metric else {}

    if problem.task == Task.BINARY:
        return [
            batched_metrics.metric_config("ExampleCount"),
            batched_metrics.metric_config("BinaryAccuracy", **gated("accuracy")),
            batched_metrics.metric_config("AUC", **gated("auc")),
            # The report's ROC curve and confusion matrix, and its calibration plot.
            batched_metrics.metric_config("ConfusionMatrixPlot", config='{"num_thresholds": 100}'),
            batched_metrics.metric_config("CalibrationPlot", config='{"num_buckets": 10}'),
        ]
    names = ("accuracy",) if problem.task == Task.MULTICLASS else ("rmse", "mae")
    metrics = [batched_metrics.metric_config("ExampleCount")]
    for name in names:
        metrics.append(
            batched_metrics.metric_config(_NAMED_METRICS[name], config=json.dumps({"name": name}), **gated(name))
        )
    if problem.task == Task.MULTICLASS:
        # The report's confusion matrix between the classes.
        metrics.append(batched_metrics.metric_config("MultiClassConfusionMatrixPlot"))
    else:
        # The report's predicted-against-actual means.
        metrics += [batched_metrics.metric_config("MeanLabel"), batched_metrics.metric_config("MeanPrediction")]
    return metrics


def eval_config(config: PipelineConfig) -> tfma.EvalConfig:
    """TFMA configuration: the problem's blessing metric must clear its threshold and must
    not regress against the baseline; metrics and plots follow the task."""
    problem = config.problem
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=signatures.SERVING_SIGNATURE,
                prediction_key=signatures.prediction_key(problem),
                label_key=problem.label_key,
                # The label alone, not the whole Transform graph a second time.
                preprocessing_function_names=[signatures.LABEL_SIGNATURE],
                # Named, so TFMA calls the SavedModel's signatures as they are. Unset, it
                # loads each model once with Keras only to find its type, then again with
                # Keras in every Beam process (reviving every layer), though the metrics
                # below never use Keras.
                model_type=tfma.TF_GENERIC,
            )
        ],
        # Overall, and per slicing column of the problem's spec (the run report shows each).
        slicing_specs=[tfma.SlicingSpec(), *(tfma.SlicingSpec(feature_keys=[key]) for key in problem.slices)],
        # Only the metrics below: the model's compiled Keras metrics would add a second,
        # differently computed "auc" beside TFMA's.
        options=tfma.Options(include_default_metrics=BoolValue(value=False)),
        metrics_specs=[tfma.MetricsSpec(metrics=_metric_configs(config))],
    )


def _trainer(config: PipelineConfig, **inputs):
    """The Trainer in this process/container, in a TFJob on a Kubeflow cluster, or as a
    Vertex AI Training job."""
    custom_config = {
        **config.hparams.to_custom_config(),
        PROBLEM_KEY: config.problem.to_json(),
        WARM_START_KEY: config.warm_start,
        PIPELINE_ROOT_KEY: config.pipeline_root,
        speedups.PARAMETER: int(config.speedups),
    }
    if config.tfjob is not None:
        from components.tfjob import TfJobTrainer

        tfjob_config = {**custom_config, **config.tfjob.custom_config(config.pipeline_name)}
        return TfJobTrainer(custom_config=tfjob_config, **inputs).with_id("Trainer")
    if config.vertex_training is None:
        return Trainer(custom_config=custom_config, **inputs)
    from tfx.extensions.google_cloud_ai_platform.trainer.component import Trainer as VertexTrainer

    custom_config.update(config.vertex_training.custom_config())
    return VertexTrainer(custom_config=custom_config, **inputs)


def _tuner(config: PipelineConfig, **inputs):
    """TFX's Tuner here, or its cloud version running trials in parallel on Vertex AI
    Training when the Trainer trains there."""
    from models import tuning

    custom_config = tuning.tuner_custom_config(config.hparams, config.tuning.trials)
    custom_config[PROBLEM_KEY] = config.problem.to_json()
    custom_config[speedups.PARAMETER] = int(config.speedups)
    if config.vertex_training is None:
        from tfx.components.tuner.component import Tuner

        return Tuner(tuner_fn=TUNER_FN, custom_config=custom_config, **inputs)
    from tfx.extensions.google_cloud_ai_platform.tuner.component import Tuner as VertexTuner
    from tfx.proto import tuner_pb2

    from pipeline.vertex_tuning import tuning_custom_config

    custom_config.update(
        tuning_custom_config(
            config.vertex_training, config.tuning.parallel_trials, f"{config.pipeline_root.rstrip('/')}/tuner_trials"
        )
    )
    return VertexTuner(
        tuner_fn=TUNER_FN,
        tune_args=tuner_pb2.TuneArgs(num_parallel_trials=config.tuning.parallel_trials),
        custom_config=custom_config,
        **inputs,
    )


def _pusher(config: PipelineConfig, evaluation, examples, **inputs):
    """Pushes blessed models to a versioned directory, or on Vertex AI into the pipeline's
    registry model (components/vertex_pusher.py), deployed to an endpoint or only
    registered; ``evaluation`` and ``examples`` label the version there."""
    if config.vertex_endpoint is None:
        return Pusher(
            push_destination=pusher_pb2.PushDestination(
                filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=config.serving_model_dir)
            ),
            pipeline_root=config.pipeline_root,
            **inputs,
        )
    from tfx.extensions.google_cloud_ai_platform import constants as vertex

    from components.vertex_pusher import REGISTRY_KEY
    from components.vertex_pusher import Pusher as VertexPusher

    endpoint = config.vertex_endpoint
    problem = config.problem
    return VertexPusher(
        custom_config={
            vertex.ENABLE_VERTEX_KEY: True,
            vertex.VERTEX_REGION_KEY: endpoint.region,
            vertex.VERTEX_CONTAINER_IMAGE_URI_KEY: endpoint.serving_image,
            vertex.SERVING_ARGS_KEY: {
                "project_id": endpoint.project,
                "endpoint_name": endpoint.endpoint_name or "",
                "machine_type": endpoint.machine_type,
            },
            REGISTRY_KEY: {
                "pipeline_name": config.pipeline_name,
                "task": problem.task.value,
                "metric": problem.blessing.metric,
                "endpoint_name": endpoint.endpoint_name,
                "canary_percent": endpoint.canary_percent,
                "prediction_key": signatures.prediction_key(problem),
                "explanations": endpoint.explanations,
            },
        },
        pipeline_root=config.pipeline_root,
        evaluation=evaluation,
        examples=examples,
        **inputs,
    )


def _csv_example_gen(
    config: PipelineConfig, input_base: str, buckets_by_split: dict[str, int], **window
) -> CsvExampleGen | CsvExampleGenWithoutDriver:
    """TFX's CsvExampleGen with a faster local executor (same splits and outputs): the files
    under ``input_base`` matching the data pattern, rows split by hash into these splits and
    numbers of hash buckets, headers renamed to the problem's feature names; ``window``: the
    span and the rolling window (``CsvExampleGen``'s arguments). Where the orchestrator runs
    no ExampleGen driver, the variant that resolves its span itself and always runs."""
    pattern, problem = config.data_pattern, config.problem
    if not config.example_gen_driver:
        window["run_id"] = RUN_ID_PLACEHOLDER
    example_gen = CsvExampleGen if config.example_gen_driver else CsvExampleGenWithoutDriver
    return example_gen(
        input_base=input_base,
        input_config=example_gen_pb2.Input(splits=[example_gen_pb2.Input.Split(name="single_split", pattern=pattern)]),
        output_config=example_gen_pb2.Output(
            split_config=example_gen_pb2.SplitConfig(
                splits=[
                    example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=buckets)
                    for name, buckets in buckets_by_split.items()
                ]
            )
        ),
        column_names=problem.header_names,
        with_speedups=config.speedups,
        **window,
    ).with_id("CsvExampleGen")


def _span_window(config: PipelineConfig) -> dict:
    """ExampleGen's span (TFX's ``range_config``: one given span, else the newest) and the
    rolling window of spans the Trainer's split holds (components/spans.py)."""
    if not config.has_spans:
        return {}
    window = {"window_spans": config.window_spans, "window_splits": [TRAIN_SPLIT]}
    if config.span is not None:
        window["range_config"] = range_config_pb2.RangeConfig(
            static_range=range_config_pb2.StaticRange(start_span_number=config.span, end_span_number=config.span)
        )
    return window


def _serving_statistics(config: PipelineConfig) -> tuple[list, dict]:
    """With serving data: its ExampleGen and StatisticsGen, and DriftGate's input for skew."""
    if not config.serving_data_root:
        return [], {}
    # One split holding every row (TFX's default would split them 2:1 into train/eval).
    serving_example_gen = _csv_example_gen(config, config.serving_data_root, {SERVING_SPLIT: 1}).with_id(
        "ServingExampleGen"
    )
    serving_statistics_gen = StatisticsGen(
        examples=serving_example_gen.outputs["examples"], with_speedups=config.speedups
    ).with_id("ServingStatisticsGen")
    return [serving_example_gen, serving_statistics_gen], {
        "serving_statistics": serving_statistics_gen.outputs["statistics"]
    }


@dataclasses.dataclass(frozen=True)
class _Data:
    """The data's components: its examples, their statistics and the schema."""

    example_gen: Any
    statistics_gen: Any
    schema_gen: Any

    @property
    def examples(self) -> Any:
        return self.example_gen.outputs["examples"]

    @property
    def statistics(self) -> Any:
        return self.statistics_gen.outputs["statistics"]


@dataclasses.dataclass(frozen=True)
class _Checks:
    """The checks between the data and training: the contract's (``contract``: its
    components), then drift's, with serving data's ExampleGen and StatisticsGen when given."""

    contract: list
    validated_schema: Any
    serving: list
    drift_gate: Any


def _data(config: PipelineConfig) -> _Data:
    """ExampleGen (the span and its window), StatisticsGen, and the schema: the contract's,
    or one SchemaGen infers."""
    example_gen = _csv_example_gen(
        config,
        config.data_root,
        {TRAIN_SPLIT: config.train_buckets, EVAL_SPLIT: config.eval_buckets},
        **_span_window(config),
    )
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"], with_speedups=config.speedups)
    if config.schema_path:
        schema_gen = ImportSchemaGen(schema_file=config.schema_path)
    else:
        schema_gen = SchemaGen(statistics=statistics_gen.outputs["statistics"])
    return _Data(example_gen, statistics_gen, schema_gen)


def _checks(config: PipelineConfig, data: _Data, champion: Champion) -> _Checks:
    """ExampleValidator and AnomalyGate (the contract), and DriftGate against the champion's
    data (and serving data's skew, when given)."""
    example_validator = ExampleValidator(statistics=data.statistics, schema=data.schema_gen.outputs["schema"])
    anomaly_gate = AnomalyGate(
        anomalies=example_validator.outputs["anomalies"],
        schema=data.schema_gen.outputs["schema"],
        examples=data.examples,
        statistics=data.statistics,
        problem=config.problem.to_json(),
    )
    validated_schema = anomaly_gate.outputs["validated_schema"]
    serving_components, serving_inputs = _serving_statistics(config)
    drift_gate = DriftGate(
        statistics=data.statistics,
        schema=validated_schema,
        baseline=champion.outputs["model_blessing"],
        accept_drift=config.accept_drift,
        pipeline_root=config.pipeline_root,
        # With spans, the eval split holds the new span only: it is compared with the champion's data.
        new_data_split=EVAL_SPLIT if config.has_spans else None,
        **serving_inputs,
    )
    return _Checks([example_validator, anomaly_gate], validated_schema, serving_components, drift_gate)


def _champion(config: PipelineConfig) -> Champion:
    """The champion record under the pipeline's root; runs on every run: ``run_id`` is the
    run's own id on Kubeflow and Vertex (no cache hit)."""
    return Champion(pipeline_root=config.pipeline_root, run_id=RUN_ID_PLACEHOLDER).with_id(CHAMPION_ID)


def _transform(config: PipelineConfig, data: _Data, checks: _Checks) -> Transform:
    """Transform, after DriftGate (an ordering edge: components/drift_gate.py says why not a
    data dependency)."""
    transform = Transform(
        examples=data.examples,
        schema=checks.validated_schema,
        preprocessing_fn=PREPROCESSING_FN,
        custom_config={PROBLEM_KEY: config.problem.to_json()},
        disable_statistics=not config.transform_statistics,
        # TFX writes every analyzer's accumulators by default, for a later Transform over
        # overlapping spans to read back through its `analyzer_cache` input. Nothing here
        # wires that input (one span), so the cache would be written, never read, and
        # writing it is a large share of Transform's time on small data.
        disable_analyzer_cache=True,
        # Writing transformed rows was most of its time: the Trainer transforms what it reads.
        materialize=False,
        force_tf_compat_v1=config.transform_tf1_graph,
        with_speedups=config.speedups,
    )
    transform.add_upstream_node(checks.drift_gate)
    return transform


def _training(config: PipelineConfig, data: _Data, checks: _Checks, champion: Champion) -> list:
    """Transform, the Tuner when asked, and the Trainer (last)."""
    transform = _transform(config, data, checks)
    training_inputs = dict(
        examples=data.examples,
        transform_graph=transform.outputs["transform_graph"],
        schema=checks.validated_schema,
        train_args=trainer_pb2.TrainArgs(splits=[TRAIN_SPLIT], num_steps=config.train_steps),
        eval_args=trainer_pb2.EvalArgs(splits=[EVAL_SPLIT], num_steps=config.eval_steps),
    )
    # Each trial trains as the Trainer would; the Trainer then takes the best one's choices.
    tuner = _tuner(config, **training_inputs) if config.tuning else None
    if tuner is not None:
        training_inputs["hyperparameters"] = tuner.outputs["best_hyperparameters"]
    if config.warm_start:
        # The champion's weights to start from (models/warm_start.py).
        training_inputs["base_model"] = champion.outputs["model"]
    trainer = _trainer(config, run_fn=RUN_FN, **training_inputs)
    return [transform, *([tuner] if tuner is not None else []), trainer]


def _evaluator(config: PipelineConfig, data: _Data, trainer: Any, champion: Champion) -> Evaluator:
    """TFX's Evaluator, minus evaluating a model against itself on cached reruns; with the
    speedups, TFMA's extractors slicing whole batches for the batched metrics (same results)."""
    return Evaluator(
        examples=data.examples,
        model=trainer.outputs["model"],
        baseline_model=champion.outputs["model"],
        pipeline_root=config.pipeline_root,
        example_splits=[EVAL_SPLIT],
        # Kept with the blessing: the next run's DriftGate baseline.
        statistics=data.statistics,
        eval_config=eval_config(config),
        module_path=EVALUATOR_MODULE if config.speedups else None,
    )


def create_pipeline(
    config: PipelineConfig,
    metadata_connection_config: metadata_store_pb2.ConnectionConfig | None = None,
) -> Pipeline:
    """Builds the complete DAG from ``config``; runners only add where metadata lives."""
    data = _data(config)
    champion = _champion(config)
    checks = _checks(config, data, champion)
    training = _training(config, data, checks, champion)
    trainer = training[-1]
    evaluator = _evaluator(config, data, trainer, champion)
    pusher = _pusher(
        config,
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        evaluation=evaluator.outputs["evaluation"],
        examples=data.examples,
    )
    components = [
        data.example_gen,
        data.statistics_gen,
        data.schema_gen,
        *checks.contract,
        champion,
        *checks.serving,
        checks.drift_gate,
        *training,
        evaluator,
        pusher,
    ]
    for component in components:
        if beam_args := config.component_beam_args(component.id):
            component.with_beam_pipeline_args(beam_args)
    return Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=components,
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=config.beam_pipeline_args,
    )
