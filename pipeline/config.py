"""One typed configuration for the pipeline, with defaults that run offline.

Runners build a ``PipelineConfig`` (from flags) and hand it to ``create_pipeline``;
every derived location comes from here so the runners and the run summary agree.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import re
import sys
from pathlib import Path
from typing import Sequence

from models.hparams import HParams
from pipeline.vertex_training import VertexTraining

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA_ROOT = str(REPO_ROOT / "data")
DEFAULT_OUTPUT_ROOT = str(REPO_ROOT / "outputs")
# The Vertex compiler accepts only these names; local runs keep to it so the same
# configuration compiles everywhere.
PIPELINE_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")

IN_PROCESS_BEAM_ARGS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")
# Unless a Beam dependency flag is set, every TFX Beam executor (ExampleGen, StatisticsGen,
# Transform, Evaluator) copies the whole installed TFX into a new /tmp directory and builds
# an sdist of it for remote workers to install: 3.5 s and 52 MB each, on every run, never
# removed. The DirectRunner's workers are this machine's Python and never read it. Naming
# the Beam SDK container image, which only container-based runners use, tells TFX so.
DIRECT_RUNNER_NO_STAGING_ARG = (
    f"--sdk_container_image=apache/beam_python{sys.version_info.major}.{sys.version_info.minor}_sdk:"
    f"{importlib.metadata.version('apache-beam')}"
)

PREPROCESSING_FN = "models.preprocessing.preprocessing_fn"
RUN_FN = "models.trainer.run_fn"
# The Evaluator's user code (TFX looks up custom_extractors in it).
EVALUATOR_MODULE = "models.evaluation"
# Vertex AI's prebuilt TensorFlow serving image (the newest the aiplatform client lists).
DEFAULT_SERVING_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


def beam_runner(beam_pipeline_args: Sequence[str]) -> str | None:
    """The runner ``beam_pipeline_args`` ask for (``--runner=X`` or ``--runner X``; the
    last one wins, as in Beam), or None."""
    runner = None
    for i, arg in enumerate(beam_pipeline_args):
        if arg.startswith("--runner="):
            runner = arg.split("=", 1)[1]
        elif arg == "--runner" and i + 1 < len(beam_pipeline_args):
            runner = beam_pipeline_args[i + 1]
    return runner


def usable_cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's CPU count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
    # whole eval split. Capped, it stays cheap on large data (at 1.5M rows a full pass
    # after each of 4 epochs is 7,800 batches).
    eval_steps: int | None = 100
    # A curated schema (schema.pbtxt) to validate against; None infers one with SchemaGen.
    schema_path: str | None = None
    # 1: Beam runs in-process (fastest on small data); >1: that many worker processes.
    beam_workers: int = 1
    # Transform's own statistics (TFX's default): pre-transform statistics of the train
    # split (StatisticsGen's already cover it) and post-transform statistics and anomalies.
    # For the latter TFX holds every transformed row in memory until all are written.
    # Measured alone at 1.5M rows with two Beam workers: 213 s and 5.5 GB with them,
    # 140 s and 3.4 GB without. Off by default; on, Transform runs in-process (238 s,
    # 2.5 GB) rather than hold them beside two workers.
    transform_statistics: bool = False
    extra_beam_args: tuple[str, ...] = ()
    enable_cache: bool = False
    # Evaluator gates: an absolute floor, and "no worse than the last blessed model"
    # (by at most this much AUC, the run-to-run noise of training).
    min_eval_auc: float = 0.90
    max_auc_regression: float = 0.002
    hparams: HParams = dataclasses.field(default_factory=HParams)
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
        """DirectRunner settings for local runs; given a --runner (Dataflow), only the extra args
        (TFX then packages itself for the remote workers, as they need)."""
        if beam_runner(self.extra_beam_args) is not None:
            return list(self.extra_beam_args)
        if self.beam_workers == 1:
            mode = list(IN_PROCESS_BEAM_ARGS)
        else:
            mode = ["--direct_running_mode=multi_processing", f"--direct_num_workers={self.beam_workers}"]
        return mode + [DIRECT_RUNNER_NO_STAGING_ARG] + list(self.extra_beam_args)

    def component_beam_args(self, component_id: str) -> list[str]:
        """Beam args for one component, added after the pipeline's (in Beam the last flag
        wins): in-process for a Transform computing statistics when the DirectRunner would
        start worker processes (see ``transform_statistics``); nothing otherwise, and
        nothing on another runner."""
        if (component_id == "Transform" and self.transform_statistics and self.beam_workers > 1
                and beam_runner(self.extra_beam_args) is None):
            return list(IN_PROCESS_BEAM_ARGS)
        return []
