"""Compiles the pipeline for Kubeflow Pipelines v2 / Vertex AI Pipelines, and submits it.

    python kubeflow_runner.py --help

The same ``create_pipeline(config)`` that ``local_runner.py`` runs is compiled by TFX's
``KubeflowV2DagRunner`` into a pipeline-job JSON file. ``--submit`` sends it to Vertex AI
Pipelines (google-cloud-aiplatform ``PipelineJob``); ``--kfp-host`` sends its pipeline
spec to a Kubeflow Pipelines v2 endpoint instead. Nothing talks to a cloud at import, and
every setting is checked before anything is sent.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # Keras 2, as the TFX image uses.

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from typing import Any, Callable, Sequence  # noqa: E402

import yaml  # noqa: E402

from pipeline.config import DEFAULT_SERVING_IMAGE, PipelineConfig, VertexEndpoint  # noqa: E402
from pipeline.flags import add_pipeline_flags, pipeline_config_kwargs  # noqa: E402
from pipeline.vertex_training import KINDS, VertexTraining  # noqa: E402

warnings.filterwarnings("ignore", category=FutureWarning)

TFX_VERSION = "1.16.0"
# The image the project's Dockerfile builds on; the compiled spec uses the project's image.
TFX_BASE_IMAGE = f"gcr.io/tfx-oss-public/tfx:{TFX_VERSION}"
DEFAULT_OUTPUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "outputs", "compiled")


class SettingsError(ValueError):
    """A flag value that cannot work; the message names the flag and the fix."""


@dataclasses.dataclass(frozen=True)
class Submission:
    """How to submit a compiled job to Vertex AI Pipelines."""

    project: str
    region: str
    pipeline_root: str
    display_name: str
    service_account: str | None = None
    network: str | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    enable_caching: bool = False


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Compile the pipeline for Kubeflow Pipelines v2 / Vertex AI, and optionally submit it.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    where = parser.add_argument_group("where things live (gs:// paths)")
    where.add_argument("--output-root", required=True,
                       help="gs:// root for the pipeline root, artifacts and pushed models.")
    where.add_argument("--data-root", required=True, help="gs:// directory holding the CSV file(s).")
    where.add_argument("--image", required=True,
                       help="Container image every component runs in: the project's image built from "
                            f"the Dockerfile (FROM {TFX_BASE_IMAGE}), pushed to a registry.")
    where.add_argument("--output-file", default=None,
                       help="Where to write the compiled job JSON (default: outputs/compiled/<name>.json).")
    add_pipeline_flags(parser)

    cloud = parser.add_argument_group("Google Cloud")
    cloud.add_argument("--project", help="Google Cloud project (needed by --submit, --dataflow, --endpoint-name).")
    cloud.add_argument("--region", help="Google Cloud region, e.g. us-central1 (same cases as --project).")

    dataflow = parser.add_argument_group("Dataflow for the Beam-based components")
    dataflow.add_argument("--dataflow", action="store_true", help="Run ExampleGen, StatisticsGen, Transform "
                          "and Evaluator on Dataflow instead of in the component's container.")
    dataflow.add_argument("--dataflow-temp-location", help="gs:// temp/staging location for Dataflow.")
    dataflow.add_argument("--dataflow-max-workers", type=int, default=4, help="Dataflow worker count ceiling.")
    dataflow.add_argument("--dataflow-sdk-image", default=None,
                          help="SDK container image for Dataflow workers (default: --image).")

    training = parser.add_argument_group("Vertex AI Training for the Trainer")
    training.add_argument("--vertex-training", choices=KINDS,
                          help="Train on Vertex AI: one GPU machine, several workers, or a TPU VM.")
    training.add_argument("--training-machine-type", help="Machine type (default: n1-standard-8; TPU: cloud-tpu).")
    training.add_argument("--accelerator-type", help="e.g. NVIDIA_TESLA_T4 (gpu default), TPU_V3 (tpu default).")
    training.add_argument("--accelerator-count", type=int, help="Accelerators per machine (gpu: 1, tpu: 8).")
    training.add_argument("--training-replicas", type=int, default=3,
                          help="Machines for --vertex-training multi-worker (a chief plus N-1 workers).")

    serving = parser.add_argument_group("Vertex AI endpoint deployment for the Pusher")
    serving.add_argument("--endpoint-name", help="Deploy blessed models to this Vertex AI endpoint.")
    serving.add_argument("--serving-machine-type", default="n1-standard-2", help="Endpoint machine type.")
    serving.add_argument("--serving-image", default=DEFAULT_SERVING_IMAGE, help="Prebuilt serving container.")

    submit = parser.add_argument_group("submission")
    submit.add_argument("--submit", action="store_true", help="Submit the compiled job to Vertex AI Pipelines.")
    submit.add_argument("--dry-run", action="store_true",
                        help="With --submit or --kfp-host: do everything except the network call.")
    submit.add_argument("--service-account", help="Service account the Vertex pipeline runs as.")
    submit.add_argument("--network", help="VPC network to peer, projects/<number>/global/networks/<name>.")
    submit.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="Label for the Vertex pipeline job (repeatable).")
    submit.add_argument("--kfp-host", help="Submit to this Kubeflow Pipelines v2 endpoint instead of Vertex.")
    submit.add_argument("--kfp-experiment", default="Default", help="KFP experiment to run in.")
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
    if args.submit and args.kfp_host:
        raise SettingsError("--submit (Vertex AI) and --kfp-host (Kubeflow) are exclusive: choose one")
    if args.dry_run and not (args.submit or args.kfp_host):
        raise SettingsError("--dry-run only makes sense with --submit or --kfp-host")
    for needed, why in ((args.submit, "with --submit"), (args.dataflow, "with --dataflow"),
                        (args.endpoint_name, "with --endpoint-name"), (args.vertex_training, "with --vertex-training")):
        if needed:
            _require("--project", args.project, why)
            _require("--region", args.region, why)
    if args.dataflow:
        _require_gcs("--dataflow-temp-location", args.dataflow_temp_location)
        if args.dataflow_max_workers < 1:
            raise SettingsError(f"--dataflow-max-workers must be at least 1, got {args.dataflow_max_workers}")
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
    given = {k: v for k, v in (("machine_type", args.training_machine_type),
                                ("accelerator_type", args.accelerator_type),
                                ("accelerator_count", args.accelerator_count)) if v is not None}
    try:
        if args.vertex_training == "gpu":
            return VertexTraining.gpu(args.project, args.region, args.image, **given)
        if args.vertex_training == "multi-worker":
            return VertexTraining.multi_worker(args.project, args.region, args.image, args.training_replicas, **given)
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
            output_root=args.output_root,
            schema_path=args.schema_path,
            extra_beam_args=dataflow_args(args),
            vertex_endpoint=VertexEndpoint(
                project=args.project, region=args.region, endpoint_name=args.endpoint_name,
                machine_type=args.serving_machine_type, serving_image=args.serving_image,
            ) if args.endpoint_name else None,
            vertex_training=training,
            **pipeline_config_kwargs(args),
        )
    except ValueError as err:
        flag = "--pipeline-name" if "pipeline_name" in str(err) else "a pipeline flag"
        raise SettingsError(f"{flag}: {err}") from err


def require_kfp(find_spec: Callable[[str], Any] = importlib.util.find_spec) -> None:
    """TFX silently drops KubeflowV2DagRunner when kfp is missing: say so instead."""
    if find_spec("kfp") is None:
        raise SettingsError(
            "The kfp package is not installed, so TFX cannot compile for Kubeflow/Vertex. "
            "Install the locked environment (make setup), or pip install 'tfx[kfp]==1.16.0'."
        )


def compile_pipeline(config: PipelineConfig, image: str, output_file: str) -> dict:
    """Writes the pipeline-job JSON for Kubeflow Pipelines v2 / Vertex AI; returns it."""
    require_kfp()
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

    from pipeline.pipeline import create_pipeline

    runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(default_image=image),
        output_dir=os.path.dirname(os.path.abspath(output_file)),
        output_filename=os.path.basename(output_file),
    )
    return runner.run(create_pipeline(config), write_out=True)


def submit_to_vertex(job_file: str, submission: Submission, dry_run: bool = False,
                     api_endpoint: str | None = None, credentials=None):
    """Creates the Vertex AI PipelineJob from the compiled file and submits it.

    ``api_endpoint``/``credentials`` point the real client elsewhere (tests use a local
    stand-in server and anonymous credentials). Returns the job; with ``dry_run`` it is
    built but never sent.
    """
    from google.cloud import aiplatform

    aiplatform.init(
        project=submission.project, location=submission.region, credentials=credentials,
        api_endpoint=api_endpoint, api_transport="rest" if api_endpoint else None,
    )
    job = aiplatform.PipelineJob(
        display_name=submission.display_name,
        template_path=job_file,
        pipeline_root=submission.pipeline_root,
        enable_caching=submission.enable_caching,
        labels=submission.labels or None,
        project=submission.project,
        location=submission.region,
        credentials=credentials,
    )
    if not dry_run:
        job.submit(service_account=submission.service_account, network=submission.network)
    return job


def pipeline_spec_file(job_file: str) -> str:
    """KFP's client takes a bare PipelineSpec; the compiled job wraps one. Writes it beside."""
    with open(job_file) as f:
        job = json.load(f)
    spec_file = os.path.splitext(job_file)[0] + ".pipeline_spec.yaml"
    with open(spec_file, "w") as f:
        yaml.safe_dump(job["pipelineSpec"], f, sort_keys=True)
    return spec_file


def submit_to_kfp(job_file: str, host: str, experiment: str, run_name: str, pipeline_root: str,
                  enable_caching: bool, dry_run: bool = False, client_factory: Callable[..., Any] | None = None):
    """Submits the compiled pipeline spec to a Kubeflow Pipelines v2 endpoint."""
    spec_file = pipeline_spec_file(job_file)
    if dry_run:
        return None
    if client_factory is None:
        import kfp

        client_factory = kfp.Client
    client = client_factory(host=host)
    return client.create_run_from_pipeline_package(
        spec_file, arguments={}, run_name=run_name, experiment_name=experiment,
        pipeline_root=pipeline_root, enable_caching=enable_caching,
    )


def _anonymous_credentials():
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        validate(args)
        config = config_from_args(args)
        require_kfp()
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    output_file = args.output_file or os.path.join(DEFAULT_OUTPUT_DIR, f"{config.pipeline_name}.json")
    compile_pipeline(config, args.image, output_file)
    print(f"Compiled {config.pipeline_name} for Kubeflow Pipelines v2 / Vertex AI: {output_file}")
    if args.submit:
        submission = Submission(
            project=args.project, region=args.region, pipeline_root=config.pipeline_root,
            display_name=config.pipeline_name, service_account=args.service_account, network=args.network,
            labels=_labels(args.label), enable_caching=args.enable_cache,
        )
        # A dry run needs no identity: anonymous credentials keep it from looking any up.
        credentials = _anonymous_credentials() if args.dry_run else None
        job = submit_to_vertex(output_file, submission, dry_run=args.dry_run, credentials=credentials)
        if args.dry_run:
            print(f"Dry run: Vertex AI PipelineJob {job.job_id} built for {args.project}/{args.region}, not sent.")
        else:
            print(f"Submitted to Vertex AI Pipelines: {job._dashboard_uri()}")
    elif args.kfp_host:
        result = submit_to_kfp(output_file, args.kfp_host, args.kfp_experiment, config.pipeline_name,
                               config.pipeline_root, args.enable_cache, dry_run=args.dry_run)
        if args.dry_run:
            print(f"Dry run: pipeline spec for {args.kfp_host} written, not sent.")
        else:
            print(f"Submitted to Kubeflow Pipelines: {args.kfp_host.rstrip('/')}/#/runs/details/{result.run_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
