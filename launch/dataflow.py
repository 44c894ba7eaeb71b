"""Dataflow for the compiled job's Beam-based components (ExampleGen, StatisticsGen,
Transform, Evaluator): the --dataflow flags, their checks, and the Beam arguments they
become (``PipelineConfig.extra_beam_args``). Without --dataflow each runs in its task's
container.
"""

from __future__ import annotations

import argparse

from launch.flag_errors import SettingsError, require_gcs


def add_dataflow_flags(parser: argparse.ArgumentParser) -> None:
    """The --dataflow flags: where its temp files go, how many workers, which SDK image."""
    dataflow = parser.add_argument_group("Dataflow for the Beam-based components")
    dataflow.add_argument(
        "--dataflow",
        action="store_true",
        help="Run ExampleGen, StatisticsGen, Transform "
        "and Evaluator on Dataflow instead of in the component's container.",
    )
    dataflow.add_argument("--dataflow-temp-location", help="gs:// temp/staging location for Dataflow.")
    dataflow.add_argument(
        "--dataflow-max-workers", type=int, default=4, help="Dataflow worker count ceiling. (default: %(default)s)"
    )
    dataflow.add_argument(
        "--dataflow-sdk-image", default=None, help="SDK container image for Dataflow workers (default: --image)."
    )


def check_dataflow_flags(args: argparse.Namespace) -> None:
    """Dataflow stages through Cloud Storage and needs at least one worker."""
    if args.dataflow:
        require_gcs("--dataflow-temp-location", args.dataflow_temp_location)
        if args.dataflow_max_workers < 1:
            raise SettingsError(f"--dataflow-max-workers must be at least 1, got {args.dataflow_max_workers}")


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
