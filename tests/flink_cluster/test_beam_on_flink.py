"""A Beam Python pipeline on the real Flink cluster: the cluster started once for the
module (its own namespaces and subnet, beside any cluster `make flink` started), a word
count with a GroupByKey submitted through Beam's Flink job server with the EXTERNAL
environment at parallelism 2, its output and the JobManager's record of it checked, then
the cluster stopped with nothing of it left."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
import uuid

import pytest

from flink_cluster import cluster, fetch, network
from rehearsal import podman

pytestmark = pytest.mark.slow

# The job is looked up by its name: anyone reaching the cluster's subnet may submit others.
JOB_NAME = f"word-count-{uuid.uuid4().hex[:8]}"
WORDS = ["a b c", "b c", "c d e f", "a a"]
REPEAT = 50
PIPELINE = textwrap.dedent(
    """
    import sys

    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    words, repeat, output = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
    with beam.Pipeline(options=PipelineOptions(sys.argv[4:])) as pipeline:
        (
            pipeline
            | beam.Create(words * repeat)
            | beam.FlatMap(str.split)
            | beam.Map(lambda word: (word, 1))
            | "CountWords" >> beam.GroupByKey()
            | beam.MapTuple(lambda word, ones: f"{word}\\t{sum(ones)}")
            | beam.io.WriteToText(output)
        )
    """
)


@pytest.fixture(scope="module")
def word_count(flink, job_server_jar, tmp_path_factory):
    """The pipeline's run: its output files' prefix (in the temp dir, which the cluster shares)."""
    directory = tmp_path_factory.mktemp("word_count")
    (directory / "pipeline.py").write_text(PIPELINE)
    output = directory / "out" / "counts"
    flags = [*cluster.pipeline_flags(flink, job_server_jar), f"--job_name={JOB_NAME}"]
    with open(directory / "client.log", "w") as log:
        run = subprocess.run(
            [sys.executable, str(directory / "pipeline.py"), ",".join(WORDS), str(REPEAT), str(output), *flags],
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    assert run.returncode == 0, (directory / "client.log").read_text()[-5000:]
    return output


def test_the_job_server_is_beams_flink_runner_at_its_stated_version(job_server_jar):
    attributes = fetch.launcher_attributes(job_server_jar)
    assert attributes["Implementation-Version"] == fetch.JOB_SERVER_BEAM_VERSION
    class_path = attributes["Class-Path"].split()
    assert f"lib/beam-runners-flink-1.19-{fetch.JOB_SERVER_BEAM_VERSION}.jar" in class_path
    assert all((job_server_jar.parent / jar).is_file() for jar in class_path)


def test_both_taskmanagers_registered_from_their_own_hosts(flink):
    assert cluster.registered(flink) == {host.address for host in flink.taskmanagers}
    overview = cluster.rest(flink, "/overview")
    assert overview["flink-version"] == fetch.FLINK_VERSION
    assert overview["taskmanagers"] == 2


def test_the_word_count_is_right(word_count):
    counts = collections.Counter()
    for shard in word_count.parent.glob(f"{word_count.name}*"):
        for line in shard.read_text().splitlines():
            word, count = line.split("\t")
            counts[word] += int(count)
    assert counts == collections.Counter(" ".join(WORDS * REPEAT).split())


@pytest.fixture(scope="module")
def job(flink, word_count) -> dict:
    """The JobManager's record of the pipeline's job."""
    (job,) = [job for job in cluster.rest(flink, "/jobs/overview")["jobs"] if job["name"].startswith(JOB_NAME)]
    return job


def test_the_jobmanager_lists_the_job_finished(job):
    assert job["state"] == "FINISHED"
    assert job["tasks"]["finished"] == job["tasks"]["total"] > 0


def test_the_grouping_ran_on_both_taskmanagers(flink, job):
    vertices = cluster.rest(flink, f"/jobs/{job['jid']}")["vertices"]
    (grouping,) = [vertex for vertex in vertices if "GroupReduce at CountWords" in vertex["name"]]
    subtasks = cluster.rest(flink, f"/jobs/{job['jid']}/vertices/{grouping['id']}")["subtasks"]
    assert sorted(subtask["host"] for subtask in subtasks) == sorted(host.address for host in flink.taskmanagers)


def test_each_taskmanagers_sdk_workers_ran_in_its_own_sidecar(flink, word_count):
    for host in flink.taskmanagers:
        logs = podman.run("logs", flink.container(host))
        assert "Starting worker with command ['/opt/apache/beam/boot'" in logs.stdout + logs.stderr


def test_stopping_leaves_nothing(flink, word_count):
    pids = set(cluster.recorded(flink)["pids"].values())
    pids |= {pid for host in flink.network.hosts for pid in network.pids(host)}
    assert len(pids) >= 3
    cluster.down(flink)
    assert cluster.leftovers(flink) == []
    assert [pid for pid in pids if cluster.alive(pid)] == []
    assert not {host.namespace for host in flink.network.hosts} & network.namespaces()
