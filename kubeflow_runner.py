"""Command line: compile the pipeline for Kubeflow Pipelines v2 / Vertex AI Pipelines,
and optionally submit it.

    python kubeflow_runner.py --help

Flags become a ``PipelineConfig``; ``pipeline.compiler`` compiles the same
``create_pipeline(config)`` that ``local_runner.py`` runs, and ``pipeline.submission``
sends it: ``--submit`` to Vertex AI Pipelines, ``--kfp-host`` to a Kubeflow Pipelines v2
endpoint. Nothing talks to a cloud at import, and every setting is checked before
anything is sent.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import warnings
from collections.abc import Sequence

from pipeline.compiler import TFX_BASE_IMAGE, KfpMissingError, compile_pipeline, require_kfp
from pipeline.config import CONTRACT_FILE, DEFAULT_SERVING_IMAGE, PipelineConfig, VertexEndpoint
from pipeline.flags import add_pipeline_flags, pipeline_config_kwargs
from pipeline.rehearsal.serving import SERVING_TF_VERSION
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
    given = {
        k: v
        for k, v in (
            ("machine_type", args.training_machine_type),
            ("accelerator_type", args.accelerator_type),
            ("accelerator_count", args.accelerator_count),
        )
        if v is not None
    }
    try:
        if args.vertex_training == "gpu":
            return VertexTraining.gpu(args.project, args.region, args.image, **given)
        if args.vertex_training == "multi-worker":
            return VertexTraining.multi_worker(args.project, args.region, args.image, args.training_replicas, **given)
        if args.vertex_training == "parameter-server":
            if args.ps_machine_type:
                given["ps_machine_type"] = args.ps_machine_type
            return VertexTraining.parameter_server(
                args.project, args.region, args.image, args.training_replicas, args.parameter_servers, **given
            )
        if "machine_type" in given:
            raise ValueError("a TPU VM's machine type is always cloud-tpu; drop --training-machine-type")
        return VertexTraining.tpu(args.project, args.region, args.image, **given)
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


def rehearse(args: argparse.Namespace, config: PipelineConfig, job_file: str) -> int:
    """Runs the compiled job here as Vertex would; prints its summary; 0 when every task succeeded."""
    from pipeline.rehearsal.job import CompiledJob, JobError, PathMap
    from pipeline.rehearsal.runner import Settings, log_tail, refuse_cloud_only
    from pipeline.rehearsal.runner import rehearse as run_rehearsal
    from pipeline.rehearsal.summary import summarize
    from pipeline.report.write import write_report
    from pipeline.run_summary import format_summary

    try:
        settings = Settings(
            root=os.path.abspath(args.rehearsal_root),
            paths=PathMap.parse(os.path.join(args.rehearsal_root, "gcs"), args.rehearse_gcs),
            dockerfile=os.path.join(PROJECT_DIR, "Dockerfile"),
            context_dir=PROJECT_DIR,
            project=args.project or "rehearsal",
            region=args.region or "local",
            enable_caching=args.enable_cache,
        )
        refuse_cloud_only(CompiledJob.load(job_file))
        local_data = settings.paths.local(config.data_root)
        data_files = sorted(glob.glob(os.path.join(local_data, config.data_pattern)))
        if not data_files:
            raise JobError(
                f"the rehearsal reads --data-root {config.data_root} from {local_data}, which holds no "
                f"{config.data_pattern}: copy the data there, or map the prefix onto a local folder with "
                f"--rehearse-gcs {config.data_root}=DIR"
            )
        print(f"Rehearsing {job_file}: {config.data_root} is read from {local_data},")
        print(f"  {config.output_root} written to {settings.paths.local(config.output_root)}")
        result = run_rehearsal(job_file, settings)
    except JobError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # TFMA's deprecation notices while reading the evaluation
    summary = summarize(result)
    print("\n" + format_summary(summary, config.min_eval_auc))
    print(f"Task logs: {result.logs_dir}")
    try:
        if args.report:
            print(f"Run report: {write_report(summary, config, root=settings.root)}")
    except Exception as err:  # noqa: BLE001 - the report must never hide the rehearsal's own outcome
        print(f"(no run report: {type(err).__name__}: {err})")
    if failed := result.failed:
        print(
            f"\nThe rehearsal FAILED at task {failed.name} (exit code {failed.exit_code}); nothing downstream ran. "
            f"Last lines of its log ({failed.log}):\n{log_tail(failed.log)}",
            file=sys.stderr,
        )
        return 1
    if summary.pushed_to:
        transform_graph = result.task("Transform").outputs["transform_graph"][0]["uri"]
        return rehearse_serving(args.serving_python, summary.pushed_to, transform_graph, data_files[0])
    return 0


def rehearse_serving(serving_python: str, pushed_to: str, transform_graph: str, data_file: str) -> int:
    """The pushed model answers a Vertex-style request built from the first data rows."""
    from pipeline.rehearsal.serving import ServingError, check_served_model

    if not os.path.exists(serving_python):
        print(
            f"Served model: NOT rehearsed: no TensorFlow {SERVING_TF_VERSION} environment at {serving_python} "
            "(make serving-env installs one; --serving-python points elsewhere)."
        )
        return 0
    try:
        check = check_served_model(pushed_to, transform_graph, data_file, serving_python)
    except ServingError as err:
        print(f"\nThe served model FAILED its rehearsal: {err}", file=sys.stderr)
        return 1
    rows = len(check.request["instances"])
    print(
        f'Served model: answered {{"instances": [...{rows} CSV rows...]}} through serving_raw in TensorFlow '
        f"{check.tensorflow}, as serving_default does (largest difference {check.largest_difference:.1e})."
    )
    return 0


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
        job = submit_to_vertex(output_file, submission, dry_run=args.dry_run, credentials=credentials)
        if args.dry_run:
            print(f"Dry run: Vertex AI PipelineJob {job.job_id} built for {args.project}/{args.region}, not sent.")
        else:
            print(f"Submitted to Vertex AI Pipelines: {job._dashboard_uri()}")
    elif args.rehearse:
        return rehearse(args, config, output_file)
    elif args.kfp_host:
        result = submit_to_kfp(
            output_file,
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
