"""One typed configuration for the pipeline, with defaults that run offline.

Runners build a ``PipelineConfig`` (from flags) and hand it to ``create_pipeline``;
every derived location comes from here so the runners and the run summary agree.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from models.hparams import HParams
from pipeline.vertex_training import VertexTraining
from runtime import beam_args

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_ROOT = str(REPO_ROOT / "data")
DEFAULT_OUTPUT_ROOT = str(REPO_ROOT / "outputs")
# The Vertex compiler accepts only these names; local runs keep to it so the same
# configuration compiles everywhere.
PIPELINE_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")

# The data contract's file name: a curated schema beside the data (data/schema.pbtxt).
CONTRACT_FILE = "schema.pbtxt"

PREPROCESSING_FN = "models.preprocessing.preprocessing_fn"
RUN_FN = "models.trainer.run_fn"
TUNER_FN = "models.tuning.tuner_fn"
# The Evaluator's user code (TFX looks up custom_extractors in it).
EVALUATOR_MODULE = "models.evaluation"
# Vertex AI's prebuilt TensorFlow serving image (the newest the aiplatform client lists).
DEFAULT_SERVING_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


@dataclasses.dataclass(frozen=True)
class VertexEndpoint:
    """Where the Pusher deploys a blessed model on Vertex AI, instead of a directory."""

    project: str
    region: str
    endpoint_name: str
    machine_type: str = "n1-standard-2"
    serving_image: str = DEFAULT_SERVING_IMAGE

    def __post_init__(self) -> None:
        for name in ("project", "region", "endpoint_name"):
            if not getattr(self, name):
                raise ValueError(f"VertexEndpoint.{name} is required")


@dataclasses.dataclass(frozen=True)
class Tuning:
    """A Tuner before the Trainer (``models/tuning.py``): ``trials`` models trained, the best
    one's hyperparameters handed on. On Vertex AI Training, ``parallel_trials`` run at once."""

    trials: int = 8
    parallel_trials: int = 1

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ValueError(f"Tuning needs a budget of at least 1 trial, got {self.trials}")
        if not 1 <= self.parallel_trials <= self.trials:
            raise ValueError(
                f"parallel_trials must be between 1 and the {self.trials} trial(s), got {self.parallel_trials}"
            )


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Everything that shapes a run. Paths may be local or gs://."""

    pipeline_name: str = "taxi-big-tipper"
    data_root: str = DEFAULT_DATA_ROOT
    # Which files under data_root are data (data/ also holds a README).
    data_pattern: str = "*.csv"
    output_root: str = DEFAULT_OUTPUT_ROOT
    # Train:eval split by hash of each row, in hash buckets.
    train_buckets: int = 2
    eval_buckets: int = 1
    train_steps: int = 400
    # Batches of the Trainer's validation after each epoch (None: the whole eval split).
    # It only feeds the training logs (TensorBoard); the Evaluator judges the model on the
    # whole eval split. Capped, it stays cheap however large the data grows.
    eval_steps: int | None = 100
    # The data contract (a curated schema.pbtxt) to validate against; None infers one with
    # SchemaGen. The runners default it to the contract beside the data.
    schema_path: str | None = None
    # Train on data that drifted beyond the contract's thresholds (DriftGate records it).
    accept_drift: bool = False
    # CSV files of what the model was asked at serving time (raw columns, no label; e.g. an
    # export of the endpoint's request log), matched by data_pattern: DriftGate checks them
    # against the contract's SERVING environment and measures the training data's skew.
    serving_data_root: str | None = None
    # 1: Beam runs in-process (fastest on small data); >1: that many worker processes.
    beam_workers: int = 1
    # With beam_workers > 1, the workers are the run's pool of processes, shared by every
    # Beam component (runtime/beam_pool.py); False: Beam's own, started by each component
    # (what switching the speedups off chooses, runtime/speedups).
    beam_pool: bool = True
    # Transform's own statistics (TFX's default): pre-transform statistics of the train
    # split (StatisticsGen's already cover it) and post-transform statistics and anomalies.
    # For the latter TFX holds every transformed row in memory until all are written, so
    # they cost time and memory that grow with the data (docs/performance.md). Off by
    # default; on, Transform runs in-process rather than hold them beside several workers.
    transform_statistics: bool = False
    # Transform traces preprocessing_fn once as a TF1 graph (TFT's force_tf_compat_v1)
    # instead of TF2 tf.functions, which it traces five times: the same transformed values
    # (faster when TF2 traced it nine times, docs/performance.md), but a TF1 graph serves
    # only through ``TFTransformOutput.transform_features_layer()`` in TF2 code (``transform_raw_features``
    # fails eagerly), and preprocessing_fn may not use TF2-only APIs (TF2 SavedModels,
    # Keras preprocessing layers). Off by default: TFX's and TFT's default is TF2.
    transform_tf1_graph: bool = False
    extra_beam_args: tuple[str, ...] = ()
    enable_cache: bool = False
    # Evaluator gates: an absolute floor, and "no worse than the last blessed model"
    # (by at most this much AUC, the run-to-run noise of training).
    min_eval_auc: float = 0.90
    max_auc_regression: float = 0.002
    hparams: HParams = dataclasses.field(default_factory=HParams)
    # Search the hyperparameters with TFX's Tuner before training (None: train with hparams).
    tuning: Tuning | None = None
    # Deploy blessed models to a Vertex AI endpoint (cloud runs only).
    vertex_endpoint: VertexEndpoint | None = None
    # Train on Vertex AI Training (GPU machine, several workers, TPU VM); cloud runs only.
    vertex_training: VertexTraining | None = None

    def __post_init__(self) -> None:
        if not PIPELINE_NAME_PATTERN.fullmatch(self.pipeline_name):
            raise ValueError(
                f"pipeline_name {self.pipeline_name!r} must match [a-z0-9][a-z0-9-]{{0,127}} "
                "(lower-case letters, digits, dashes), as Vertex AI Pipelines requires."
            )
        for name in ("train_buckets", "eval_buckets", "train_steps", "beam_workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.eval_steps is not None and self.eval_steps < 1:
            raise ValueError(f"eval_steps must be at least 1 or None, got {self.eval_steps}")
        if not 0.0 <= self.min_eval_auc <= 1.0:
            raise ValueError(f"min_eval_auc must be in [0, 1], got {self.min_eval_auc}")
        if self.max_auc_regression < 0:
            raise ValueError(f"max_auc_regression must be >= 0, got {self.max_auc_regression}")

    @property
    def pipeline_root(self) -> str:
        return os.path.join(self.output_root, "pipelines", self.pipeline_name)

    @property
    def metadata_path(self) -> str:
        return os.path.join(self.output_root, "metadata", self.pipeline_name, "metadata.db")

    @property
    def serving_model_dir(self) -> str:
        return os.path.join(self.output_root, "serving_model", self.pipeline_name)

    @property
    def beam_pipeline_args(self) -> list[str]:
        """DirectRunner settings for local runs; given a --runner (Dataflow), only the extra
        args (see ``runtime.beam_args``)."""
        return beam_args.pipeline_args(self.beam_workers, self.extra_beam_args, pool=self.beam_pool)

    def component_beam_args(self, component_id: str) -> list[str]:
        """Beam args for one component, added after the pipeline's (in Beam the last flag
        wins): in-process for a Transform computing statistics when the DirectRunner would
        start worker processes (see ``transform_statistics``); nothing otherwise, and
        nothing on another runner."""
        if (
            component_id == "Transform"
            and self.transform_statistics
            and self.beam_workers > 1
            and beam_args.runner(self.extra_beam_args) is None
        ):
            return list(beam_args.IN_PROCESS_ARGS)
        return []
