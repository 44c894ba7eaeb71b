"""Sends the compiled job with the real clients (google-cloud-aiplatform, kfp): submitted to or
scheduled on Vertex AI Pipelines, or sent to a Kubeflow Pipelines v2 endpoint (a multi-user
one with a namespace and a token file: docs/kubeflow.md); and the submission flags. Clients
are imported and created when sending, never at import.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import yaml

from launch.flag_errors import SettingsError
from launch.schedule import MAX_CONCURRENT_RUNS, Schedule, add_schedule_flags, check_schedule_flags, rfc3339

if TYPE_CHECKING:
    from google.auth.credentials import Credentials

    from pipeline.config import PipelineConfig

# Where kfp's ServiceAccountTokenVolumeCredentials reads the projected token when given no path
# (kfp.client.KF_PIPELINES_SA_TOKEN_ENV, then kfp.client.KF_PIPELINES_SA_TOKEN_PATH): spelled
# here for the flags' help; the lookup itself reads kfp's own constants.
KFP_TOKEN_PATH_ENV = "KF_PIPELINES_SA_TOKEN_PATH"
IN_CLUSTER_TOKEN_PATH = "/var/run/secrets/kubeflow/pipelines/token"
# A Kubernetes namespace is a DNS-1123 label.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


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
    submit.add_argument("--kfp-experiment", default="Default", help="KFP experiment to run in. (default: %(default)s)")
    submit.add_argument(
        "--kfp-namespace",
        default=None,
        help="With --kfp-host on a multi-user Kubeflow: your profile namespace (e.g. kubeflow-user-example-com), "
        "given to the kfp client (kfp.Client(namespace=...)); --kfp-experiment is looked up and, if missing, "
        "created in it, and the run goes there. Without it: kfp's own choice (the namespace in "
        "~/.config/kfp/context.json, else on a multi-user deployment the namespace of the pod it runs in).",
    )
    submit.add_argument(
        "--kfp-token-file",
        default=None,
        metavar="PATH",
        help="With --kfp-host: a file holding the bearer token the client sends as 'Authorization: Bearer "
        "<token>' (e.g. kubectl -n NAMESPACE create token default-editor > PATH); read through kfp's "
        "ServiceAccountTokenVolumeCredentials on each request, never printed. Without it, inside a Kubeflow "
        f"pod: the projected token at ${KFP_TOKEN_PATH_ENV} or {IN_CLUSTER_TOKEN_PATH}, when there is one; "
        "otherwise no token (a single-user or port-forwarded deployment).",
    )
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
    """Values the clients would refuse only after compiling: the KFP host's URL, namespace and
    token, the labels."""
    if args.kfp_host and not args.kfp_host.startswith(("http://", "https://")):
        raise SettingsError(f"--kfp-host must be an http(s):// URL, got {args.kfp_host!r}")
    kfp_access(args)
    parse_labels(args.label)


@dataclasses.dataclass(frozen=True)
class KfpAccess:
    """Who the kfp client is on a multi-user Kubeflow: the profile namespace, and where its
    bearer token is read from (``token_file``; with ``in_cluster``, the projected token kfp
    finds itself). Holds paths, never a token."""

    namespace: str | None = None
    token_file: str | None = None
    in_cluster: bool = False

    def client_kwargs(self) -> dict[str, Any]:
        """kfp.Client's own parameters for these settings (none when there are none)."""
        kwargs: dict[str, Any] = {}
        if self.namespace:
            kwargs["namespace"] = self.namespace
        if self.token_file:
            from kfp.client import ServiceAccountTokenVolumeCredentials

            # path=None: kfp's own lookup ($KF_PIPELINES_SA_TOKEN_PATH, then its default path).
            kwargs["credentials"] = ServiceAccountTokenVolumeCredentials(
                path=None if self.in_cluster else self.token_file
            )
        return kwargs


def kfp_access(args: argparse.Namespace) -> KfpAccess:
    """--kfp-namespace and the token (--kfp-token-file, else the in-cluster one), checked:
    each problem is one line naming its flag (or kfp's environment variable)."""
    namespace, token_file = args.kfp_namespace, args.kfp_token_file
    for flag, value in (("--kfp-namespace", namespace), ("--kfp-token-file", token_file)):
        if value is not None and not args.kfp_host:
            raise SettingsError(f"{flag} is for a Kubeflow endpoint: it needs --kfp-host")
    if not args.kfp_host:
        return KfpAccess()
    if namespace is not None and not _NAMESPACE.fullmatch(namespace):
        raise SettingsError(
            f"--kfp-namespace must be a Kubernetes namespace (lowercase letters, digits and '-', starting and "
            f"ending with a letter or digit, at most 63 characters), got {namespace!r}"
        )
    if token_file is not None:
        _check_token_file(token_file, "--kfp-token-file")
        return KfpAccess(namespace=namespace, token_file=token_file)
    found = in_cluster_token()
    if found is not None:
        path, named_by, fix = found
        _check_token_file(path, named_by, fix)
        return KfpAccess(namespace=namespace, token_file=path, in_cluster=True)
    return KfpAccess(namespace=namespace)


def in_cluster_token() -> tuple[str, str, str] | None:
    """The projected service-account token kfp's ServiceAccountTokenVolumeCredentials reads
    when given no path, what named it and the fix should it not hold a token:
    ``$KF_PIPELINES_SA_TOKEN_PATH`` (which must then be readable), else kfp's default path
    when this runs in a pod that has it mounted; None otherwise."""
    try:
        from kfp import client as kfp_client
    except ImportError:  # the runner says kfp is missing, after the checks
        return None
    configured = os.environ.get(kfp_client.KF_PIPELINES_SA_TOKEN_ENV)
    if configured:
        env = kfp_client.KF_PIPELINES_SA_TOKEN_ENV
        return configured, f"${env}", f"give --kfp-token-file, or unset {env}"
    default = kfp_client.KF_PIPELINES_SA_TOKEN_PATH
    if os.path.exists(default):
        return default, "the in-cluster token", "give --kfp-token-file"
    return None


def _check_token_file(path: str, named_by: str, fix: str = "") -> None:
    """A readable file holding one bearer token, as kfp reads it (stripped). The message names
    the file and what named it, never what is in it."""
    try:
        with open(path) as f:
            token = f.read().strip()
    except (OSError, UnicodeDecodeError) as err:
        reason = (err.strerror or type(err).__name__) if isinstance(err, OSError) else "not a text file"
        problem = f"cannot read {path} ({reason})"
    else:
        if token and not any(c.isspace() for c in token):
            return
        problem = f"{path} is empty" if not token else f"{path} holds more than one line or word, not one token"
    raise SettingsError(f"{named_by}: {problem}" + (f"; {fix}" if fix else ""))


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
    access: KfpAccess | None = None,
):
    """Submits the compiled pipeline spec to a Kubeflow Pipelines v2 endpoint; returns the
    run (None for a dry run, which only writes the spec file).

    ``access`` (``kfp_access(args)``): the profile namespace and bearer token of a multi-user
    Kubeflow, as kfp.Client's ``namespace`` and ``credentials``; the namespace also goes to
    the run call, which looks the experiment up (and creates it) there. None: the client's
    defaults.
    """
    spec_file = pipeline_spec_file(job_file)
    if dry_run:
        return None
    if client_factory is None:
        import kfp

        client_factory = kfp.Client
    access = access or KfpAccess()
    client = client_factory(host=host, **access.client_kwargs())
    return client.create_run_from_pipeline_package(
        spec_file,
        arguments={},
        run_name=run_name,
        experiment_name=experiment,
        # kfp.Client ignores namespace="kubeflow" (its default's value); said again here, every
        # namespace reaches the experiment's lookup and creation.
        namespace=access.namespace,
        pipeline_root=pipeline_root,
        enable_caching=enable_caching,
    )
