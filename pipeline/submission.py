"""Submits a compiled pipeline job to Vertex AI Pipelines or to a Kubeflow Pipelines v2
endpoint, or schedules it on Vertex AI Pipelines, with the real clients
(google-cloud-aiplatform, kfp).

Clients are imported and created when submitting, never at import; both can be pointed at
another endpoint (the tests use a local stand-in server and anonymous credentials).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import zoneinfo
from collections.abc import Callable
from typing import Any

import yaml


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


# Vertex AI takes unix-cron: five fields, optionally after a TZ=/CRON_TZ= IANA time zone.
CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,-]+")
_CRON_EXAMPLE = "'TZ=Europe/Berlin 0 3 * * 1' (Mondays at 03:00 Berlin time)"


def check_cron(cron: str) -> str:
    """The cron expression as Vertex AI takes it, whitespace collapsed; a ValueError saying
    what is wrong otherwise, so a typo fails here and not at Vertex's API."""
    fields = cron.split()
    prefix = fields[:1] if fields and fields[0].startswith(("TZ=", "CRON_TZ=")) else []
    if prefix:
        zone = fields.pop(0).partition("=")[2]
        try:
            zoneinfo.ZoneInfo(zone)
        except (ValueError, zoneinfo.ZoneInfoNotFoundError):
            raise ValueError(f"{zone!r} in {cron!r} is not an IANA time zone (e.g. Europe/Berlin, UTC)") from None
    if len(fields) != len(CRON_FIELDS):
        raise ValueError(
            f"{cron!r} has {len(fields)} fields; Vertex AI takes {len(CRON_FIELDS)} ({' '.join(CRON_FIELDS)}), "
            f"optionally after TZ=<IANA time zone>, e.g. {_CRON_EXAMPLE}"
        )
    for name, field in zip(CRON_FIELDS, fields, strict=True):
        if not _CRON_FIELD.fullmatch(field):
            raise ValueError(f"{cron!r}: the {name} field {field!r} is not unix-cron (digits, names, * / , -)")
    return " ".join(prefix + fields)


# At most one scheduled run at a time: two runs of one pipeline would read the same newest
# data and race to bless and push a model. A run due while one is going is skipped, not queued.
MAX_CONCURRENT_RUNS = 1


@dataclasses.dataclass(frozen=True)
class Schedule:
    """When Vertex AI Pipelines starts runs of the compiled job (``check_cron`` checks the
    cron; times are timezone-aware)."""

    cron: str
    display_name: str
    start_time: datetime.datetime | None = None
    end_time: datetime.datetime | None = None
    max_run_count: int | None = None


def schedule_display_name(pipeline_name: str) -> str:
    """The schedule's display name: the pipeline's, marked as its schedule (Vertex allows 128 characters)."""
    suffix = "-schedule"
    return pipeline_name[: 128 - len(suffix)] + suffix


def rfc3339(when: datetime.datetime) -> str:
    """A time as Vertex's API takes it: UTC, ``Z``."""
    return when.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


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
