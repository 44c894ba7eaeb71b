"""Command-line flags both runners share, their mapping onto ``PipelineConfig``, and the one
place a configuration's refusal becomes an error naming the flag the user typed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from launch.flag_errors import SettingsError
from models import problem as problem_lib
from models.hparams import HParams
from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR, PipelineConfig, Tuning
from pipeline.field_error import FieldError
from runtime import speedups

T = TypeVar("T")
# The flag that sets each field of the configuration (PipelineConfig and the settings it
# holds), so that a value the configuration refuses is named as the user typed it.
FLAG_OF_FIELD = {
    "pipeline_name": "--pipeline-name",
    "data_root": "--data-root",
    "span": "--span",
    "window_spans": "--window-spans",
    "train_steps": "--train-steps",
    "beam_workers": "--beam-workers",
    "tuning": "--tune",
    "blessing_threshold": "--blessing-threshold",
    "trials": "--tuning-trials",
    "parallel_trials": "--parallel-trials",
    "project": "--project",
    "region": "--region",
    "canary_percent": "--canary-percent",
    "image": "--image",
    "workers": "--tfjob-workers",
    "parameter_servers": "--tfjob-parameter-servers",
    "namespace": "--tfjob-namespace",
    "service_account": "--tfjob-service-account",
    "cpu": "--tfjob-cpu",
    "memory": "--tfjob-memory",
}


def configured(make: Callable[[], T]) -> T:
    """``make()``, the configuration from the flags; a value it refuses is a ``SettingsError``
    naming the flag that set it."""
    try:
        return make()
    except FieldError as err:
        raise SettingsError(f"{FLAG_OF_FIELD.get(err.field, err.field)} {err.problem}") from err


def default(field: str) -> Any:
    """``PipelineConfig``'s default for ``field``, read without making one (that reads a problem)."""
    return next(f.default for f in dataclasses.fields(PipelineConfig) if f.name == field)


def add_pipeline_flags(parser: argparse.ArgumentParser) -> Any:
    """Flags that shape the pipeline wherever it runs; returns the group of the flags a user
    rarely needs, for the runner to add its own to."""
    _add_data_flags(parser)
    _add_span_flags(parser)
    _add_training_flags(parser)
    _add_check_flags(parser)
    parser.add_argument(
        "--enable-cache",
        action=argparse.BooleanOptionalAction,
        default=default("enable_cache"),
        help="Reuse results of components whose inputs and code did not change. (default: %(default)s)",
    )
    rarely = parser.add_argument_group("rarely needed")
    rarely.add_argument(
        "--transform-statistics",
        action=argparse.BooleanOptionalAction,
        default=default("transform_statistics"),
        help="Have Transform compute pre- and post-transform statistics and anomalies (slower; more memory). "
        "(default: %(default)s)",
    )
    rarely.add_argument(
        "--transform-tf1-graph",
        action=argparse.BooleanOptionalAction,
        default=default("transform_tf1_graph"),
        help="Have Transform trace preprocessing_fn once as a TF1 graph instead of TF2 functions: same values, "
        "seconds faster; preprocessing_fn must then avoid TF2-only APIs (docs/pipeline.md). (default: %(default)s)",
    )
    rarely.add_argument(
        "--speedups",
        action=argparse.BooleanOptionalAction,
        default=speedups.enabled(),
        help="Run with the speedups that replace library internals (runtime/speedups; local_runner.py "
        f"--list-speedups lists them). --no-speedups runs every library as shipped, in the compiled job too "
        f"(locally also: {speedups.ENV_VAR}=0), "
        "to rule them out when a library misbehaves; outputs are the same. (default: %(default)s)",
    )
    return rarely


def _add_data_flags(parser: argparse.ArgumentParser) -> None:
    """The problem, its data and its name."""
    parser.add_argument(
        "--problem",
        default=DEFAULT_PROBLEM_DIR,
        help="The problem's folder: its spec (problem.toml), its data contract (schema.pbtxt) and its CSV "
        "data (default: the taxi example, data/taxi). python -m authoring.scaffold drafts one from a CSV.",
    )
    parser.add_argument(
        "--pipeline-name",
        default=None,
        help="Pipeline name ([a-z0-9][a-z0-9-]{0,127}, as Vertex requires); separates runs (default: the problem's "
        "name).",
    )
    parser.add_argument(
        "--data-pattern",
        default=default("data_pattern"),
        help="Glob, relative to --data-root, selecting the data files. (default: %(default)s)",
    )


def _add_span_flags(parser: argparse.ArgumentParser) -> None:
    """Data that arrives as spans."""
    group = parser.add_argument_group("data that arrives as spans (a {SPAN} or {YYYY}{MM}{DD} spec in --data-pattern)")
    group.add_argument(
        "--span",
        type=int,
        default=None,
        help="Ingest this span (TFX's static range_config) instead of the newest; days since 1970-01-01 for dates.",
    )
    group.add_argument(
        "--window-spans",
        type=int,
        default=default("window_spans"),
        help="The Trainer learns from this many newest spans (a rolling window); the Evaluator judges on the "
        "newest span. (default: %(default)s)",
    )
    group.add_argument(
        "--warm-start",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Start training from the champion's weights where shapes allow (default: on with spans).",
    )


def _add_training_flags(parser: argparse.ArgumentParser) -> None:
    """How the Trainer trains."""
    group = parser.add_argument_group("training")
    group.add_argument(
        "--train-steps",
        type=int,
        default=default("train_steps"),
        help="Total training steps, each of one global batch (default: a budget from the training split's size, "
        "stopping once the validation metric stops improving; models/budget.py).",
    )
    group.add_argument(
        "--epochs",
        type=int,
        default=HParams.epochs,
        help="Training steps are split into this many epochs (evaluation after each). (default: %(default)s)",
    )
    group.add_argument(
        "--batch-size",
        type=int,
        default=HParams.per_replica_batch_size,
        help="Per-replica batch size; the global batch is this times the replica count. (default: %(default)s)",
    )
    group.add_argument(
        "--hparam",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="Set one of the Trainer's hyperparameters (models/hparams.py; the value as JSON, else text), "
        "e.g. --hparam wide_numbers=false --hparam hidden_units=[128,64]; repeatable.",
    )
    group.add_argument(
        "--tune",
        action="store_true",
        help="Search the learning rate, hidden units, dropout and L2 with TFX's Tuner first; the Trainer "
        "takes the best (models/tuning.py).",
    )
    group.add_argument(
        "--tuning-trials",
        type=int,
        default=Tuning.trials,
        help="With --tune: models the search trains (each costs about one training). (default: %(default)s)",
    )


def _add_check_flags(parser: argparse.ArgumentParser) -> None:
    """The gates: the data contract, drift, the blessing."""
    group = parser.add_argument_group("the gates: data contract, drift, blessing")
    contract = group.add_mutually_exclusive_group()
    contract.add_argument(
        "--schema-path",
        default=None,
        help=f"The data contract (a curated schema.pbtxt) to validate the data against (default: the "
        f"problem's: {CONTRACT_FILE} in its folder for a local run, in --data-root for the compiled job).",
    )
    contract.add_argument(
        "--infer-schema",
        action="store_true",
        help="Opt out of the problem's contract: infer the schema from the data itself (catches little; for a "
        "first look at new data; the summary says so).",
    )
    group.add_argument(
        "--accept-drift",
        action="store_true",
        default=default("accept_drift"),
        help="Train on data that drifted beyond the contract's thresholds from the champion's data "
        "(the drift is recorded in the run summary).",
    )
    group.add_argument(
        "--blessing-threshold",
        type=float,
        default=None,
        help="Evaluator gate on the problem's blessing metric (a floor for AUC or accuracy, a ceiling for RMSE "
        "or MAE): a model on the wrong side of it is not blessed or pushed (default: the problem's).",
    )


def hparams_from_args(args: argparse.Namespace) -> HParams:
    """The defaults, with --epochs, --batch-size and every --hparam NAME=VALUE; a name or value
    ``HParams`` refuses is a ``SettingsError`` naming it."""
    try:
        hparams = HParams(epochs=args.epochs)
    except ValueError as err:
        raise SettingsError(f"--epochs {args.epochs}: {err}") from None
    try:
        hparams = dataclasses.replace(hparams, per_replica_batch_size=args.batch_size)
    except ValueError as err:
        raise SettingsError(f"--batch-size {args.batch_size}: {err}") from None
    if not args.hparam:
        return hparams
    values = hparams.to_custom_config()
    for item in args.hparam:
        name, given, text = item.partition("=")
        if not given or not name:
            raise SettingsError(f"--hparam {item!r}: give NAME=VALUE, e.g. --hparam wide_numbers=false")
        try:
            values[name] = json.loads(text)
        except json.JSONDecodeError:
            values[name] = text
    try:
        return HParams.from_custom_config(values)
    except (TypeError, ValueError) as err:
        raise SettingsError(f"--hparam {' --hparam '.join(args.hparam)}: {err}") from None


class _Only:
    """A parser that adds only the flags of the given destinations to ``target`` (its groups
    flattened): how another command takes some of the runners' flags as they are defined."""

    def __init__(self, target: argparse.ArgumentParser, names: Sequence[str]) -> None:
        self.target, self.names = target, set(names)

    def add_argument(self, *flags: str, **kwargs: Any) -> None:
        if kwargs.get("dest", flags[0].lstrip("-").replace("-", "_")) in self.names:
            self.target.add_argument(*flags, **kwargs)

    def add_argument_group(self, *args: Any, **kwargs: Any) -> _Only:
        return self

    def add_mutually_exclusive_group(self, **kwargs: Any) -> _Only:
        return self


def add_shared_flags(parser: argparse.ArgumentParser, names: Sequence[str]) -> None:
    """The runners' own flags of these names, for another command: same defaults and help."""
    add_pipeline_flags(_Only(parser, names))


def pipeline_config_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``PipelineConfig`` arguments from the shared flags (paths are the runner's business); a
    spec that cannot be used is a ``SettingsError`` naming --problem and the fix."""
    if not args.tune and args.tuning_trials != Tuning.trials:
        raise SettingsError(f"--tuning-trials {args.tuning_trials} sets the Tuner's budget: add --tune")
    try:
        problem = problem_lib.load(args.problem)
    except problem_lib.ProblemError as err:
        raise SettingsError(f"--problem {args.problem}: {err}") from None
    return dict(
        problem=problem,
        pipeline_name=args.pipeline_name,
        data_pattern=args.data_pattern,
        span=args.span,
        window_spans=args.window_spans,
        warm_start=args.warm_start,
        train_steps=args.train_steps,
        enable_cache=args.enable_cache,
        transform_statistics=args.transform_statistics,
        transform_tf1_graph=args.transform_tf1_graph,
        blessing_threshold=args.blessing_threshold,
        infer_schema=args.infer_schema,
        accept_drift=args.accept_drift,
        speedups=args.speedups,
        hparams=hparams_from_args(args),
        tuning=configured(lambda: Tuning(args.tuning_trials, getattr(args, "parallel_trials", 1)))
        if args.tune
        else None,
    )
