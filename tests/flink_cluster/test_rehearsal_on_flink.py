"""The compiled job rehearsed on the real Flink cluster: each Beam component's task (the
project's image, no Java) reads the fat job server jar from the stand-in Cloud Storage,
builds Beam's uber jar from it and submits that through the cluster's REST API
(``--flink_submit_uber_jar``); the job's Beam work runs on the TaskManagers' SDK workers,
which read and write the job's gs:// paths through the rehearsal's proxy at the cluster's
gateway, started with the variables ``python -m flink_cluster up --rehearsal-root`` gives."""

from __future__ import annotations

import glob
import json
import re

import pytest

import kubeflow_runner
from flink_cluster import cluster, fetch
from rehearsal import flink as rehearsed_on_flink
from rehearsal.runner import RECORD_FILE
from tests.support.problems import SHIPPED_DIRS
from tests.support.rehearsals import BUCKET, local_uri, rehearsal_argv
from tests.support.runs import SMALL_RUN

pytestmark = pytest.mark.slow

BEAM_COMPONENTS = ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator")


@pytest.fixture(scope="module")
def rehearsal_root(tmp_path_factory):
    """In the temp dir, which the cluster shares: the stand-ins' certificate and credentials."""
    return tmp_path_factory.mktemp("rehearsal")


@pytest.fixture(scope="module")
def cluster_settings(rehearsal_root):
    def reaching_the_stand_ins(network):
        return {
            "sidecar_env": tuple(rehearsed_on_flink.workers_environment(str(rehearsal_root), network.gateway).items())
        }

    return reaching_the_stand_ins


@pytest.fixture(scope="module")
def fat_jar():
    try:
        return fetch.fetch_fat_job_server(progress=lambda line: None)
    except fetch.ChecksumError:
        raise
    except (OSError, fetch.FetchError) as error:
        pytest.skip(f"the job server could not be fetched or shaded: {error}")


@pytest.fixture(scope="module")
def rehearsed(flink, fat_jar, rehearsal_root):
    """The taxi job on its embedded data, rehearsed on the cluster: its exit code, record, jar URI."""
    jar_uri = f"{BUCKET}/jars/{fat_jar.name}"
    # Parallelism given: Flink's REST API runs a jar at parallelism 1 unless told otherwise.
    flags = ["--flink-master", flink.master, "--flink-parallelism", str(flink.parallelism)]
    flags += ["--flink-job-server-jar", jar_uri, "--rehearse-gcs", f"{jar_uri}={fat_jar}"]
    code = kubeflow_runner.main(rehearsal_argv(rehearsal_root, SHIPPED_DIRS["taxi"], *SMALL_RUN, *flags))
    (record_file,) = glob.glob(str(rehearsal_root / "logs" / "*" / RECORD_FILE))
    with open(record_file) as f:
        return code, json.load(f), jar_uri


def test_the_rehearsal_on_the_cluster_completes_to_a_pushed_model(rehearsed, rehearsal_root):
    code, record, _ = rehearsed
    assert code == 0
    tasks = {task["name"]: task for task in record["tasks"]}
    assert all(task["state"] == "SUCCEEDED" for task in tasks.values()), tasks
    assert tasks["Evaluator"]["outputs"]["blessing"][0]["metadata"]["blessed"] == 1
    pushed = tasks["Pusher"]["outputs"]["pushed_model"][0]["metadata"]
    assert pushed["pushed"] == 1.0
    assert pushed["pushed_destination"].startswith(f"{BUCKET}/out/serving_model/")
    examples = local_uri(rehearsal_root, tasks["CsvExampleGen"]["outputs"]["examples"][0]["uri"])
    assert glob.glob(f"{examples}/Split-train/*.gz")


def submitted_job(rehearsal_root, task: str) -> str:
    """The Flink job ``task`` submitted, as Beam's uber jar job server logged it."""
    (log,) = glob.glob(str(rehearsal_root / "logs" / "*" / f"{task}.log"))
    with open(log) as f:
        jobs = re.findall(r"Started Flink job as ([0-9a-f]{32})", f.read())
    assert len(jobs) == 1, (task, jobs)
    return jobs[0]


def test_every_beam_component_is_a_finished_jar_job_of_the_cluster_on_its_taskmanagers(
    flink, rehearsed, rehearsal_root
):
    _, _, jar_uri = rehearsed
    states = {job["jid"]: job["state"] for job in cluster.rest(flink, "/jobs/overview")["jobs"]}
    hosts = set()
    for task in BEAM_COMPONENTS:
        job = submitted_job(rehearsal_root, task)
        assert states.get(job) == "FINISHED", (task, job, states)
        options = cluster.rest(flink, f"/jobs/{job}/config")["execution-config"]["user-config"]
        assert (options["flinkSubmitUberJar"], options["flinkJobServerJar"]) == ("true", jar_uri)
        vertices = cluster.rest(flink, f"/jobs/{job}")["vertices"]
        hosts |= {
            subtask["host"]
            for vertex in vertices
            for subtask in cluster.rest(flink, f"/jobs/{job}/vertices/{vertex['id']}")["subtasks"]
        }
    assert hosts == {host.address for host in flink.taskmanagers}
    # Beam deletes each job's uploaded jar once the job has ended.
    assert cluster.rest(flink, "/jars")["files"] == []
