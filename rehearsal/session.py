"""One rehearsal as ``--rehearse`` asks for it: the data uploaded to the stand-in Cloud Storage,
the compiled job executed here (``runner.py``), then what the user reads: its summary, run report
and the pushed model's answer to a Vertex-style request.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import os
from typing import TYPE_CHECKING

from rehearsal.serving import SERVING_TF_VERSION
from runtime.terminal import say

# The rehearsal's heavy imports (its store, the run report, TensorFlow) wait inside the functions:
# kubeflow_runner.py imports this module for its flags, and --help stays fast.
if TYPE_CHECKING:
    from pipeline.config import PipelineConfig
    from rehearsal.runner import Rehearsal, Settings, TaskRun
    from report.history import Entry
    from report.run_summary import RunSummary


@dataclasses.dataclass(frozen=True)
class RehearsalOptions:
    """What a rehearsal needs besides the job file and the pipeline's configuration."""

    # Holds the stand-in Cloud Storage's objects (<root>/gcs/<bucket>/), the metadata store,
    # the stand-ins' files, the task logs and the run report.
    root: str
    # gs://BUCKET/PREFIX=PATH pairs: PATH (a folder or a file) is uploaded there first.
    gcs_mappings: tuple[str, ...]
    # Python of the TensorFlow environment the pushed or deployed model is served with.
    serving_python: str
    # Stand-ins in artifact names and URIs (None: "rehearsal" and "local").
    project: str | None = None
    region: str | None = None
    # None: each task's compiled caching option; True/False: for every task.
    enable_caching: bool | None = None
    # Write the run report under root/report/.
    report: bool = True
    # Execute as Vertex AI Pipelines ("vertex") or the open-source Kubeflow backend ("kubeflow").
    backend: str = "vertex"


def add_rehearsal_flags(parser: argparse.ArgumentParser, root: str, serving_python: str) -> None:
    """The --rehearse flags; ``root`` and ``serving_python`` are the defaults, the runner's choice."""
    rehearsal = parser.add_argument_group(
        "rehearsal: run the compiled job on this machine as Vertex AI or open-source Kubeflow would"
    )
    rehearsal.add_argument(
        "--rehearse",
        action="store_true",
        help="Execute the compiled job here, task by task as Vertex AI Pipelines does, instead of submitting it.",
    )
    rehearsal.add_argument(
        "--rehearse-as",
        choices=("vertex", "kubeflow"),
        default="vertex",
        help="Execute the job as Vertex AI Pipelines does, or as the open-source Kubeflow Pipelines backend "
        "(--kfp-host's job: no driver hooks, no resolvers, its placeholders and output layout). (default: %(default)s)",
    )
    rehearsal.add_argument(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Write the rehearsal's run report under --rehearsal-root (report/<pipeline>/<job>/index.html). "
        "(default: %(default)s)",
    )
    rehearsal.add_argument(
        "--rehearsal-root",
        default=root,
        help="Where the rehearsal keeps its stand-in Cloud Storage, metadata store, staged image, stand-ins' "
        "files and task logs (one rehearsal at a time). (default: %(default)s)",
    )
    rehearsal.add_argument(
        "--rehearse-gcs",
        action="append",
        default=[],
        metavar="gs://BUCKET/PREFIX=PATH",
        help="Upload a local folder or file to this gs:// prefix of the stand-in Cloud Storage before the "
        "job runs (repeatable); gs://BUCKET/NAME lives in <rehearsal-root>/gcs/BUCKET/NAME.",
    )
    rehearsal.add_argument(
        "--serving-python",
        default=serving_python,
        help="Python of a TensorFlow 2.15 environment (Vertex's tf2-cpu.2-15) that serves an --endpoint-name "
        "deployment and answers a request with the pushed model at the end of the rehearsal (make serving-env "
        "installs it). (default: %(default)s)",
    )


def rehearsal_options(args: argparse.Namespace) -> RehearsalOptions:
    """What --rehearse needs from the flags (the tasks run in --image, built here: make image)."""
    return RehearsalOptions(
        root=args.rehearsal_root,
        gcs_mappings=tuple(args.rehearse_gcs),
        serving_python=args.serving_python,
        project=args.project,
        region=args.region,
        enable_caching=args.enable_cache,
        report=args.report,
        backend=args.rehearse_as,
    )


def rehearse_compiled_job(options: RehearsalOptions, config: PipelineConfig, job_file: str) -> int:
    """Runs the compiled job here as Vertex would and prints its outcome. The command's exit code:
    0 when everything passed, 1 when a task or the served model failed, 2 when the settings or the
    job cannot be rehearsed, or another rehearsal holds the root."""
    from rehearsal.job import CompiledJob, GcsFolder, JobError
    from rehearsal.runner import Settings, refuse_unrehearsable
    from runs.run_lock import LockedError, hold_lock

    try:
        settings = Settings(
            root=os.path.abspath(options.root),
            gcs=GcsFolder.parse(os.path.join(options.root, "gcs"), options.gcs_mappings),
            project=options.project or "rehearsal",
            region=options.region or "local",
            enable_caching=options.enable_caching,
            serving_python=options.serving_python,
            backend=options.backend,
        )
        refuse_unrehearsable(CompiledJob.load(job_file), settings.serving_python, settings.backend)
        lock = hold_lock(
            os.path.join(settings.root, "rehearsal.lock"),
            f"rehearsing in {settings.root}",
            "wait for it to finish, or give this one another --rehearsal-root",
        )
    except (JobError, LockedError) as err:
        say(f"error: {err}", err=True)
        return 2
    with lock:
        return _rehearse_holding_the_root(options, settings, config, job_file)


def _rehearse_holding_the_root(
    options: RehearsalOptions, settings: Settings, config: PipelineConfig, job_file: str
) -> int:
    from rehearsal.job import JobError
    from rehearsal.runner import rehearse as run_rehearsal

    try:
        data_files = _upload_data(settings, config)
        say(f"Rehearsing {job_file}: {config.output_root} is written to {settings.gcs.local(config.output_root)}")
        result = run_rehearsal(job_file, settings)
    except JobError as err:
        say(f"error: {err}", err=True)
        return 2
    summary, runs = _say_summary(result, settings, config)
    if options.report:
        _write_run_report(result, settings, config, summary, runs)
    if failed := result.failed:
        _say_failure(result, failed)
        return 1
    if summary.pushed_to:
        pushed = result.local(result.task("Pusher").outputs["pushed_model"][0]["uri"])
        transform_graph = result.local(result.task("Transform").outputs["transform_graph"][0]["uri"])
        return rehearse_serving(options.serving_python, pushed, transform_graph, data_files[0], config.problem)
    return 0


def _upload_data(settings: Settings, config: PipelineConfig) -> list[str]:
    """The --rehearse-gcs uploads done and said; the data files they put under --data-root."""
    from components import spans
    from rehearsal.job import JobError

    settings.gcs.upload()
    local_data = settings.gcs.local(config.data_root)
    data_files = sorted(glob.glob(os.path.join(local_data, spans.any_span(config.data_pattern))))
    if not data_files:
        raise JobError(
            f"the rehearsal reads --data-root {config.data_root} from the stand-in Cloud Storage, whose "
            f"{local_data} holds no {config.data_pattern}: upload the data there with "
            f"--rehearse-gcs {config.data_root}=DIR"
        )
    for prefix, local in settings.gcs.uploads:
        say(f"Uploaded {local} to {prefix} (the stand-in Cloud Storage, {settings.gcs.local(prefix)})")
    return data_files


def _say_summary(result: Rehearsal, settings: Settings, config: PipelineConfig) -> tuple[RunSummary, list[Entry]]:
    """The run's summary, its place in the pipeline's history and what the stand-ins were asked."""
    import tensorflow as tf

    from rehearsal.summary import describe_stand_ins, summarize
    from report import history
    from report.run_summary import NO_CONTRACT, format_summary

    tf.get_logger().setLevel("ERROR")  # TFMA's deprecation notices while reading the evaluation
    summary = summarize(result)
    say("\n" + format_summary(summary, config.blessing, config.schema_path or NO_CONTRACT))
    # Beside the job's outputs, as a local run keeps it beside its own (report/history.py).
    stopped = result.failed.name if result.failed else None
    output_root = settings.gcs.local(config.output_root)
    runs = history.record(output_root, config.pipeline_name, summary, config.blessing.metric, stopped)
    say(history.format_recent(runs))
    for line in describe_stand_ins(result):
        say(line)
    say(f"Task logs: {result.logs_dir}")
    return summary, runs


def _write_run_report(
    result: Rehearsal, settings: Settings, config: PipelineConfig, summary: RunSummary, runs: list[Entry]
) -> None:
    """The run report under the rehearsal's root; a report that fails says so and nothing more."""
    from report.write import write_report

    try:
        failed = result.failed
        why = f"task {failed.name} exited with code {failed.exit_code}" if failed else None
        log = failed.log if failed else None
        written = write_report(summary, config, root=settings.root, history=runs, failure=why, failure_log=log)
        say(f"Run report: {written}")
    except Exception as err:  # noqa: BLE001 - the report must never hide the rehearsal's own outcome
        say(f"(no run report: {type(err).__name__}: {err})")


def _say_failure(result: Rehearsal, failed: TaskRun) -> None:
    from rehearsal.logs import log_tail

    say(
        f"\nThe rehearsal FAILED at task {failed.name} (exit code {failed.exit_code}); nothing downstream ran. "
        f"Last lines of its log ({failed.log}):\n{log_tail(failed.log)}",
        err=True,
    )
    if hint := _lost_files_hint(result, failed):
        say(hint, err=True)


def _lost_files_hint(result: Rehearsal, failed: TaskRun) -> str | None:
    """When the failing task's log names a file an earlier task wrote outside gs://, why it is gone."""
    from rehearsal.logs import log_tail

    tail = log_tail(failed.log)
    lost = [
        (task.name, path)
        for task in result.tasks[: result.tasks.index(failed)]
        for path in task.left_behind
        if os.path.basename(path) in tail
    ]
    if not lost:
        return None
    named = ", ".join(f"{path} (by {name})" for name, path in lost[:5])
    return (
        f"Its log names files earlier tasks wrote outside gs://: {named}. On Vertex each task runs in a fresh "
        "container and only Cloud Storage outlives it: write what later tasks need to an output artifact."
    )


def rehearse_serving(serving_python: str, pushed_to: str, transform_graph: str, data_file: str, problem) -> int:
    """The pushed model answers a Vertex-style request built from the first data rows."""
    from rehearsal.serving import ServingError, check_served_model

    if not os.path.exists(serving_python):
        say(
            f"Served model: NOT rehearsed: no TensorFlow {SERVING_TF_VERSION} environment at {serving_python} "
            "(make serving-env installs one; --serving-python points elsewhere)."
        )
        return 0
    try:
        check = check_served_model(pushed_to, transform_graph, data_file, serving_python, problem)
    except ServingError as err:
        say(f"\nThe served model FAILED its rehearsal: {err}", err=True)
        return 1
    rows = len(check.request["instances"])
    say(
        f'Served model: answered {{"instances": [...{rows} CSV rows...]}} through serving_raw in TensorFlow '
        f"{check.tensorflow}, as serving_default does (largest difference {check.largest_difference:.1e})."
    )
    return 0
