"""The one pipeline definition, run locally and compiled for Kubeflow/Vertex unchanged.

ExampleGen -> StatisticsGen -> SchemaGen -> ExampleValidator -> AnomalyGate -> Transform
-> Trainer -> (latest blessed model) -> Evaluator -> Pusher.
"""

from __future__ import annotations

import tensorflow_model_analysis as tfma
from google.protobuf.wrappers_pb2 import BoolValue
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from components.anomaly_gate import AnomalyGate
from components.csv_example_gen import CsvExampleGen
from components.evaluator import Evaluator
from models import features, signatures
from pipeline.config import EVALUATOR_MODULE, PREPROCESSING_FN, RUN_FN, PipelineConfig

EVAL_SPLIT = "eval"
TRAIN_SPLIT = "train"


def eval_config(config: PipelineConfig) -> tfma.EvalConfig:
    """TFMA configuration: AUC must clear a floor and must not regress against the baseline."""
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=signatures.SERVING_SIGNATURE,
                prediction_key=signatures.PREDICTION_KEY,
                label_key=features.transformed_name(features.LABEL_KEY),
                # The label alone, not the whole Transform graph a second time.
                preprocessing_function_names=[signatures.LABEL_SIGNATURE],
                # Named, so TFMA calls the SavedModel's signatures as they are. Unset, it
                # loads each model once with Keras only to find its type, then again with
                # Keras in every Beam process (reviving every layer), though the metrics
                # below never use Keras.
                model_type=tfma.TF_GENERIC,
            )
        ],
        slicing_specs=[tfma.SlicingSpec()],
        # Only the metrics below: the model's compiled Keras metrics would add a second,
        # differently computed "auc" beside TFMA's.
        options=tfma.Options(include_default_metrics=BoolValue(value=False)),
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    tfma.MetricConfig(class_name="BinaryAccuracy"),
                    tfma.MetricConfig(
                        class_name="AUC",
                        threshold=tfma.MetricThreshold(
                            value_threshold=tfma.GenericValueThreshold(lower_bound={"value": config.min_eval_auc}),
                            # Ignored by the Evaluator when there is no blessed baseline yet.
                            change_threshold=tfma.GenericChangeThreshold(
                                direction=tfma.MetricDirection.HIGHER_IS_BETTER,
                                absolute={"value": -config.max_auc_regression - 1e-10},
                            ),
                        ),
                    ),
                ]
            )
        ],
    )


def _trainer(config: PipelineConfig, **inputs):
    """The Trainer in this process/container, or as a Vertex AI Training job."""
    custom_config = config.hparams.to_custom_config()
    if config.vertex_training is None:
        return tfx.components.Trainer(custom_config=custom_config, **inputs)
    custom_config.update(config.vertex_training.custom_config())
    return tfx.extensions.google_cloud_ai_platform.Trainer(custom_config=custom_config, **inputs)


def _pusher(config: PipelineConfig, **inputs):
    """Pushes blessed models to a versioned directory, or deploys them to a Vertex endpoint."""
    if config.vertex_endpoint is None:
        return tfx.components.Pusher(
            push_destination=tfx.proto.PushDestination(
                filesystem=tfx.proto.PushDestination.Filesystem(base_directory=config.serving_model_dir)
            ),
            **inputs,
        )
    vertex = tfx.extensions.google_cloud_ai_platform
    endpoint = config.vertex_endpoint
    return vertex.Pusher(
        custom_config={
            vertex.ENABLE_VERTEX_KEY: True,
            vertex.VERTEX_REGION_KEY: endpoint.region,
            vertex.VERTEX_CONTAINER_IMAGE_URI_KEY: endpoint.serving_image,
            vertex.SERVING_ARGS_KEY: {
                "project_id": endpoint.project,
                "endpoint_name": endpoint.endpoint_name,
                "machine_type": endpoint.machine_type,
            },
        },
        **inputs,
    )


def create_pipeline(
    config: PipelineConfig,
    metadata_connection_config: metadata_store_pb2.ConnectionConfig | None = None,
) -> tfx.dsl.Pipeline:
    """Builds the complete DAG from ``config``; runners only add where metadata lives."""
    # TFX's CsvExampleGen with a faster local executor (same splits and outputs).
    example_gen = CsvExampleGen(
        input_base=config.data_root,
        input_config=tfx.proto.Input(
            splits=[tfx.proto.Input.Split(name="single_split", pattern=config.data_pattern)]
        ),
        output_config=tfx.proto.Output(
            split_config=tfx.proto.SplitConfig(
                splits=[
                    tfx.proto.SplitConfig.Split(name=TRAIN_SPLIT, hash_buckets=config.train_buckets),
                    tfx.proto.SplitConfig.Split(name=EVAL_SPLIT, hash_buckets=config.eval_buckets),
                ]
            )
        ),
    )
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    if config.schema_path:
        schema_gen = tfx.components.ImportSchemaGen(schema_file=config.schema_path)
    else:
        schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs["statistics"])
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    anomaly_gate = AnomalyGate(
        anomalies=example_validator.outputs["anomalies"], schema=schema_gen.outputs["schema"]
    )
    validated_schema = anomaly_gate.outputs["validated_schema"]
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=validated_schema,
        preprocessing_fn=PREPROCESSING_FN,
        disable_statistics=not config.transform_statistics,
        # TFX writes every analyzer's accumulators by default, for a later Transform over
        # overlapping spans to read back through its `analyzer_cache` input. Nothing here
        # wires that input (one span), so the cache is written and never read: at 15k rows
        # writing it was a quarter of Transform's time (34 -> 26 s, measured alone).
        disable_analyzer_cache=True,
    )
    trainer = _trainer(
        config,
        run_fn=RUN_FN,
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=validated_schema,
        train_args=tfx.proto.TrainArgs(splits=[TRAIN_SPLIT], num_steps=config.train_steps),
        eval_args=tfx.proto.EvalArgs(splits=[EVAL_SPLIT], num_steps=config.eval_steps),
    )
    model_resolver = tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
        model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    # TFX's Evaluator, minus evaluating a model against itself on cached reruns.
    evaluator = Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=model_resolver.outputs["model"],
        example_splits=[EVAL_SPLIT],
        eval_config=eval_config(config),
        # TFMA's extractors minus per-example data its metrics never read (same results).
        module_path=EVALUATOR_MODULE,
    )
    pusher = _pusher(config, model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"])
    components = [
        example_gen, statistics_gen, schema_gen, example_validator, anomaly_gate,
        transform, trainer, model_resolver, evaluator, pusher,
    ]
    for component in components:
        if beam_args := config.component_beam_args(component.id):
            component.with_beam_pipeline_args(beam_args)
    return tfx.dsl.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=config.pipeline_root,
        components=components,
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=config.beam_pipeline_args,
    )
