"""Submits a compiled pipeline job to Vertex AI Pipelines or to a Kubeflow Pipelines v2
endpoint, or schedules it on Vertex AI Pipelines, with the real clients
(google-cloud-aiplatform, kfp); and the submission flags that say where it goes and how it
runs, checked before anything is compiled or sent.

Clients are imported and created when submitting, never at import; both can be pointed at
another endpoint (the tests use a local stand-in server and anonymous credentials).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import yaml

from pipeline.flag_errors import SettingsError
from pipeline.schedule import MAX_CONCURRENT_RUNS, Schedule, add_schedule_flags, check_schedule_flags, rfc3339

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

    from pipeline.config import PipelineConfig


def add_submission_flags(parser: argparse.ArgumentParser) -> None:
    """Where the compiled job goes (Vertex AI, a schedule there, or KFP) and the settings its runs take."""
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
    add_schedule_flags(submit)


def check_destination(args: argparse.Namespace) -> None:
    """The job goes one way: --submit, --schedule-cron, --kfp-host or --rehearse; --dry-run needs one that sends."""
    if args.submit and args.kfp_host:
        raise SettingsError("--submit (Vertex AI) and --kfp-host (Kubeflow) are exclusive: choose one")
    check_schedule_flags(args)
    if args.rehearse and (args.submit or args.kfp_host):
        raise SettingsError("--rehearse runs the job here; --submit/--kfp-host send it: choose one")
    if args.dry_run and not (args.submit or args.kfp_host or args.schedule_cron is not None):
        raise SettingsError("--dry-run only makes sense with --submit, --schedule-cron or --kfp-host")


def check_submission_values(args: argparse.Namespace) -> None:
    """Values the clients would refuse only after compiling: the KFP host's URL, the labels."""
    if args.kfp_host and not args.kfp_host.startswith(("http://", "https://")):
        raise SettingsError(f"--kfp-host must be an http(s):// URL, got {args.kfp_host!r}")
    parse_labels(args.label)


def parse_labels(pairs: Sequence[str]) -> dict[str, str]:
    """--label KEY=VALUE pairs as the job's labels."""
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SettingsError(f"--label expects KEY=VALUE, got {pair!r}")
        found[key] = value
    return found


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


def vertex_submission(args: argparse.Namespace, config: PipelineConfig) -> Submission:
    """The run settings --submit and --schedule-cron share."""
    return Submission(
        project=args.project,
        region=args.region,
        pipeline_root=config.pipeline_root,
        display_name=config.pipeline_name,
        service_account=args.service_account,
        network=args.network,
        labels=parse_labels(args.label),
        enable_caching=args.enable_cache,
    )


def vertex_credentials(args: argparse.Namespace) -> Credentials | None:
    """None: the client looks up the caller's identity. A dry run needs none: anonymous
    credentials keep it from looking any up."""
    return anonymous_credentials() if args.dry_run else None


def _vertex_job(job_file: str, submission: Submission, api_endpoint: str | None, credentials):
    """The Vertex AI PipelineJob a run or a schedule is made from: the compiled spec, its
    pipeline root, labels and caching choice."""
    from google.cloud import aiplatform

    aiplatform.init(
        project=submission.project,
        location=submission.region,
        credentials=credentials,
        api_endpoint=api_endpoint,
        api_transport="rest" if api_endpoint else None,
    )
    return aiplatform.PipelineJob(
        display_name=submission.display_name,
        template_path=job_file,
        pipeline_root=submission.pipeline_root,
        enable_caching=submission.enable_caching,
        labels=submission.labels or None,
        project=submission.project,
        location=submission.region,
        credentials=credentials,
    )


def submit_to_vertex(
    job_file: str, submission: Submission, dry_run: bool = False, api_endpoint: str | None = None, credentials=None
):
    """Creates the Vertex AI PipelineJob from the compiled file and submits it.

    ``api_endpoint``/``credentials`` point the real client elsewhere. Returns the job;
    with ``dry_run`` it is built but never sent.
    """
    job = _vertex_job(job_file, submission, api_endpoint, credentials)
    if not dry_run:
        job.submit(service_account=submission.service_account, network=submission.network)
    return job


def schedule_on_vertex(
    job_file: str,
    submission: Submission,
    schedule: Schedule,
    dry_run: bool = False,
    api_endpoint: str | None = None,
    credentials=None,
):
    """Creates a Vertex AI Pipelines schedule that runs the compiled job on ``schedule``.

    Every scheduled run is the same job, with the run settings ``submit_to_vertex`` uses
    (service account, network, labels, caching, pipeline root). Returns the
    ``PipelineJobSchedule``; with ``dry_run`` it is built but never sent.
    """
    from google.cloud import aiplatform

    job = _vertex_job(job_file, submission, api_endpoint, credentials)
    if dry_run:
        # What create_schedule builds before it sends (the job's spec, runtime config, labels).
        return aiplatform.PipelineJobSchedule(
            pipeline_job=job, display_name=schedule.display_name, credentials=credentials
        )
    # The job's labels need no help: the client copies them into the schedule's
    # createPipelineJobRequest.pipelineJob, so every scheduled run carries them.
    return job.create_schedule(
        display_name=schedule.display_name,
        cron=schedule.cron,
        start_time=rfc3339(schedule.start_time) if schedule.start_time else None,
        end_time=rfc3339(schedule.end_time) if schedule.end_time else None,
        max_run_count=schedule.max_run_count,
        max_concurrent_run_count=MAX_CONCURRENT_RUNS,
        service_account=submission.service_account,
        network=submission.network,
    )


def anonymous_credentials():
    """Credentials that look nothing up: a dry run needs no identity."""
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()


def pipeline_spec_file(job_file: str) -> str:
    """KFP's client takes a bare PipelineSpec; the compiled job wraps one. Writes it beside."""
    with open(job_file) as f:
        job = json.load(f)
    spec_file = os.path.splitext(job_file)[0] + ".pipeline_spec.yaml"
    with open(spec_file, "w") as f:
        yaml.safe_dump(job["pipelineSpec"], f, sort_keys=True)
    return spec_file


def submit_to_kfp(
    job_file: str,
    host: str,
    experiment: str,
    run_name: str,
    pipeline_root: str,
    enable_caching: bool,
    dry_run: bool = False,
    client_factory: Callable[..., Any] | None = None,
):
    """Submits the compiled pipeline spec to a Kubeflow Pipelines v2 endpoint; returns the
    run (None for a dry run, which only writes the spec file)."""
    spec_file = pipeline_spec_file(job_file)
    if dry_run:
        return None
    if client_factory is None:
        import kfp

        client_factory = kfp.Client
    client = client_factory(host=host)
    return client.create_run_from_pipeline_package(
        spec_file,
        arguments={},
        run_name=run_name,
        experiment_name=experiment,
        pipeline_root=pipeline_root,
        enable_caching=enable_caching,
    )
