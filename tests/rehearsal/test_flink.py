"""A rehearsed job on a Flink cluster: which cluster its tasks name, the tasks reaching its
JobManager past the proxy, and the cluster's workers reaching the stand-ins through the
proxy at the cluster's address with the same files as the tasks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from rehearsal import flink
from rehearsal.cloud.standins import StandIns
from rehearsal.job import Task

# A loopback address other than 127.0.0.1 stands for this machine's address on a cluster's network.
CLUSTER_SIDE = "127.0.0.2"


def container_task(name: str, *args: str) -> Task:
    return Task(name, {}, {}, {"container": {"image": "pipeline", "command": ["python"], "args": list(args)}})


def test_the_master_is_the_one_a_task_sends_its_beam_pipeline_to():
    tasks = [
        container_task("Trainer", "--executor_class_path", "x"),
        container_task("CsvExampleGen", "--runner=FlinkRunner", "--flink_master=10.89.7.2:8081"),
    ]
    assert flink.master_host(tasks) == "10.89.7.2"
    assert flink.master_host([container_task("Transform", "--flink_master=http://jm.example:8081")]) == "jm.example"
    assert flink.master_host(tasks[:1]) is None


def test_the_tasks_reach_the_master_past_the_proxy_and_google_through_it():
    env = {"https_proxy": "http://127.0.0.1:5", "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"}
    reaching = flink.tasks_environment(env, "10.89.7.2")
    assert reaching == {**env, "no_proxy": "127.0.0.1,localhost,10.89.7.2", "NO_PROXY": "127.0.0.1,localhost,10.89.7.2"}
    assert flink.tasks_environment(env, None) == env


def test_this_machines_address_toward_a_host_is_the_one_its_route_leaves_from():
    assert flink.address_toward("127.0.0.1") == "127.0.0.1"


@pytest.fixture
def listening_for_the_cluster(tmp_path):
    """The stand-ins of a rehearsal in ``tmp_path``, the proxy also at the cluster's side."""
    try:
        with StandIns(
            str(tmp_path / "cloud"),
            str(tmp_path / "gcs"),
            "rehearsal",
            also_listen=((CLUSTER_SIDE, flink.WORKERS_PROXY_PORT),),
        ) as stand_ins:
            yield stand_ins
    except RuntimeError as error:
        if "cannot listen" in str(error):
            pytest.skip(f"{CLUSTER_SIDE}:{flink.WORKERS_PROXY_PORT} is taken here: {error}")
        raise


def test_the_workers_environment_reaches_the_stand_ins_at_the_clusters_address(listening_for_the_cluster, tmp_path):
    workers = flink.workers_environment(str(tmp_path), CLUSTER_SIDE)
    tasks = listening_for_the_cluster.environment()
    assert workers["https_proxy"] == f"http://{CLUSTER_SIDE}:{flink.WORKERS_PROXY_PORT}"
    assert {k: v for k, v in workers.items() if "proxy" not in k.lower()} == {
        k: v for k, v in tasks.items() if "proxy" not in k.lower()
    }
    code = (
        "from google.cloud import storage\n"
        "storage.Client().bucket('pipeline-rehearsal').blob('out/x.txt').upload_from_string('from a worker')\n"
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **workers}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "gcs" / "pipeline-rehearsal" / "out" / "x.txt").read_text() == "from a worker"


def test_a_taken_cluster_address_fails_the_stand_ins_naming_it(tmp_path):
    with socket.socket() as taken:
        taken.bind((CLUSTER_SIDE, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"cannot listen at.*{port}"):
            with StandIns(str(tmp_path / "cloud"), str(tmp_path / "gcs"), "p", also_listen=((CLUSTER_SIDE, port),)):
                pass
