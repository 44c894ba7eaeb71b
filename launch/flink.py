"""Apache Flink for the Beam-based components (ExampleGen, StatisticsGen, Transform,
Evaluator): the --flink flags, their checks, the checks of the cluster and the job server
before anything runs, and the Beam arguments they become (``PipelineConfig.extra_beam_args``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass

from launch.flag_errors import SettingsError, flag_value
from runtime import job_server_launcher

# The Flink versions this Beam's FlinkRunner has a job server for
# (apache_beam.options.pipeline_options.FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS).
SUPPORTED_FLINK_VERSIONS = ("1.17", "1.18", "1.19")
DEFAULT_FLINK_VERSION = "1.19"
# Each TaskManager's Python SDK workers: Beam's worker pool in the project's image, a
# sidecar listening on the TaskManager's own localhost.
DEFAULT_WORKER_POOL = "localhost:50000"
# How long a TaskManager keeps a job's SDK workers once no stage uses them, for the job's next
# stage to take (Beam's --environment_cache_millis; the default, 0, stops them as each stage
# ends). Beam keeps them only where Flink loads its runner from its own class path, as the
# project's cluster does (flink_cluster.cluster.write_lib); elsewhere it changes nothing.
ENVIRONMENT_CACHE_MILLIS = 60_000
# Beam runs `pip freeze` at each submission and stages its output for the SDK workers to log;
# every worker of a job submitted as a jar then fails to fetch it, retrying for 8 s before it
# starts (apache/beam#32743). The workers run the project's image: nothing to compare.
NO_SUBMISSION_ENVIRONMENT = "--experiments=disable_logging_submission_environment"
# The image `make image` builds here, which `make flink` starts beside each TaskManager.
LOCAL_IMAGE = "localhost/pipeline:rehearsal"
# Job server versions other than the SDK's own that run this pipeline with the same results
# (tests/flink_cluster): Maven Central serves no Flink job server of Beam 2.61 here.
PROVEN_JOB_SERVER_VERSIONS = ("2.62.0",)
_ADDRESS = re.compile(r"^(https?://)?[A-Za-z0-9_.-]+:\d{1,5}$")
_JOB_SERVER_POM = re.compile(r"META-INF/maven/org\.apache\.beam/beam-runners-flink-(\d+\.\d+)/pom\.properties$")


def add_flink_flags(parser: argparse.ArgumentParser) -> None:
    """The --flink flags: which cluster, how parallel, which job server, where the SDK workers are."""
    flink = parser.add_argument_group("Apache Flink for the Beam-based components")
    flink.add_argument(
        "--flink-master",
        metavar="HOST:PORT",
        help="Run ExampleGen, StatisticsGen, Transform and the Evaluator on this Flink session cluster "
        "(its JobManager's REST address) instead of in this process or the task's container.",
    )
    flink.add_argument(
        "--flink-parallelism",
        type=int,
        help="Parallelism of each Beam job (default: the cluster's; a compiled job, whose jobs run as jars "
        "through the cluster's REST API, must give it).",
    )
    flink.add_argument(
        "--flink-job-server-jar",
        metavar="PATH_OR_URL",
        help="Beam's Flink job server jar, started for each Beam job (default: Beam downloads "
        "beam-runners-flink-<version>-job-server of its own version from Maven Central).",
    )
    flink.add_argument(
        "--flink-job-endpoint",
        metavar="HOST:PORT",
        help="A Beam job server already running for the cluster, instead of one started from the jar.",
    )
    flink.add_argument(
        "--flink-worker-pool",
        metavar="HOST:PORT",
        default=DEFAULT_WORKER_POOL,
        help="Beam's SDK worker pool as each TaskManager reaches it: the project's image started with "
        "`--worker_pool` beside each TaskManager. (default: %(default)s)",
    )
    flink.add_argument(
        "--flink-sdk-image",
        metavar="IMAGE",
        help="The image the worker pool runs: the project's image, which holds TFX and the project's code, so "
        "nothing is staged for the workers (default: --image for a compiled job, else " + LOCAL_IMAGE + ").",
    )
    flink.add_argument(
        "--flink-version",
        default=DEFAULT_FLINK_VERSION,
        choices=SUPPORTED_FLINK_VERSIONS,
        help="The cluster's Flink minor version, which names the job server. (default: %(default)s)",
    )


def check_flink_flags(args: argparse.Namespace) -> None:
    """The flags' values, without reaching the cluster."""
    if not args.flink_master:
        for flag in ("--flink-parallelism", "--flink-job-server-jar", "--flink-job-endpoint", "--flink-sdk-image"):
            if flag_value(args, flag) is not None:
                raise SettingsError(f"{flag} needs --flink-master (the cluster's JobManager REST address)")
        return
    for flag, value in (
        ("--flink-master", args.flink_master),
        ("--flink-job-endpoint", args.flink_job_endpoint),
        ("--flink-worker-pool", args.flink_worker_pool),
    ):
        if value is not None and not _ADDRESS.match(value):
            raise SettingsError(f"{flag} must be HOST:PORT, got {value!r}")
    if args.flink_parallelism is not None and args.flink_parallelism < 1:
        raise SettingsError(f"--flink-parallelism must be at least 1, got {args.flink_parallelism}")
    if args.flink_job_server_jar and args.flink_job_endpoint:
        raise SettingsError("give --flink-job-server-jar or --flink-job-endpoint, not both: one job server")
    jar = args.flink_job_server_jar
    if jar and "://" not in jar and not os.path.isfile(jar):
        raise SettingsError(f"--flink-job-server-jar {jar}: there is no such file; give the jar's path or URL")


def flink_args(args: argparse.Namespace, image: str = LOCAL_IMAGE) -> tuple[str, ...]:
    """Beam pipeline arguments that move the Beam-based components onto the Flink cluster. The
    workers' image is named so that TFX stages nothing for them: its own sdist, which it
    builds otherwise, needs PyPI on every worker to install and duplicates the image's TFX."""
    if not args.flink_master:
        return ()
    if args.flink_job_endpoint:
        runner = ("--runner=PortableRunner", f"--job_endpoint={args.flink_job_endpoint}")
    else:
        master, version = args.flink_master, args.flink_version
        runner = ("--runner=FlinkRunner", f"--flink_master={master}", f"--flink_version={version}")
        if args.flink_job_server_jar:
            runner += (f"--flink_job_server_jar={args.flink_job_server_jar}",)
    parallelism = (f"--parallelism={args.flink_parallelism}",) if args.flink_parallelism else ()
    workers = (
        "--environment_type=EXTERNAL",
        f"--environment_config={args.flink_worker_pool}",
        f"--environment_cache_millis={ENVIRONMENT_CACHE_MILLIS}",
        f"--sdk_container_image={args.flink_sdk_image or image}",
        NO_SUBMISSION_ENVIRONMENT,
    )
    return (*runner, *parallelism, *workers)


def local_flink_args(args: argparse.Namespace) -> tuple[str, ...]:
    """``flink_args`` for a run on this machine, whose FlinkRunner starts Beam's job server
    here: on Linux in a JVM that ends with the run however the run ends
    (``runtime.job_server_launcher``; elsewhere Beam's own ``java``)."""
    beam_args = flink_args(args)
    if beam_args and not args.flink_job_endpoint and sys.platform == "linux":
        beam_args += (f"--job_server_java_launcher={job_server_launcher.LAUNCHER}",)
    return beam_args


def check_compiled_job_flink_flags(args: argparse.Namespace) -> None:
    """A compiled job's tasks read the job server jar from Cloud Storage or the web, not this
    disk; the jars they submit through the cluster's REST API run at Flink's parallelism of a
    jar run, 1, not the cluster's default, unless the job names one."""
    jar = args.flink_job_server_jar
    if jar and "://" not in jar:
        raise SettingsError(
            f"--flink-job-server-jar {jar}: the job's tasks cannot read this machine's disk; "
            "give a gs:// or https:// URL, or leave it out for Beam's own from Maven Central"
        )
    check_flink_flags(args)
    if args.flink_master and not args.flink_job_endpoint and args.flink_parallelism is None:
        raise SettingsError(
            "--flink-master needs --flink-parallelism in a compiled job: its Beam jobs are submitted as jars "
            "through the cluster's REST API, which runs them on one slot otherwise"
        )


def compiled_job_flink_args(args: argparse.Namespace) -> tuple[str, ...]:
    """The Flink arguments for a compiled job's tasks, whose image has no Java to start a job
    server: unless one is reached at --flink-job-endpoint, Beam builds the job's jar from the
    job server jar and submits it through the cluster's REST API (``--flink_submit_uber_jar``)."""
    beam_args = flink_args(args, args.image)
    if beam_args and not args.flink_job_endpoint:
        beam_args += ("--flink_submit_uber_jar",)
    return beam_args


@dataclass(frozen=True)
class JobServer:
    """What a job server jar is: Beam's version, and the Flink minor version it runs on."""

    beam_version: str
    flink_version: str


def read_job_server(jar: str) -> JobServer:
    """The Beam and Flink versions of a Flink job server jar, from Beam's Maven metadata in it
    (or in the jars its manifest's Class-Path names)."""
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            found = _JOB_SERVER_POM.search(name)
            if found:
                properties = archive.read(name).decode()
                version = re.search(r"^version=(.+)$", properties, re.MULTILINE)
                return JobServer(version.group(1).strip() if version else "unknown", found.group(1))
        class_path = _manifest_class_path(archive)
    for entry in class_path:
        if re.search(r"beam-runners-flink-\d+\.\d+-\d", entry):
            return read_job_server(os.path.join(os.path.dirname(jar), entry))
    raise SettingsError(f"--flink-job-server-jar {jar}: not a Beam Flink job server (no beam-runners-flink in it)")


def _manifest_class_path(archive: zipfile.ZipFile) -> list[str]:
    try:
        manifest = archive.read("META-INF/MANIFEST.MF").decode()
    except KeyError:
        return []
    unfolded = manifest.replace("\r\n ", "").replace("\n ", "")
    found = re.search(r"^Class-Path: (.+)$", unfolded, re.MULTILINE)
    return found.group(1).split() if found else []


def check_job_server(jar: str, sdk_version: str, flink_version: str) -> JobServer:
    """A job server of this SDK's Beam version (or one proved here) for the cluster's Flink."""
    server = read_job_server(jar)
    if server.beam_version != sdk_version and server.beam_version not in PROVEN_JOB_SERVER_VERSIONS:
        raise SettingsError(
            f"--flink-job-server-jar {jar} is Beam {server.beam_version}'s job server; this pipeline's Beam is "
            f"{sdk_version}: give beam-runners-flink-{flink_version}-job-server-{sdk_version}.jar"
        )
    if server.flink_version != flink_version:
        raise SettingsError(
            f"--flink-job-server-jar {jar} runs on Flink {server.flink_version}, the cluster is Flink {flink_version}: "
            f"give the job server for Flink {flink_version}"
        )
    return server


def cluster_flink_version(master: str, timeout: float = 10.0) -> str:
    """The Flink version the JobManager at ``master`` reports (its REST API's /config)."""
    url = f"{master if master.startswith('http') else 'http://' + master}/config"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            version = json.load(response).get("flink-version", "")
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise SettingsError(
            f"--flink-master {master}: no Flink JobManager answers there ({reason}); start the cluster "
            "(`make flink` here) or give its JobManager's REST address"
        ) from None
    if not version:
        raise SettingsError(f"--flink-master {master}: what answers there is not a Flink JobManager's REST API")
    return version


def check_cluster(args: argparse.Namespace, sdk_version: str) -> None:
    """Before anything runs: the cluster answers, Beam supports its Flink, and the job server
    jar (when given as a local file) is of this Beam and that Flink."""
    if not args.flink_master or args.flink_job_endpoint:
        return
    version = cluster_flink_version(args.flink_master)
    minor = ".".join(version.split(".")[:2])
    if minor not in SUPPORTED_FLINK_VERSIONS:
        raise SettingsError(
            f"--flink-master {args.flink_master} runs Flink {version}, which Beam {sdk_version} does not support "
            f"(it supports Flink {', '.join(SUPPORTED_FLINK_VERSIONS)}): run one of those"
        )
    if minor != args.flink_version:
        raise SettingsError(
            f"--flink-master {args.flink_master} runs Flink {version}: give --flink-version {minor} "
            f"(it names the job server, now {args.flink_version})"
        )
    jar = args.flink_job_server_jar
    if jar and "://" not in jar:
        check_job_server(jar, sdk_version, minor)
