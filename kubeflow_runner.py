"""Command line: compile the pipeline for Kubeflow Pipelines v2 / Vertex AI Pipelines,
and optionally submit it.

    python kubeflow_runner.py --help

Flags become a ``PipelineConfig``; ``pipeline.compiler`` compiles the same
``create_pipeline(config)`` that ``local_runner.py`` runs, and ``pipeline.submission``
sends it: ``--submit`` to Vertex AI Pipelines, ``--schedule-cron`` as a Vertex AI Pipelines
schedule, ``--kfp-host`` to a Kubeflow Pipelines v2 endpoint; ``--rehearse`` executes it on
this machine instead (``pipeline.rehearsal.session``).
This file is the command line only: parse, validate, configure, dispatch. Nothing talks to
a cloud at import, and every setting is checked before anything is sent.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import warnings
from collections.abc import Sequence

from pipeline.compiler import KfpMissingError, compile_pipeline, require_kfp
from pipeline.config import CONTRACT_FILE, DEFAULT_SERVING_IMAGE, PipelineConfig, VertexEndpoint
from pipeline.flags import add_pipeline_flags, pipeline_config_kwargs
from pipeline.rehearsal.serving import SERVING_TF_VERSION
from pipeline.rehearsal.session import RehearsalOptions, rehearse_compiled_job
from pipeline.submission import (
    MAX_CONCURRENT_RUNS,
    Schedule,
    Submission,
    anonymous_credentials,
    check_cron,
    rfc3339,
    schedule_display_name,
    schedule_on_vertex,
    submit_to_kfp,
    submit_to_vertex,
)
from pipeline.vertex_training import KINDS, VertexTraining

PROJECT_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUTPUT_DIR = os.path.join(PROJECT_DIR, "outputs", "compiled")
DEFAULT_REHEARSAL_ROOT = os.path.join(PROJECT_DIR, "outputs", "rehearsal")
DEFAULT_SERVING_PYTHON = os.path.join(PROJECT_DIR, ".tools", f"serving-tf{SERVING_TF_VERSION}", "bin", "python")


class SettingsError(ValueError):
    """A flag value that cannot work; the message names the flag and the fix."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Compile the pipeline for Kubeflow Pipelines v2 / Vertex AI, and optionally submit it.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    where = parser.add_argument_group("where things live (gs:// paths)")
    where.add_argument(
        "--output-root", required=True, help="gs:// root for the pipeline root, artifacts and pushed models."
    )
    where.add_argument("--data-root", required=True, help="gs:// directory holding the CSV file(s).")
    where.add_argument(
        "--serving-data-root",
        default=None,
        help="gs:// directory with CSV files of what the model was asked at serving time (raw columns, no "
        "label): checked against the contract's SERVING environment and for training/serving skew.",
    )
    where.add_argument(
        "--image",
        required=True,
        help="Container image every component runs in: the project's image, built from the Dockerfile and "
        "uv.lock (make image builds it here), pushed to a registry.",
    )
    where.add_argument(
        "--output-file",
        default=None,
        help="Where to write the compiled job JSON (default: outputs/compiled/<name>.json).",
    )
    add_pipeline_flags(parser)

    cloud = parser.add_argument_group("Google Cloud")
    cloud.add_argument(
        "--project", help="Google Cloud project (needed by --submit, --schedule-cron, --dataflow, --endpoint-name)."
    )
    cloud.add_argument("--region", help="Google Cloud region, e.g. us-central1 (same cases as --project).")

    dataflow = parser.add_argument_group("Dataflow for the Beam-based components")
    dataflow.add_argument(
        "--dataflow",
        action="store_true",
        help="Run ExampleGen, StatisticsGen, Transform "
        "and Evaluator on Dataflow instead of in the component's container.",
    )
    dataflow.add_argument("--dataflow-temp-location", help="gs:// temp/staging location for Dataflow.")
    dataflow.add_argument("--dataflow-max-workers", type=int, default=4, help="Dataflow worker count ceiling.")
    dataflow.add_argument(
        "--dataflow-sdk-image", default=None, help="SDK container image for Dataflow workers (default: --image)."
    )

    training = parser.add_argument_group("Vertex AI Training for the Trainer")
    training.add_argument(
        "--vertex-training",
        choices=KINDS,
        help="Train on Vertex AI: one GPU machine, several workers, a chief with workers and parameter servers, "
        "or a TPU VM.",
    )
    training.add_argument("--training-machine-type", help="Machine type (default: n1-standard-8; TPU: cloud-tpu).")
    training.add_argument("--accelerator-type", help="e.g. NVIDIA_TESLA_T4 (gpu default), TPU_V3 (tpu default).")
    training.add_argument("--accelerator-count", type=int, help="Accelerators per machine (gpu: 1, tpu: 8).")
    training.add_argument(
        "--training-replicas",
        type=int,
        default=3,
        help="Machines for --vertex-training multi-worker or parameter-server (a chief plus N-1 workers).",
    )
    training.add_argument(
        "--parameter-servers",
        type=int,
        default=1,
        help="Parameter-server machines for --vertex-training parameter-server.",
    )
    training.add_argument(
        "--parallel-trials",
        type=int,
        default=1,
        help="With --tune and --vertex-training: tuning trials run at once, one Vertex AI machine each.",
    )
    training.add_argument(
        "--ps-machine-type", help="Parameter-server machine type (default: n1-highmem-4; they hold the variables)."
    )

    serving = parser.add_argument_group("Vertex AI endpoint deployment for the Pusher")
    serving.add_argument("--endpoint-name", help="Deploy blessed models to this Vertex AI endpoint.")
    serving.add_argument("--serving-machine-type", default="n1-standard-2", help="Endpoint machine type.")
    serving.add_argument("--serving-image", default=DEFAULT_SERVING_IMAGE, help="Prebuilt serving container.")

    submit = parser.add_argument_group("submission")
    submit.add_argument("--submit", action="store_true", help="Submit the compiled job to Vertex AI Pipelines.")
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="With --submit, --schedule-cron or --kfp-host: do everything except the network call.",
    )
    submit.add_argument("--service-account", help="Service account the Vertex pipeline runs as.")
    submit.add_argument("--network", help="VPC network to peer, projects/<number>/global/networks/<name>.")
    submit.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Label for the Vertex pipeline job (repeatable).",
    )
    submit.add_argument("--kfp-host", help="Submit to this Kubeflow Pipelines v2 endpoint instead of Vertex.")
    submit.add_argument("--kfp-experiment", default="Default", help="KFP experiment to run in.")
    submit.add_argument(
        "--schedule-cron",
        metavar="CRON",
        help="Instead of one run now, create a Vertex AI Pipelines schedule that runs the compiled job at these "
        "times: unix-cron, 5 fields, after TZ=<IANA zone> to name the time zone, e.g. 'TZ=Europe/Berlin 0 3 * * 1'. "
        "One run at a time; the --submit settings (service account, network, labels, cache) apply to every run.",
    )
    submit.add_argument(
        "--schedule-start", metavar="ISO-8601", help="With --schedule-cron: first possible run, e.g. 2030-01-06T00:00Z."
    )
    submit.add_argument("--schedule-end", metavar="ISO-8601", help="With --schedule-cron: no runs after this time.")
    submit.add_argument(
        "--schedule-max-runs", type=int, help="With --schedule-cron: the schedule completes after this many runs."
    )

    rehearsal = parser.add_argument_group("rehearsal: run the compiled job on this machine as Vertex AI would")
    rehearsal.add_argument(
        "--rehearse",
        action="store_true",
        help="Execute the compiled job here, task by task as Vertex AI Pipelines does, instead of submitting it.",
    )
    rehearsal.add_argument(
        "--report",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Write the rehearsal's run report under --rehearsal-root (report/<pipeline>/<job>/index.html).",
    )
    rehearsal.add_argument(
        "--rehearsal-root",
        default=DEFAULT_REHEARSAL_ROOT,
        help="Where the rehearsal keeps its stand-in Cloud Storage, metadata store, staged image, stand-ins' "
        "files and task logs (one rehearsal at a time).",
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
        default=DEFAULT_SERVING_PYTHON,
        help="Python of a TensorFlow 2.15 environment (Vertex's tf2-cpu.2-15) that serves an --endpoint-name "
        "deployment and answers a request with the pushed model at the end of the rehearsal (make serving-env "
        "installs it).",
    )
    return parser.parse_args(argv)


def _require_gcs(flag: str, value: str | None) -> None:
    if not value or not value.startswith("gs://"):
        raise SettingsError(f"{flag} must be a gs:// path (the cloud cannot read this machine's disk); got {value!r}")


def _require(flag: str, value: str | None, why: str) -> None:
    if not value:
        raise SettingsError(f"{flag} is required {why}")


def _labels(pairs: Sequence[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SettingsError(f"--label expects KEY=VALUE, got {pair!r}")
        labels[key] = value
    return labels


def validate(args: argparse.Namespace) -> None:
    """Every check that can fail before compiling or sending anything."""
    _require_gcs("--output-root", args.output_root)
    _require_gcs("--data-root", args.data_root)
    if args.schema_path:
        _require_gcs("--schema-path", args.schema_path)
    if args.serving_data_root:
        _require_gcs("--serving-data-root", args.serving_data_root)
    if args.submit and args.kfp_host:
        raise SettingsError("--submit (Vertex AI) and --kfp-host (Kubeflow) are exclusive: choose one")
    _validate_schedule_flags(args)
    if args.rehearse and (args.submit or args.kfp_host):
        raise SettingsError("--rehearse runs the job here; --submit/--kfp-host send it: choose one")
    if args.dry_run and not (args.submit or args.kfp_host or args.schedule_cron is not None):
        raise SettingsError("--dry-run only makes sense with --submit, --schedule-cron or --kfp-host")
    for needed, why in (
        (args.submit, "with --submit"),
        (args.schedule_cron is not None, "with --schedule-cron"),
        (args.dataflow, "with --dataflow"),
        (args.endpoint_name, "with --endpoint-name"),
        (args.vertex_training, "with --vertex-training"),
    ):
        if needed:
            _require("--project", args.project, why)
            _require("--region", args.region, why)
    if args.dataflow:
        _require_gcs("--dataflow-temp-location", args.dataflow_temp_location)
        if args.dataflow_max_workers < 1:
            raise SettingsError(f"--dataflow-max-workers must be at least 1, got {args.dataflow_max_workers}")
    if args.parallel_trials != 1 and not (args.tune and args.vertex_training):
        raise SettingsError("--parallel-trials runs tuning trials on Vertex AI: add --tune and --vertex-training")
    if args.tune and args.vertex_training == "tpu":
        raise SettingsError(
            "--tune with --vertex-training tpu: trials run on GPU or CPU machines; tune with --vertex-training gpu, "
            "then train on the TPU"
        )
    if args.kfp_host and not args.kfp_host.startswith(("http://", "https://")):
        raise SettingsError(f"--kfp-host must be an http(s):// URL, got {args.kfp_host!r}")
    _labels(args.label)


def _flag(args: argparse.Namespace, flag: str):
    """The value of ``--some-flag``."""
    return getattr(args, flag[2:].replace("-", "_"))


def _validate_schedule_flags(args: argparse.Namespace) -> None:
    """--schedule-cron replaces a one-off run, and the window flags only shape a schedule."""
    if args.schedule_cron is None:
        for flag in ("--schedule-start", "--schedule-end", "--schedule-max-runs"):
            if _flag(args, flag) is not None:
                raise SettingsError(f"{flag} shapes a Vertex AI schedule: add --schedule-cron, or drop {flag}")
        return
    for flag, clash, fix in (
        ("--submit", "starts one run now", "drop --submit to schedule, or drop --schedule-cron to run once"),
        ("--kfp-host", "sends to Kubeflow Pipelines", "schedules are created on Vertex AI only: drop --kfp-host"),
        ("--rehearse", "runs the job here once", "rehearse without --schedule-cron first, then schedule"),
        ("--span", "pins every run to one span", "drop --span so each run ingests the newest span"),
    ):
        given = _flag(args, flag)
        if given is not None and given is not False:  # --span 0 is a span
            raise SettingsError(f"--schedule-cron creates a Vertex AI schedule and {flag} {clash}: {fix}")


def _schedule_time(flag: str, value: str | None) -> datetime.datetime | None:
    if value is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise SettingsError(
            f"{flag} expects an ISO-8601 date and time, e.g. 2030-01-06T03:00Z; got {value!r}"
        ) from None
    if when.utcoffset() is None:
        raise SettingsError(f"{flag} {value!r} has no time zone: add one, e.g. {value}Z (UTC) or {value}+01:00")
    return when


def schedule_from_args(args: argparse.Namespace, pipeline_name: str) -> Schedule:
    """The --schedule-* flags as a Schedule, named after the pipeline; each bad value names its flag."""
    try:
        cron = check_cron(args.schedule_cron)
    except ValueError as err:
        raise SettingsError(f"--schedule-cron {err}") from err
    start = _schedule_time("--schedule-start", args.schedule_start)
    end = _schedule_time("--schedule-end", args.schedule_end)
    if start and end and end <= start:
        raise SettingsError(f"--schedule-end {args.schedule_end} is not after --schedule-start {args.schedule_start}")
    if end and end <= datetime.datetime.now(datetime.UTC):
        raise SettingsError(f"--schedule-end {args.schedule_end} is in the past: no run would start")
    if args.schedule_max_runs is not None and args.schedule_max_runs < 1:
        raise SettingsError(f"--schedule-max-runs must be at least 1, got {args.schedule_max_runs}")
    return Schedule(
        cron=cron,
        display_name=schedule_display_name(pipeline_name),
        start_time=start,
        end_time=end,
        max_run_count=args.schedule_max_runs,
    )


def dataflow_args(args: argparse.Namespace) -> tuple[str, ...]:
    """Beam pipeline arguments that move the Beam-based components onto Dataflow."""
    if not args.dataflow:
        return ()
    return (
        "--runner=DataflowRunner",
        f"--project={args.project}",
        f"--region={args.region}",
        f"--temp_location={args.dataflow_temp_location}",
        f"--max_num_workers={args.dataflow_max_workers}",
        f"--sdk_container_image={args.dataflow_sdk_image or args.image}",
        # The SDK image already has the project's code and dependencies.
        "--experiments=use_runner_v2",
    )


def vertex_training(args: argparse.Namespace) -> VertexTraining | None:
    """The Trainer's Vertex AI job from the --vertex-training flags (unset ones: builder defaults)."""
    if not args.vertex_training:
        return None
    try:
        return VertexTraining.of_kind(
            args.vertex_training,
            args.project,
            args.region,
            args.image,
            replicas=args.training_replicas,
            parameter_servers=args.parameter_servers,
            machine_type=args.training_machine_type,
            accelerator_type=args.accelerator_type,
            accelerator_count=args.accelerator_count,
            ps_machine_type=args.ps_machine_type,
        )
    except ValueError as err:
        raise SettingsError(f"--vertex-training {args.vertex_training}: {err}") from err


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    training = vertex_training(args)
    try:
        return PipelineConfig(
            data_root=args.data_root,
            serving_data_root=args.serving_data_root,
            output_root=args.output_root,
            schema_path=None
            if args.infer_schema
            else args.schema_path or f"{args.data_root.rstrip('/')}/{CONTRACT_FILE}",
            extra_beam_args=dataflow_args(args),
            vertex_endpoint=VertexEndpoint(
                project=args.project,
                region=args.region,
                endpoint_name=args.endpoint_name,
                machine_type=args.serving_machine_type,
                serving_image=args.serving_image,
            )
            if args.endpoint_name
            else None,
            vertex_training=training,
            **pipeline_config_kwargs(args),
        )
    except ValueError as err:
        flag = "--pipeline-name" if "pipeline_name" in str(err) else "a pipeline flag"
        raise SettingsError(f"{flag}: {err}") from err


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
    )


def vertex_submission(args: argparse.Namespace, config: PipelineConfig) -> Submission:
    """The run settings --submit and --schedule-cron share."""
    return Submission(
        project=args.project,
        region=args.region,
        pipeline_root=config.pipeline_root,
        display_name=config.pipeline_name,
        service_account=args.service_account,
        network=args.network,
        labels=_labels(args.label),
        enable_caching=args.enable_cache,
    )


def _vertex_credentials(args: argparse.Namespace):
    # A dry run needs no identity: anonymous credentials keep it from looking any up.
    return anonymous_credentials() if args.dry_run else None


def send_to_vertex(args: argparse.Namespace, config: PipelineConfig, job_file: str) -> None:
    """--submit: the compiled job to Vertex AI Pipelines (with --dry-run: built, not sent)."""
    submission = vertex_submission(args, config)
    job = submit_to_vertex(job_file, submission, dry_run=args.dry_run, credentials=_vertex_credentials(args))
    if args.dry_run:
        print(f"Dry run: Vertex AI PipelineJob {job.job_id} built for {args.project}/{args.region}, not sent.")
    else:
        print(f"Submitted to Vertex AI Pipelines: {job._dashboard_uri()}")


def how_runs_find_data(config: PipelineConfig) -> str:
    """What each scheduled run reads: ExampleGen's driver resolves --data-pattern under
    --data-root when the run starts, not when the job was compiled."""
    where = f"{config.data_root.rstrip('/')}/{config.data_pattern}"
    driver = "Each run runs this compiled job as it is; its ExampleGen driver"
    if config.has_spans:
        return (
            f"{driver} resolves the newest span matching {where} when the run starts (the Trainer learns from the "
            f"{config.window_spans} newest), so new spans are picked up without recompiling."
        )
    return (
        f"{driver} reads the files matching {where} as they are when the run starts, so new files are picked up "
        "without recompiling (a {SPAN} in --data-pattern reads only the newest span)."
    )


def schedule_summary(schedule: Schedule) -> str:
    """The schedule's cron and window in one line."""
    parts = [f"cron {schedule.cron!r}", f"from {rfc3339(schedule.start_time)}" if schedule.start_time else "from now"]
    parts[-1] += f" until {rfc3339(schedule.end_time)}" if schedule.end_time else ", no end"
    if schedule.max_run_count:
        parts.append(f"at most {schedule.max_run_count} runs")
    parts.append(f"{MAX_CONCURRENT_RUNS} run at a time")
    return ", ".join(parts)


def schedule_vertex_runs(args: argparse.Namespace, config: PipelineConfig, job_file: str, schedule: Schedule) -> None:
    """--schedule-cron: a Vertex AI Pipelines schedule of the compiled job (with --dry-run: built, not sent)."""
    created = schedule_on_vertex(
        job_file,
        vertex_submission(args, config),
        schedule,
        dry_run=args.dry_run,
        credentials=_vertex_credentials(args),
    )
    if args.dry_run:
        print(
            f"Dry run: Vertex AI schedule {schedule.display_name} ({schedule_summary(schedule)}) built for "
            f"{args.project}/{args.region}, not sent."
        )
    else:
        print(f"Created Vertex AI Pipelines schedule {created.resource_name} ({schedule_summary(schedule)})")
        print(f"  {created._dashboard_uri()}")
    print(how_runs_find_data(config))


def send_to_kfp(args: argparse.Namespace, config: PipelineConfig, job_file: str) -> None:
    """--kfp-host: the compiled job to a Kubeflow Pipelines v2 endpoint (with --dry-run: not sent)."""
    result = submit_to_kfp(
        job_file,
        args.kfp_host,
        args.kfp_experiment,
        config.pipeline_name,
        config.pipeline_root,
        args.enable_cache,
        dry_run=args.dry_run,
    )
    if args.dry_run:
        print(f"Dry run: pipeline spec for {args.kfp_host} written, not sent.")
    else:
        print(f"Submitted to Kubeflow Pipelines: {args.kfp_host.rstrip('/')}/#/runs/details/{result.run_id}")


def main(argv: Sequence[str] | None = None) -> int:
    # Google client libraries warn at import about future Python support; noise here.
    warnings.filterwarnings("ignore", category=FutureWarning)
    args = parse_args(argv)
    try:
        validate(args)
        config = config_from_args(args)
        schedule = schedule_from_args(args, config.pipeline_name) if args.schedule_cron is not None else None
        require_kfp()
    except (SettingsError, KfpMissingError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    output_file = args.output_file or os.path.join(DEFAULT_OUTPUT_DIR, f"{config.pipeline_name}.json")
    compile_pipeline(config, args.image, output_file)
    print(f"Compiled {config.pipeline_name} for Kubeflow Pipelines v2 / Vertex AI: {output_file}")
    if args.submit:
        send_to_vertex(args, config, output_file)
    elif schedule:
        schedule_vertex_runs(args, config, output_file, schedule)
    elif args.rehearse:
        return rehearse_compiled_job(rehearsal_options(args), config, output_file)
    elif args.kfp_host:
        send_to_kfp(args, config, output_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
