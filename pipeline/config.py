"""One typed configuration for the pipeline, with defaults that run offline.

Runners build a ``PipelineConfig`` (from flags) and hand it to ``create_pipeline``;
every derived location comes from here so the runners and the run summary agree.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from components import spans
from models import problem as problem_lib
from models.hparams import HParams
from models.problem import Blessing, ModelFamily, Problem
from pipeline.field_error import FieldError
from pipeline.kubeflow_training import TfJob
from pipeline.vertex_training import VertexTraining
from runtime import beam_args

REPO_ROOT = Path(__file__).resolve().parent.parent
# The example problem: its spec, contract and data (data/taxi/problem.toml).
DEFAULT_PROBLEM_DIR = str(REPO_ROOT / "data" / "taxi")
DEFAULT_OUTPUT_ROOT = str(REPO_ROOT / "outputs")
# The Vertex compiler accepts only these names; local runs keep to it so the same
# configuration compiles everywhere.
PIPELINE_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")

# The data contract's file name: a curated schema in the problem's folder.
CONTRACT_FILE = problem_lib.CONTRACT_FILE

PREPROCESSING_FN = "models.preprocessing.preprocessing_fn"
RUN_FN = "models.trainer.run_fn"
TUNER_FN = "models.tuning.tuner_fn"
# The Evaluator's user code (TFX looks up custom_extractors in it).
EVALUATOR_MODULE = "models.evaluation"
# Vertex AI's prebuilt TensorFlow serving image (the newest the aiplatform client lists).
DEFAULT_SERVING_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


@dataclasses.dataclass(frozen=True)
class VertexEndpoint:
    """Where the Pusher puts a blessed model on Vertex AI, instead of a directory: a new
    version of the pipeline's registry model, deployed to ``endpoint_name`` (all of its
    traffic, or ``canary_percent`` of it beside the champion), or, without an endpoint,
    only registered (``components/registry.py``)."""

    project: str
    region: str
    endpoint_name: str | None
    machine_type: str = "n1-standard-2"
    serving_image: str = DEFAULT_SERVING_IMAGE
    canary_percent: int = 0
    # Upload each version with an explanation spec for Vertex Explainable AI (components/explanation.py).
    explanations: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.canary_percent < 100:
            raise FieldError("canary_percent", f"must be between 1 and 99 (0: no canary), got {self.canary_percent}")
        if self.canary_percent and not self.endpoint_name:
            raise FieldError(
                "canary_percent",
                "needs an endpoint (--endpoint-name): a traffic split exists on an endpoint only (a local serving "
                "directory serves its newest version; see docs/release.md)",
            )
        for name in ("project", "region"):
            if not getattr(self, name):
                raise FieldError(name, "is required for a Vertex AI endpoint or registry model")


@dataclasses.dataclass(frozen=True)
class Tuning:
    """A Tuner before the Trainer (``models/tuning.py``): ``trials`` models trained, the best
    one's hyperparameters handed on. On Vertex AI Training, ``parallel_trials`` run at once."""

    trials: int = 8
    parallel_trials: int = 1

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise FieldError("trials", f"must be at least 1 (the tuning budget), got {self.trials}")
        if not 1 <= self.parallel_trials <= self.trials:
            raise FieldError(
                "parallel_trials", f"must be between 1 and the {self.trials} trial(s), got {self.parallel_trials}"
            )


class ContractError(ValueError):
    """The problem has no data contract, and inferring one was not asked for."""


def default_problem() -> Problem:
    return problem_lib.load(DEFAULT_PROBLEM_DIR)


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Everything that shapes a run. Paths may be local or gs://. Unset, the pipeline's
    name, the data and the contract are the problem's."""

    # What is predicted from which columns (models/problem.py); the taxi example by default.
    problem: Problem = dataclasses.field(default_factory=default_problem)
    pipeline_name: str | None = None
    data_root: str | None = None
    # Which files under data_root are data (data/ also holds a README). With a span spec
    # (``span-{SPAN}/*.csv``, ``{YYYY}-{MM}-{DD}/*.csv``) the data arrives as spans: each run
    # ingests the newest span, or ``span``, as TFX's ExampleGen does (components/spans.py).
    data_pattern: str = "*.csv"
    span: int | None = None
    # With spans: the Trainer learns from this many newest spans (a rolling window), the
    # Evaluator judges on the newest span's eval rows. 4 (twelve months of quarterly spans):
    # measured in docs/spans.md ("Spans and the rolling window").
    window_spans: int = 4
    # Start training from the champion's weights where the shapes allow
    # (models/warm_start.py). None: on when the data arrives as spans (each run has new
    # data); off otherwise, where a rerun would retrain on the same data after each blessing.
    warm_start: bool | None = None
    output_root: str = DEFAULT_OUTPUT_ROOT
    # Train:eval split by hash of each row, in hash buckets.
    train_buckets: int = 2
    eval_buckets: int = 1
    # Training steps of one global batch; None: a budget from the training split's size, within
    # which training stops once the validation metric stops improving (models/budget.py).
    train_steps: int | None = None
    # Batches of the Trainer's validation after each epoch (None: the whole eval split).
    # It only feeds the training logs (TensorBoard); the Evaluator judges the model on the
    # whole eval split. Capped, it stays cheap however large the data grows.
    eval_steps: int | None = 100
    # The data contract (a curated schema.pbtxt) to validate against; None: the problem's.
    schema_path: str | None = None
    # Infer the schema from the data with SchemaGen instead of checking a contract: only what
    # differs from the very data it is inferred from is caught (the summary says so).
    infer_schema: bool = False
    # Train on data that drifted beyond the contract's thresholds (DriftGate records it).
    accept_drift: bool = False
    # CSV files of what the model was asked at serving time (raw columns, no label; e.g. an
    # export of the endpoint's request log), matched by data_pattern: DriftGate checks them
    # against the contract's SERVING environment and measures the training data's skew.
    serving_data_root: str | None = None
    # 1: Beam runs in-process (fastest on small data); >1: that many worker processes.
    beam_workers: int = 1
    # The project's speedups in its components (runtime/speedups): each gets it as its
    # ``speedups`` parameter, so the compiled job and the cache key record it. False: every
    # library as shipped (TFX's CSV executor, StatisticsGen, Transform; TFMA's metrics).
    speedups: bool = True
    # Transform's own pre- and post-transform statistics and anomalies (TFX's default): they
    # hold every transformed row in memory, so they are off here; on, Transform runs
    # in-process (docs/pipeline.md).
    transform_statistics: bool = False
    # Transform traces preprocessing_fn once as a TF1 graph (TFT's force_tf_compat_v1): the
    # same values, faster when TF2 traces it many times, but no TF2-only APIs in
    # preprocessing_fn (docs/performance-techniques.md). Off: TFX's and TFT's default is TF2.
    transform_tf1_graph: bool = False
    extra_beam_args: tuple[str, ...] = ()
    enable_cache: bool = False
    # Whether the orchestrator runs TFX's ExampleGen driver before its executor (the local
    # runner and Vertex AI do). The open-source Kubeflow Pipelines backend does not: there
    # ExampleGen resolves the span itself, with TFX's driver code, and runs on every run,
    # since no data fingerprint enters its cache key (docs/kubeflow.md).
    example_gen_driver: bool = True
    # Evaluator gates, when not the problem's (its [evaluation] table): the blessing metric's
    # floor (a ceiling for an error metric), and how much worse than the champion
    # a candidate may be (the run-to-run noise of training).
    blessing_threshold: float | None = None
    max_regression: float | None = None
    hparams: HParams = dataclasses.field(default_factory=HParams)
    # Search the hyperparameters with TFX's Tuner before training (None: train with hparams).
    tuning: Tuning | None = None
    # Deploy blessed models to a Vertex AI endpoint (cloud runs only).
    vertex_endpoint: VertexEndpoint | None = None
    # Train on Vertex AI Training (GPU machine, several workers, TPU VM); cloud runs only.
    vertex_training: VertexTraining | None = None
    # Train in a TFJob on the Kubeflow cluster the job runs on (pipeline/kubeflow_training.py).
    tfjob: TfJob | None = None

    def __post_init__(self) -> None:
        # Derived defaults, set once (the dataclass is frozen).
        if self.pipeline_name is None:
            object.__setattr__(self, "pipeline_name", self.problem.name)
        if self.data_root is None:
            if self.problem.data_root is None:
                raise FieldError("data_root", "is required for a problem not read from a folder")
            object.__setattr__(self, "data_root", self.problem.data_root)
        if self.schema_path is None and not self.infer_schema:
            contract = self.problem.contract_path
            if contract is None or not os.path.isfile(contract):
                raise ContractError(
                    f"The problem '{self.problem.name}' has no data contract"
                    + (f" ({contract})" if contract else "")
                    + ": draft one with `python -m authoring.contract --problem DIR`, review it and save it as "
                    f"{CONTRACT_FILE} in the problem's folder; or run with --infer-schema to check the data only "
                    "against a schema inferred from itself."
                )
            object.__setattr__(self, "schema_path", contract)
        if self.infer_schema:
            object.__setattr__(self, "schema_path", None)
        if not PIPELINE_NAME_PATTERN.fullmatch(self.pipeline_name):
            raise FieldError(
                "pipeline_name",
                f"{self.pipeline_name!r} must match [a-z0-9][a-z0-9-]{{0,127}} "
                "(lower-case letters, digits, dashes), as Vertex AI Pipelines requires.",
            )
        if self.warm_start is None:
            object.__setattr__(self, "warm_start", self.has_spans)
        if self.span is not None and not self.has_spans:
            raise FieldError(
                "span",
                f"{self.span} was given but the data pattern {self.data_pattern!r} names no spans: "
                "use a pattern with {SPAN} or {YYYY}{MM}{DD}, e.g. 'span-{SPAN}/*.csv'.",
            )
        for name in ("train_buckets", "eval_buckets", "beam_workers", "window_spans"):
            if getattr(self, name) < 1:
                raise FieldError(name, f"must be at least 1, got {getattr(self, name)}")
        if self.train_steps is not None and self.train_steps < 1:
            raise FieldError(
                "train_steps", f"must be at least 1 or None (a budget from the data), got {self.train_steps}"
            )
        if self.eval_steps is not None and self.eval_steps < 1:
            raise FieldError("eval_steps", f"must be at least 1 or None, got {self.eval_steps}")
        if self.tuning is not None and self.problem.model == ModelFamily.TREES:
            raise FieldError(
                "tuning",
                f"searches the network's hyperparameters, and problem '{self.problem.name}' trains trees "
                '([model] family = "trees" in its problem.toml), grown with TF-DF\'s defaults: drop --tune, or '
                "remove the [model] table to train and tune the network.",
            )
        if self.span is not None and self.span < 0:
            raise FieldError("span", f"must be 0 or more (a span number, or days since 1970-01-01), got {self.span}")
        # The problem's own checks apply to the blessing with the overrides.
        try:
            dataclasses.replace(self.problem, blessing=self.blessing)
        except problem_lib.ProblemError as err:
            if self.blessing_threshold is None and self.max_regression is None:
                raise
            field = "blessing_threshold" if self.blessing_threshold is not None else "max_regression"
            raise FieldError(field, f"{getattr(self, field)}: {err}") from None

    def for_problem(self, problem: Problem, **changes) -> PipelineConfig:
        """This configuration for another problem: its name, data and contract are the new
        problem's unless ``changes`` say otherwise (``dataclasses.replace`` would keep the
        old problem's, filled in when this one was made)."""
        derived = {"pipeline_name": None, "data_root": None, "schema_path": None}
        return dataclasses.replace(self, problem=problem, **{**derived, **changes})

    @property
    def blessing(self) -> Blessing:
        """The problem's blessing, with this configuration's threshold and tolerance if set."""
        given = self.problem.blessing
        return Blessing(
            metric=given.metric,
            threshold=given.threshold if self.blessing_threshold is None else self.blessing_threshold,
            max_regression=given.max_regression if self.max_regression is None else self.max_regression,
        )

    @property
    def has_spans(self) -> bool:
        """The data arrives as spans (the data pattern has a span or date spec)."""
        return spans.has_spans(self.data_pattern)

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
    def beam_pool(self) -> bool:
        """With beam_workers > 1, whether the workers are the run's pool of processes, shared
        by every Beam component (runtime/beam_pool.py): with the speedups; without, Beam's own,
        started by each component."""
        return self.speedups

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
