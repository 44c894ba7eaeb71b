"""Submits a compiled pipeline job to Vertex AI Pipelines or to a Kubeflow Pipelines v2
endpoint, with the real clients (google-cloud-aiplatform, kfp).

Clients are imported and created when submitting, never at import; both can be pointed at
another endpoint (the tests use a local stand-in server and anonymous credentials).
"""

from __future__ import annotations

import dataclasses
import json
import os
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


def submit_to_vertex(
    job_file: str, submission: Submission, dry_run: bool = False, api_endpoint: str | None = None, credentials=None
):
    """Creates the Vertex AI PipelineJob from the compiled file and submits it.

    ``api_endpoint``/``credentials`` point the real client elsewhere. Returns the job;
    with ``dry_run`` it is built but never sent.
    """
    from google.cloud import aiplatform

    aiplatform.init(
        project=submission.project,
        location=submission.region,
        credentials=credentials,
        api_endpoint=api_endpoint,
        api_transport="rest" if api_endpoint else None,
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
