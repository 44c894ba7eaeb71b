"""Command line: compile the pipeline for Kubeflow Pipelines v2 / Vertex AI Pipelines, then
submit, schedule, send to a KFP endpoint or rehearse it here (``python kubeflow_runner.py --help``).
Parse, check, configure, dispatch: each flag group lives with the module that owns it, and
every setting is checked before anything is compiled or sent.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from launch.dataflow import add_dataflow_flags, check_dataflow_flags, dataflow_args
from launch.flag_errors import SettingsError, require, require_gcs
from launch.flags import add_pipeline_flags, configured, pipeline_config_kwargs
from launch.flink import add_flink_flags, check_compiled_job_flink_flags, compiled_job_flink_args
from launch.schedule import Schedule, how_runs_find_data, schedule_from_args, schedule_summary
from launch.submission import (
    add_submission_flags,
    check_destination,
    check_submission_values,
    kfp_access,
    schedule_on_vertex,
    submit_to_kfp,
    submit_to_vertex,
    vertex_credentials,
    vertex_submission,
)
from launch.training import (
    add_tfjob_flags,
    add_training_flags,
    check_kubeflow_flags,
    check_training_flags,
    tfjob_from_args,
    training_from_args,
)
from launch.vertex_push import add_push_flags, check_push_flags, push_from_args, pushes_to_vertex
from pipeline.compiler import KfpMissingError, compile_pipeline, require_kfp
from pipeline.config import CONTRACT_FILE, DEFAULT_OUTPUT_ROOT, PipelineConfig
from rehearsal.serving import SERVING_TF_VERSION
from rehearsal.session import add_rehearsal_flags, rehearsal_options, rehearse_compiled_job
from runtime.terminal import Terminal, add_verbose_flag, command_log, say

PROJECT_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUTPUT_DIR = os.path.join(PROJECT_DIR, "outputs", "compiled")
DEFAULT_REHEARSAL_ROOT = os.path.join(PROJECT_DIR, "outputs", "rehearsal")
DEFAULT_SERVING_PYTHON = os.path.join(PROJECT_DIR, ".tools", f"serving-tf{SERVING_TF_VERSION}", "bin", "python")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """This runner's own flags (where things live, the cloud project, the endpoint); every
    other group comes from the module that owns it."""
    parser = argparse.ArgumentParser(
        description="Compile the pipeline for Kubeflow Pipelines v2 / Vertex AI, and optionally submit it.",
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
    add_dataflow_flags(parser)
    add_flink_flags(parser)
    add_training_flags(parser)
    add_tfjob_flags(parser)

    add_push_flags(parser)
    add_submission_flags(parser)
    add_rehearsal_flags(parser, root=DEFAULT_REHEARSAL_ROOT, serving_python=DEFAULT_SERVING_PYTHON)
    add_verbose_flag(parser)
    return parser.parse_args(argv)


def validate(args: argparse.Namespace) -> None:
    """Every check that can fail before compiling or sending anything, each group's by its owner."""
    require_gcs("--output-root", args.output_root)
    require_gcs("--data-root", args.data_root)
    if args.schema_path:
        require_gcs("--schema-path", args.schema_path)
    if args.serving_data_root:
        require_gcs("--serving-data-root", args.serving_data_root)
    check_destination(args)
    for needed, why in (
        (args.submit, "with --submit"),
        (args.schedule_cron is not None, "with --schedule-cron"),
        (args.dataflow, "with --dataflow"),
        (args.vertex_training, "with --vertex-training"),
    ):
        if needed:
            require("--project", args.project, why)
            require("--region", args.region, why)
    check_kubeflow_flags(args, for_open_source_kubeflow(args), pushes_to_vertex(args))
    check_dataflow_flags(args)
    if args.dataflow and args.flink_master:
        raise SettingsError("give --dataflow or --flink-master, not both: the Beam components run on one engine")
    check_compiled_job_flink_flags(args)
    check_training_flags(args)
    check_push_flags(args)
    check_submission_values(args)


def for_open_source_kubeflow(args: argparse.Namespace) -> bool:
    """The job is for the open-source Kubeflow backend (sent there, or rehearsed as it runs)."""
    return bool(args.kfp_host) or (args.rehearse and args.rehearse_as == "kubeflow")


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    """The flags as the one typed configuration; a value it refuses names its flag."""
    return configured(
        lambda: PipelineConfig(
            data_root=args.data_root,
            serving_data_root=args.serving_data_root,
            output_root=args.output_root,
            schema_path=None
            if args.infer_schema
            else args.schema_path or f"{args.data_root.rstrip('/')}/{CONTRACT_FILE}",
            extra_beam_args=dataflow_args(args) + compiled_job_flink_args(args),
            vertex_endpoint=push_from_args(args),
            vertex_training=training_from_args(args),
            tfjob=tfjob_from_args(args),
            example_gen_driver=not for_open_source_kubeflow(args),
            **pipeline_config_kwargs(args),
        )
    )


def send_to_vertex(args: argparse.Namespace, config: PipelineConfig, job_file: str) -> None:
    """--submit: the compiled job to Vertex AI Pipelines (with --dry-run: built, not sent)."""
    submission = vertex_submission(args, config)
    job = submit_to_vertex(job_file, submission, dry_run=args.dry_run, credentials=vertex_credentials(args))
    if args.dry_run:
        say(f"Dry run: Vertex AI PipelineJob {job.job_id} built for {args.project}/{args.region}, not sent.")
    else:
        say(f"Submitted to Vertex AI Pipelines: {job._dashboard_uri()}")


def schedule_vertex_runs(args: argparse.Namespace, config: PipelineConfig, job_file: str, schedule: Schedule) -> None:
    """--schedule-cron: a Vertex AI Pipelines schedule of the compiled job (with --dry-run: built, not sent)."""
    created = schedule_on_vertex(
        job_file,
        vertex_submission(args, config),
        schedule,
        dry_run=args.dry_run,
        credentials=vertex_credentials(args),
    )
    if args.dry_run:
        say(
            f"Dry run: Vertex AI schedule {schedule.display_name} ({schedule_summary(schedule)}) built for "
            f"{args.project}/{args.region}, not sent."
        )
    else:
        say(f"Created Vertex AI Pipelines schedule {created.resource_name} ({schedule_summary(schedule)})")
        say(f"  {created._dashboard_uri()}")
    say(how_runs_find_data(config))


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
        access=kfp_access(args),
    )
    if args.dry_run:
        say(f"Dry run: pipeline spec for {args.kfp_host} written, not sent.")
    else:
        say(f"Submitted to Kubeflow Pipelines: {args.kfp_host.rstrip('/')}/#/runs/details/{result.run_id}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with Terminal(command_log(DEFAULT_OUTPUT_ROOT, "kubeflow_runner"), verbose=args.verbose) as terminal:
        # Google client libraries warn at import about future Python support; noise here.
        warnings.filterwarnings("ignore", category=FutureWarning)
        code = _compile_and_send(args)
        terminal.say_log()
    return code


def _compile_and_send(args: argparse.Namespace) -> int:
    try:
        validate(args)
        config = config_from_args(args)
        schedule = schedule_from_args(args, config.pipeline_name) if args.schedule_cron is not None else None
        require_kfp()
    except (ValueError, KfpMissingError) as err:  # SettingsError, ContractError, ProblemError: each names its fix
        say(f"error: {err}", err=True)
        return 2
    output_file = args.output_file or os.path.join(DEFAULT_OUTPUT_DIR, f"{config.pipeline_name}.json")
    compile_pipeline(config, args.image, output_file)
    say(f"Compiled {config.pipeline_name} for Kubeflow Pipelines v2 / Vertex AI: {output_file}")
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
