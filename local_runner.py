"""Runs the pipeline on this machine with LocalDagRunner, then prints a run summary.

python local_runner.py --help
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import os
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

from launch.flag_errors import SettingsError
from launch.flags import add_pipeline_flags, configured, default, pipeline_config_kwargs
from launch.flink import add_flink_flags, check_cluster, check_flink_flags, local_flink_args
from launch.local import metadata_config
from pipeline.config import PipelineConfig
from runs.local_run import LOG_DIR, AfterRun, after_run, say_problem, say_reused
from runs.run_lock import LockedError, hold_run_lock
from runtime import speedups, start
from runtime.beam_args import MULTI_PROCESS_MIN_MB, runs_locally, workers_for_data
from runtime.terminal import Terminal, say


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the TFX pipeline locally (LocalDagRunner) and print a summary.")
    _add_location_flags(parser)
    _add_local_rarely_needed_flags(add_pipeline_flags(parser))
    add_flink_flags(parser)
    _add_after_run_flags(parser)
    return parser.parse_args(argv)


def _add_location_flags(parser: argparse.ArgumentParser) -> None:
    """Where the data is read from and the outputs go."""
    parser.add_argument(
        "--data-root",
        default=None,
        help="Directory holding the CSV file(s) to train on, all sharing one header (default: the problem's folder).",
    )
    parser.add_argument(
        "--serving-data-root",
        default=None,
        help="Directory with CSV files of what the model was asked at serving time (raw columns, no "
        "label): checked against the contract's SERVING environment and for training/serving skew.",
    )
    parser.add_argument(
        "--output-root",
        default=default("output_root"),
        help="Where pipeline artifacts, ML Metadata and pushed models are written. (default: %(default)s)",
    )


def _add_local_rarely_needed_flags(group: Any) -> None:
    """How this machine runs Beam and the libraries, in the group of flags a user rarely needs."""
    group.add_argument(
        "--beam-workers",
        type=int,
        default=0,
        help="Beam DirectRunner workers: 1 runs in-process, N>1 uses N processes, 0 chooses by "
        f"data size (one per core from {MULTI_PROCESS_MIN_MB} MB of CSV, else 1).",
    )
    group.add_argument(
        "--list-speedups",
        action="store_true",
        help="Print every speedup (what it replaces, the library version it was written against) and exit.",
    )


def _add_after_run_flags(parser: argparse.ArgumentParser) -> None:
    """What the terminal shows, and what follows a run: pruning, the report."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Show every log line of TFX, Beam and TensorFlow on the terminal (default: each component's "
        "progress and the summary; the rest goes to the run's log file, named under the summary).",
    )
    parser.add_argument(
        "--keep-runs",
        type=int,
        default=None,
        help="After a successful run, prune older runs' artifacts, keeping this many latest runs, the champion "
        "and every pushed model (runs/prune.py; default: keep everything).",
    )
    parser.add_argument(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Write the run report (outputs/report/<pipeline>/<run>/index.html) after the summary. "
        "(default: %(default)s)",
    )


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    """The configuration the flags ask for; raises ``ValueError`` naming a wrong flag, spec or
    a missing contract."""
    if args.beam_workers < 0:
        raise SettingsError(f"--beam-workers must be 0 (choose by data size) or more, got {args.beam_workers}")
    if args.keep_runs is not None and args.keep_runs < 1:
        raise SettingsError(f"--keep-runs must be at least 1 (the run just made), got {args.keep_runs}")
    check_flink_flags(args)
    kwargs = pipeline_config_kwargs(args)
    data_root = os.path.abspath(args.data_root or kwargs["problem"].data_root)
    _check_local_paths(args, data_root)
    return configured(
        lambda: PipelineConfig(
            data_root=data_root,
            output_root=os.path.abspath(args.output_root),
            schema_path=os.path.abspath(args.schema_path) if args.schema_path else None,
            serving_data_root=os.path.abspath(args.serving_data_root) if args.serving_data_root else None,
            beam_workers=_beam_workers(args, data_root),
            extra_beam_args=local_flink_args(args),
            **kwargs,
        )
    )


def _beam_workers(args: argparse.Namespace, data_root: str) -> int:
    """DirectRunner workers: as asked, or by data size; none with another runner."""
    if args.flink_master:
        return 1
    return args.beam_workers or workers_for_data(data_root, args.data_pattern)


def _check_local_paths(args: argparse.Namespace, data_root: str) -> None:
    """The folders and the contract a local run reads exist (a gs:// path is the cloud's to check)."""
    for flag, path, exists, kind in (
        ("--data-root", data_root, os.path.isdir, "a directory"),
        ("--serving-data-root", args.serving_data_root, os.path.isdir, "a directory"),
        ("--schema-path", args.schema_path, os.path.isfile, "a file"),
    ):
        if path and not path.startswith("gs://") and not exists(path):
            raise SettingsError(f"{flag} {path}: there is no such {kind.split()[-1]}; give {kind} that exists")


def run(config: PipelineConfig) -> None:
    """Runs the pipeline; raises what the failing component raised."""
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline.pipeline import create_pipeline
    from runs.local_run import champion_always_runs

    class Runner(LocalDagRunner):
        def run_with_ir(self, pipeline, run_options=None, **kwargs):
            return super().run_with_ir(champion_always_runs(pipeline), run_options, **kwargs)

    start.before_pickles(pickles_stay_here=runs_locally(config.beam_pipeline_args))
    start.after_imports()
    Runner().run(create_pipeline(config, metadata_config(config)))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list_speedups:
        print(speedups.describe())
        return 0
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_dir = os.path.join(os.path.abspath(args.output_root), LOG_DIR)
    with Terminal(os.path.join(log_dir, f"run-{stamp}.log"), verbose=args.verbose) as terminal:
        # Google client libraries warn at import about future Python/grpc/storage support; noise here.
        warnings.filterwarnings("ignore", category=FutureWarning)
        if args.speedups:
            speedups.switch_on()
        else:
            speedups.switch_off()
            say(f"Speedups off ({speedups.ENV_VAR}=0): every library runs as shipped.")
        try:
            config = config_from_args(args)
            check_cluster(args, importlib.metadata.version("apache-beam"))
        except ValueError as err:
            say(f"error: {err}", err=True)
            return 2
        terminal.move_log(os.path.join(log_dir, config.pipeline_name, f"run-{stamp}.log"))
        return _run_locked(config, args, terminal)


def _run_locked(config: PipelineConfig, args: argparse.Namespace, terminal: Terminal) -> int:
    """The run, one at a time per pipeline and output root; the exit code."""
    say_problem(config)
    try:
        lock = hold_run_lock(config)
    except LockedError as err:
        say(f"error: {err}", err=True)
        return 3
    with lock:
        if say_reused(config, args.report):
            return 0
        return _run_and_summarize(config, args, terminal)


def _run_and_summarize(config: PipelineConfig, args: argparse.Namespace, terminal: Terminal) -> int:
    """Runs the pipeline with TFX, then what follows it (``runs.local_run``); the exit code."""
    start.before_imports()
    with start.heavy_imports():
        from tfx.orchestration.local.local_dag_runner import LocalDagRunner  # noqa: F401 - imported for run()

        from pipeline.pipeline import create_pipeline  # noqa: F401 - imported for run()

        # What after_run() imports, here before the handlers are set again.
        from report import history, run_summary, write  # noqa: F401
        from runs import unchanged  # noqa: F401

        terminal.keep_handlers()
    unchanged.forget(config)
    failure = None
    try:
        run(config)
    except Exception as err:  # noqa: BLE001 - reported by after_run with the summary, exit code 1
        failure = err
        terminal.fail_running()
    code = after_run(config, failure, AfterRun(args.report, args.keep_runs, args.verbose))
    terminal.say_log()
    return code


if __name__ == "__main__":
    exit_code = main()
    # Python's last garbage collection at exit walks every object TensorFlow, Beam and TFX
    # created, seconds of work only to free memory the process is about to return anyway.
    # Frozen objects are skipped by it; atexit handlers and stream flushing still run.
    if speedups.enabled():
        gc.freeze()
    sys.exit(exit_code)
