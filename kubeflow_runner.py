"""Command line: compile the pipeline for Kubeflow Pipelines v2 / Vertex AI Pipelines,
and optionally submit it.

    python kubeflow_runner.py --help

Flags become a ``PipelineConfig``; ``pipeline.compiler`` compiles the same
``create_pipeline(config)`` that ``local_runner.py`` runs, and ``pipeline.submission``
sends it: ``--submit`` to Vertex AI Pipelines, ``--kfp-host`` to a Kubeflow Pipelines v2
endpoint; ``--rehearse`` executes it on this machine instead (``pipeline.rehearsal.session``).
This file is the command line only: parse, validate, configure, dispatch. Nothing talks to
a cloud at import, and every setting is checked before anything is sent.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

from pipeline.compiler import TFX_BASE_IMAGE, KfpMissingError, compile_pipeline, require_kfp
from pipeline.config import CONTRACT_FILE, DEFAULT_SERVING_IMAGE, PipelineConfig, VertexEndpoint
from pipeline.flags import add_pipeline_flags, pipeline_config_kwargs
from pipeline.rehearsal.serving import SERVING_TF_VERSION
from pipeline.rehearsal.session import RehearsalOptions, rehearse_compiled_job
from pipeline.submission import Submission, anonymous_credentials, submit_to_kfp, submit_to_vertex
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
        help="Container image every component runs in: the project's image built from "
        f"the Dockerfile (FROM {TFX_BASE_IMAGE}), pushed to a registry.",
    )
    where.add_argument(
        "--output-file",
        default=None,
        help="Where to write the compiled job JSON (default: outputs/compiled/<name>.json).",
    )
    add_pipeline_flags(parser)

    cloud = parser.add_argument_group("Google Cloud")
    cloud.add_argument("--project", help="Google Cloud project (needed by --submit, --dataflow, --endpoint-name).")
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
        "--dry-run", action="store_true", help="With --submit or --kfp-host: do everything except the network call."
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
        help="Where the rehearsal keeps gs:// data, its metadata store, the staged image and task logs.",
    )
    rehearsal.add_argument(
        "--rehearse-gcs",
        action="append",
        default=[],
        metavar="gs://BUCKET/PREFIX=DIR",
        help="Read and write this gs:// prefix in a local directory (repeatable); other gs:// paths "
        "live under <rehearsal-root>/gcs/<bucket>/.",
    )
    rehearsal.add_argument(
        "--serving-python",
        default=DEFAULT_SERVING_PYTHON,
        help="Python of a TensorFlow 2.15 environment (Vertex's tf2-cpu.2-15) that answers a request with "
        "the pushed model at the end of the rehearsal (make serving-env installs it).",
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
    if args.rehearse and (args.submit or args.kfp_host):
        raise SettingsError("--rehearse runs the job here; --submit/--kfp-host send it: choose one")
    if args.dry_run and not (args.submit or args.kfp_host):
        raise SettingsError("--dry-run only makes sense with --submit or --kfp-host")
    for needed, why in (
        (args.submit, "with --submit"),
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
    """What --rehearse needs from the flags, and the project's Dockerfile to stage the image from."""
    return RehearsalOptions(
        root=args.rehearsal_root,
        gcs_mappings=tuple(args.rehearse_gcs),
        serving_python=args.serving_python,
        dockerfile=os.path.join(PROJECT_DIR, "Dockerfile"),
        context_dir=PROJECT_DIR,
        project=args.project,
        region=args.region,
        enable_caching=args.enable_cache,
        report=args.report,
    )


def send_to_vertex(args: argparse.Namespace, config: PipelineConfig, job_file: str) -> None:
    """--submit: the compiled job to Vertex AI Pipelines (with --dry-run: built, not sent)."""
    submission = Submission(
        project=args.project,
        region=args.region,
        pipeline_root=config.pipeline_root,
        display_name=config.pipeline_name,
        service_account=args.service_account,
        network=args.network,
        labels=_labels(args.label),
        enable_caching=args.enable_cache,
    )
    # A dry run needs no identity: anonymous credentials keep it from looking any up.
    credentials = anonymous_credentials() if args.dry_run else None
    job = submit_to_vertex(job_file, submission, dry_run=args.dry_run, credentials=credentials)
    if args.dry_run:
        print(f"Dry run: Vertex AI PipelineJob {job.job_id} built for {args.project}/{args.region}, not sent.")
    else:
        print(f"Submitted to Vertex AI Pipelines: {job._dashboard_uri()}")


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
        require_kfp()
    except (SettingsError, KfpMissingError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    output_file = args.output_file or os.path.join(DEFAULT_OUTPUT_DIR, f"{config.pipeline_name}.json")
    compile_pipeline(config, args.image, output_file)
    print(f"Compiled {config.pipeline_name} for Kubeflow Pipelines v2 / Vertex AI: {output_file}")
    if args.submit:
        send_to_vertex(args, config, output_file)
    elif args.rehearse:
        return rehearse_compiled_job(rehearsal_options(args), config, output_file)
    elif args.kfp_host:
        send_to_kfp(args, config, output_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
