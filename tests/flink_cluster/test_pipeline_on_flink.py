"""Beam and the whole pipeline on one real Flink cluster, started once for the module (its own
namespaces and subnet, its SDK workers given the rehearsal's variables to reach the stand-ins).
In this order (the module's stages, conftest.py): a rolling window of spans read by TFX's
executor on the cluster, through Beam's job server; the taxi job rehearsed as
Vertex runs it (each Beam component a jar submitted through the REST API) beside the same
problem on the DirectRunner (``local_runner.py``), their artifacts compared; then, one
TaskManager killed in the middle of a job, the penguins with ``local_runner.py
--flink-master`` against the DirectRunner; last, the cluster stopped with nothing left."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import kubeflow_runner
from flink_cluster import cluster, fetch, network
from rehearsal import flink as rehearsed_on_flink
from rehearsal import podman
from rehearsal.runner import RECORD_FILE
from runtime.processes import alive
from tests.support.flink_parts import fetched
from tests.support.problems import SHIPPED_DIRS
from tests.support.rehearsals import BUCKET, local_uri, rehearsal_argv

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# After the taxi's tests: the penguins' run loses a TaskManager, the stop ends the cluster.
LOSES_A_TASKMANAGER = pytest.mark.losing_a_taskmanager
PROBLEMS = ["taxi", pytest.param("penguins", marks=LOSES_A_TASKMANAGER)]
BEAM_COMPONENTS = ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator")
# The rehearsal trains as shipped, as the DirectRunner's run (the suite's ``full_local_output``)
# does: the metrics are compared.
REHEARSAL_FLAGS = ("--no-report",)
POLL_SECONDS = 0.5
# Training is not a Beam component: it reads Transform's output in the order Flink's tasks
# wrote it, so the model (and its metrics) differs by the run-to-run noise of training
# (docs/flink.md).
METRIC_TOLERANCE = 0.02
# Quantiles and means merged across tasks in another order: the last bits of a float.
STATISTICS_RTOL = 1e-6
TRANSFORM_RTOL, TRANSFORM_ATOL = 1e-4, 1e-5


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


def test_a_window_of_spans_is_read_on_the_cluster_as_locally(flink, job_server_jar, small_config, tmp_path_factory):
    """ExampleGen with a rolling window of two spans, its Beam pipeline on the cluster (TFX's
    executor, the older span's rows added), writes the rows the local fast path writes."""
    from components.csv_example_gen import WINDOW_PROPERTY
    from tests.components.test_csv_example_gen import _driven, _spans, _split_records, _windowed
    from tests.support.harness import run_component

    root = tmp_path_factory.mktemp("window")
    data = _spans(root / "data", 3)
    beam_args = cluster.pipeline_flags(flink, job_server_jar)
    component = _driven(_windowed(small_config, data, 2), data)
    on_flink = run_component(component, {}, str(root / "flink"), beam_args=beam_args)["examples"][0]
    local = run_component(component, {}, str(root / "local"))["examples"][0]
    assert on_flink.get_string_custom_property(WINDOW_PROPERTY) == "2-3"
    assert _split_records(on_flink) == _split_records(local)


@dataclass(frozen=True)
class Run:
    """A run of ``problem``: by ``local_runner.py`` (its pipeline's root), or the compiled job
    rehearsed (its rehearsal's root and record, its exit code)."""

    problem: str
    started_ms: int
    ended_ms: int
    pipeline: Path | None = None
    rehearsal_root: Path | None = None
    record: dict | None = None
    exit_code: int = 0

    @property
    def tasks(self) -> dict[str, dict]:
        return {task["name"]: task for task in self.record["tasks"]}


def artifact(run: Run, component: str, key: str) -> Path:
    """The directory of ``component``'s output ``key`` in ``run``."""
    if run.record is None:
        (path,) = glob.glob(str(run.pipeline / component / key / "*"))
        return Path(path)
    (output,) = run.tasks[component]["outputs"][key]
    return Path(local_uri(run.rehearsal_root, output["uri"]))


def now_ms() -> int:
    return int(time.time() * 1000)


def local_runner(problem: str, output_root: Path, *flags: str) -> list[str]:
    command = [sys.executable, "local_runner.py", "--problem", f"data/{problem}", "--no-report"]
    return [*command, "--output-root", str(output_root), *flags]


def start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finished(problem: str, process: subprocess.Popen, output_root: Path, started: int) -> Run:
    output, _ = process.communicate(timeout=1800)
    assert process.returncode == 0, output[-5000:]
    (pipeline,) = (output_root / "pipelines").iterdir()
    return Run(problem, started, now_ms(), pipeline=pipeline)


@pytest.fixture(scope="module")
def fat_jar():
    return fetched(fetch.fetch_fat_job_server, "the job server could not be fetched or shaded")


def jar_uri(fat_jar: Path) -> str:
    return f"{BUCKET}/jars/{fat_jar.name}"


@pytest.fixture(scope="module")
def taxi_runs(flink, fat_jar, rehearsal_root, full_local_output) -> tuple[Run, Run]:
    """The taxi on its embedded data: by ``local_runner.py`` on the DirectRunner with its
    defaults (the suite's run of them, which other modules compare with too), and the
    compiled job rehearsed on the cluster with the same settings. Each Beam component's task
    reads the fat job server jar from the stand-in Cloud Storage and submits Beam's uber jar
    through the REST API; the SDK workers reach the job's gs:// paths through the
    rehearsal's proxy at the cluster's gateway."""
    (pipeline,) = (Path(full_local_output) / "pipelines").iterdir()
    # Parallelism given: Flink's REST API runs a jar at parallelism 1 unless told otherwise.
    flags = ["--flink-master", flink.master, "--flink-parallelism", str(flink.parallelism)]
    flags += ["--flink-job-server-jar", jar_uri(fat_jar), "--rehearse-gcs", f"{jar_uri(fat_jar)}={fat_jar}"]
    started = now_ms()
    code = kubeflow_runner.main(rehearsal_argv(rehearsal_root, SHIPPED_DIRS["taxi"], *REHEARSAL_FLAGS, *flags))
    rehearsed_ms = now_ms()
    (record_file,) = glob.glob(str(rehearsal_root / "logs" / "*" / RECORD_FILE))
    with open(record_file) as f:
        record = json.load(f)
    rehearsed = Run("taxi", started, rehearsed_ms, rehearsal_root=rehearsal_root, record=record, exit_code=code)
    return Run("taxi", started, rehearsed_ms, pipeline=pipeline), rehearsed


def test_the_rehearsal_on_the_cluster_completes_to_a_pushed_model(taxi_runs):
    _, rehearsed = taxi_runs
    assert rehearsed.exit_code == 0
    tasks = rehearsed.tasks
    assert all(task["state"] == "SUCCEEDED" for task in tasks.values()), tasks
    assert tasks["Evaluator"]["outputs"]["blessing"][0]["metadata"]["blessed"] == 1
    pushed = tasks["Pusher"]["outputs"]["pushed_model"][0]["metadata"]
    assert pushed["pushed"] == 1.0
    assert pushed["pushed_destination"].startswith(f"{BUCKET}/out/serving_model/")
    assert glob.glob(f"{artifact(rehearsed, 'CsvExampleGen', 'examples')}/Split-train/*.gz")


def submitted_job(rehearsal_root: Path, task: str) -> str:
    """The Flink job ``task`` submitted, as Beam's uber jar job server logged it."""
    (log,) = glob.glob(str(rehearsal_root / "logs" / "*" / f"{task}.log"))
    with open(log) as f:
        jobs = re.findall(r"Started Flink job as ([0-9a-f]{32})", f.read())
    assert len(jobs) == 1, (task, jobs)
    return jobs[0]


def test_every_beam_component_is_a_finished_jar_job_of_the_cluster_on_its_taskmanagers(flink, fat_jar, taxi_runs):
    _, rehearsed = taxi_runs
    states = {job["jid"]: job["state"] for job in cluster.rest(flink, "/jobs/overview")["jobs"]}
    hosts = set()
    for task in BEAM_COMPONENTS:
        job = submitted_job(rehearsed.rehearsal_root, task)
        assert states.get(job) == "FINISHED", (task, job, states)
        options = cluster.rest(flink, f"/jobs/{job}/config")["execution-config"]["user-config"]
        assert (options["flinkSubmitUberJar"], options["flinkJobServerJar"]) == ("true", jar_uri(fat_jar))
        hosts |= job_hosts(flink, job)
    assert hosts == {host.address for host in flink.taskmanagers}
    # Beam deletes each job's uploaded jar once the job has ended.
    assert cluster.rest(flink, "/jars")["files"] == []


def test_each_taskmanagers_sdk_workers_ran_in_its_own_sidecar_and_fetched_what_their_jobs_staged(flink, taxi_runs):
    for host in flink.taskmanagers:
        logs = podman.run("logs", flink.container(host))
        assert "Starting worker with command ['/opt/apache/beam/boot'" in logs.stdout + logs.stderr
        # What boot logs, through the TaskManager, for a staged file it cannot fetch (after
        # 8 s of retries): every worker of a jar job did for Beam's submission environment.
        taskmanager_log = "".join(log.read_text() for log in (flink.state / "log" / host.role).glob("*.log"))
        assert "failed to retrieve staged files" not in taskmanager_log


def job_hosts(flink: cluster.Cluster, job: str) -> set[str]:
    """The hosts of the tasks of ``job`` (of its last attempt)."""
    return {
        subtask["host"]
        for vertex in cluster.rest(flink, f"/jobs/{job}")["vertices"]
        for subtask in cluster.rest(flink, f"/jobs/{job}/vertices/{vertex['id']}")["subtasks"]
    }


def running_on(flink: cluster.Cluster, host: network.Host, since_ms: int) -> bool:
    """Whether a job submitted since ``since_ms`` has a task running on ``host``."""
    for job in cluster.rest(flink, "/jobs/overview")["jobs"]:
        if job["state"] != "RUNNING" or job["start-time"] < since_ms:
            continue
        for vertex in cluster.rest(flink, f"/jobs/{job['jid']}")["vertices"]:
            subtasks = cluster.rest(flink, f"/jobs/{job['jid']}/vertices/{vertex['id']}")["subtasks"]
            if any(task["host"] == host.address and task["status"] == "RUNNING" for task in subtasks):
                return True
    return False


def kill_when_running(flink: cluster.Cluster, host: network.Host, process: subprocess.Popen, since_ms: int) -> None:
    """SIGKILL every process of ``host`` (its TaskManager and its SDK workers) once one of
    its tasks runs: a lost machine."""
    while process.poll() is None:
        if running_on(flink, host, since_ms):
            cluster.signal_all(set(network.pids(host)), signal.SIGKILL)
            return
        time.sleep(POLL_SECONDS)
    pytest.fail(f"the run ended before any task ran on {host.address}")


@pytest.fixture(scope="module")
def penguins_runs(flink, job_server_jar, tmp_path_factory) -> tuple[Run, Run]:
    """The penguins by ``local_runner.py`` on the DirectRunner and with ``--flink-master``,
    side by side (the Flink run waits on its jobs most of its time); the last TaskManager is
    killed as soon as one of its tasks runs: Flink's restart strategy recovers the job on
    the other's slots."""
    direct_root, flink_root = (tmp_path_factory.mktemp(f"penguins-{where}") for where in ("direct", "flink"))
    flags = ["--flink-master", flink.master, "--flink-parallelism", str(flink.parallelism)]
    flags += ["--flink-job-server-jar", str(job_server_jar), "--flink-sdk-image", flink.image]
    started = now_ms()
    direct = start(local_runner("penguins", direct_root))
    process = start(local_runner("penguins", flink_root, *flags))
    kill_when_running(flink, flink.taskmanagers[-1], process, started)
    return finished("penguins", direct, direct_root, started), finished("penguins", process, flink_root, started)


@pytest.fixture
def runs(request, problem: str) -> tuple[Run, Run]:
    """The DirectRunner's run of ``problem`` and the cluster's."""
    return request.getfixturevalue(f"{problem}_runs")


@LOSES_A_TASKMANAGER
def test_a_lost_taskmanager_was_recovered_from(flink, penguins_runs):
    _, on_flink = penguins_runs
    lost = flink.taskmanagers[-1].address
    exceptions = [
        entry
        for job in cluster.rest(flink, "/jobs/overview")["jobs"]
        if on_flink.started_ms <= job["start-time"] <= on_flink.ended_ms
        for entry in cluster.rest(flink, f"/jobs/{job['jid']}/exceptions")["exceptionHistory"]["entries"]
    ]
    assert any(lost in str(entry) for entry in exceptions), exceptions


@LOSES_A_TASKMANAGER
def test_every_beam_component_ran_as_a_job_of_the_cluster_on_the_surviving_taskmanager(flink, penguins_runs):
    _, on_flink = penguins_runs
    jobs = [
        job
        for job in cluster.rest(flink, "/jobs/overview")["jobs"]
        if on_flink.started_ms <= job["start-time"] <= on_flink.ended_ms
    ]
    assert all(job["state"] == "FINISHED" for job in jobs), jobs
    # ExampleGen, StatisticsGen, Transform's analysis, the Evaluator: a Beam pipeline each.
    assert len(jobs) >= 4, jobs
    # After a TaskManager is lost, a job's tasks are those of its last attempt: on the other.
    assert set().union(*(job_hosts(flink, job["jid"]) for job in jobs)) == {
        host.address for host in flink.taskmanagers[:-1]
    }


def feature_statistics(run: Run) -> dict[str, dict]:
    """Each split's per-feature statistics, as TFDV computed them."""
    import tensorflow_data_validation as tfdv

    found = {}
    for split in sorted(artifact(run, "StatisticsGen", "statistics").glob("Split-*")):
        (dataset,) = tfdv.load_stats_binary(str(split / "FeatureStats.pb")).datasets
        found[split.name] = {"num_examples": dataset.num_examples} | {
            feature.path.step[0]: feature for feature in dataset.features
        }
    return found


@pytest.mark.parametrize("problem", PROBLEMS)
def test_the_statistics_equal_the_direct_runners(runs):
    direct, on_flink = (feature_statistics(run) for run in runs)
    assert direct.keys() == on_flink.keys()
    for split, features in direct.items():
        assert on_flink[split]["num_examples"] == features.pop("num_examples")
        assert on_flink[split].keys() - {"num_examples"} == features.keys()
        for name, expected in features.items():
            got = on_flink[split][name]
            if expected.HasField("num_stats"):
                for field in ("mean", "std_dev", "min", "max", "num_zeros"):
                    assert np.isclose(
                        getattr(got.num_stats, field), getattr(expected.num_stats, field), rtol=STATISTICS_RTOL
                    ), (split, name, field)
                common_got, common = got.num_stats.common_stats, expected.num_stats.common_stats
            else:
                assert got.string_stats.unique == expected.string_stats.unique, (split, name)
                top = {value.value: value.frequency for value in expected.string_stats.top_values}
                assert {value.value: value.frequency for value in got.string_stats.top_values} == top, (split, name)
                common_got, common = got.string_stats.common_stats, expected.string_stats.common_stats
            assert common_got.num_non_missing == common.num_non_missing, (split, name)
            assert common_got.num_missing == common.num_missing, (split, name)


def anomalies(run: Run) -> dict[str, set[str]]:
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    found = {}
    for split in sorted(artifact(run, "ExampleValidator", "anomalies").glob("Split-*")):
        verdict = anomalies_pb2.Anomalies.FromString((split / "SchemaDiff.pb").read_bytes())
        found[split.name] = {f"{name}: {info.short_description}" for name, info in verdict.anomaly_info.items()}
    return found


@pytest.mark.parametrize("problem", PROBLEMS)
def test_the_contracts_verdict_equals_the_direct_runners(runs):
    direct, on_flink = runs
    assert anomalies(on_flink) == anomalies(direct)


def transformed(run: Run, raw: list[bytes]) -> dict[str, np.ndarray]:
    """Transform's graph of ``run`` applied to the same raw examples."""
    import tensorflow as tf
    import tensorflow_transform as tft

    graph = tft.TFTransformOutput(str(artifact(run, "Transform", "transform_graph")))
    features = tf.io.parse_example(raw, graph.raw_feature_spec())
    outputs = graph.transform_features_layer()(features)
    dense = {name: tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v for name, v in outputs.items()}
    return {name: value.numpy() for name, value in dense.items()}


def raw_examples(run: Run, split: str) -> list[bytes]:
    """ExampleGen's serialized tf.Examples of ``split``."""
    import tensorflow as tf

    files = sorted(str(f) for f in (artifact(run, "CsvExampleGen", "examples") / f"Split-{split}").glob("*"))
    return [record.numpy() for record in tf.data.TFRecordDataset(files, "GZIP")]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_transforms_output_equals_the_direct_runners(runs):
    direct, on_flink = runs
    raw = raw_examples(direct, "eval")[:2000]
    expected, got = transformed(direct, raw), transformed(on_flink, raw)
    assert got.keys() == expected.keys()
    for name, values in expected.items():
        if values.dtype.kind in "fc":
            assert np.allclose(got[name], values, rtol=TRANSFORM_RTOL, atol=TRANSFORM_ATOL), name
        else:
            assert np.array_equal(got[name], values), name


@pytest.mark.parametrize("problem", PROBLEMS)
def test_flinks_examples_are_the_direct_runners(runs):
    direct, on_flink = runs
    for split in ("train", "eval"):
        assert sorted(examples_of(on_flink, split)) == sorted(examples_of(direct, split)), split


def examples_of(run: Run, split: str) -> list[tuple]:
    """ExampleGen's rows of ``split``, each as its features' values by name (the bytes of a
    tf.Example depend on its encoder, not only on its values)."""
    import tensorflow as tf

    rows = []
    for record in raw_examples(run, split):
        example = tf.train.Example.FromString(record)
        rows.append(
            tuple(
                (name, tuple(getattr(feature, feature.WhichOneof("kind")).value) if feature.WhichOneof("kind") else ())
                for name, feature in sorted(example.features.feature.items())
            )
        )
    return rows


def overall_metrics(run: Run) -> dict[str, float]:
    """The candidate's metrics on the whole eval split, as TFMA wrote them."""
    import tensorflow_model_analysis as tfma

    evaluation = artifact(run, "Evaluator", "evaluation")
    (overall,) = [m for m in tfma.load_metrics(str(evaluation)) if not m.slice_key.single_slice_keys]
    return {
        entry.key.name: entry.value.double_value.value
        for entry in overall.metric_keys_and_values
        if entry.value.HasField("double_value") and not entry.key.model_name
    }


@pytest.mark.parametrize("problem", PROBLEMS)
def test_the_metrics_and_the_blessing_equal_the_direct_runners(runs):
    direct, on_flink = runs
    expected, got = overall_metrics(direct), overall_metrics(on_flink)
    assert got.keys() == expected.keys()
    assert got["example_count"] == expected["example_count"]
    for name, value in expected.items():
        assert abs(got[name] - value) <= METRIC_TOLERANCE * max(1.0, abs(value)), (name, got[name], value)
    blessed = [os.path.exists(artifact(run, "Evaluator", "blessing") / "BLESSED") for run in runs]
    assert blessed[0] == blessed[1]


@pytest.mark.stopping_the_cluster
def test_stopping_leaves_nothing(flink):
    pids = set(cluster.recorded(flink)["pids"].values())
    pids |= {pid for host in flink.network.hosts for pid in network.pids(host)}
    assert len(pids) >= 3
    # The SDK workers' temp files (TensorFlow's autograph modules: the Evaluator's metrics)
    # are in their sidecars' own layer, which goes with them, not in the shared /tmp.
    worker_tmp = [
        path
        for host in flink.taskmanagers
        for path in podman.changed_files(flink.container(host))
        if path.startswith(f"{cluster.WORKER_TMP}/")
    ]
    assert any("__autograph_generated_file" in path for path in worker_tmp), worker_tmp
    cluster.down(flink)
    assert cluster.leftovers(flink) == []
    assert [pid for pid in pids if alive(pid)] == []
    assert not {host.namespace for host in flink.network.hosts} & network.namespaces()
