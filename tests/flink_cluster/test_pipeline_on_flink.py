"""The whole pipeline with every Beam component (ExampleGen, StatisticsGen, Transform, the
Evaluator) executed by the Flink cluster, as a user runs it (`local_runner.py --flink-master`),
against the same command on the DirectRunner: the statistics, the contract's verdict,
Transform's output, the metrics and the blessing, on the taxi data and the penguins. During
the penguins' run one TaskManager is killed (its JVM and its SDK workers) in the middle of a
job: Flink's restart strategy recovers the job on the other's slots, and the results are the same."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from flink_cluster import cluster, network

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# Each problem, and whether a TaskManager is killed during its run on the cluster.
PROBLEMS = {"taxi": False, "penguins": True}
POLL_SECONDS = 0.5
# Training is not a Beam component: it runs in this process either way, but reads
# Transform's output in the order Flink's tasks wrote it, so the model (and its metrics)
# differs by the run-to-run noise of training (docs/flink.md).
METRIC_TOLERANCE = 0.02
# Quantiles and means merged across tasks in another order: the last bits of a float.
STATISTICS_RTOL = 1e-6
TRANSFORM_RTOL, TRANSFORM_ATOL = 1e-4, 1e-5


@dataclass(frozen=True)
class Run:
    problem: str
    root: Path
    pipeline: Path
    started_ms: int
    ended_ms: int


def local_runner(problem: str, output_root: Path, *flags: str) -> list[str]:
    command = [sys.executable, "local_runner.py", "--problem", f"data/{problem}", "--no-report"]
    return [*command, "--output-root", str(output_root), *flags]


def finished(problem: str, process: subprocess.Popen, output_root: Path, started: int) -> Run:
    output, _ = process.communicate(timeout=1800)
    assert process.returncode == 0, output[-5000:]
    (pipeline,) = (output_root / "pipelines").iterdir()
    return Run(problem, output_root, pipeline, started, int(time.time() * 1000))


def start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


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


@pytest.fixture(scope="module", params=PROBLEMS)
def runs(request, flink, job_server_jar, tmp_path_factory) -> tuple[Run, Run]:
    """The DirectRunner's run and the Flink cluster's, of one problem, each in a fresh root
    on the cluster's shared storage, run side by side (the Flink run waits on its jobs'
    submissions most of its time)."""
    problem = request.param
    direct_root, flink_root = (tmp_path_factory.mktemp(f"{problem}-{where}") for where in ("direct", "flink"))
    flags = ["--flink-master", flink.master, "--flink-parallelism", str(flink.parallelism)]
    flags += ["--flink-job-server-jar", str(job_server_jar), "--flink-sdk-image", flink.image]
    started = int(time.time() * 1000)
    direct = start(local_runner(problem, direct_root))
    process = start(local_runner(problem, flink_root, *flags))
    if PROBLEMS[problem]:
        kill_when_running(flink, flink.taskmanagers[-1], process, started)
    return finished(problem, direct, direct_root, started), finished(problem, process, flink_root, started)


def test_a_lost_taskmanager_was_recovered_from(flink, runs):
    _, on_flink = runs
    if not PROBLEMS[on_flink.problem]:
        pytest.skip("no TaskManager is killed during this problem's run")
    lost = flink.taskmanagers[-1].address
    exceptions = [
        entry
        for job in cluster.rest(flink, "/jobs/overview")["jobs"]
        if on_flink.started_ms <= job["start-time"] <= on_flink.ended_ms
        for entry in cluster.rest(flink, f"/jobs/{job['jid']}/exceptions")["exceptionHistory"]["entries"]
    ]
    assert any(lost in str(entry) for entry in exceptions), exceptions


def artifact(run: Run, component: str, key: str) -> Path:
    (path,) = glob.glob(str(run.pipeline / component / key / "*"))
    return Path(path)


def test_every_beam_component_ran_as_a_job_of_the_cluster_on_both_taskmanagers(flink, runs):
    _, on_flink = runs
    jobs = [
        job
        for job in cluster.rest(flink, "/jobs/overview")["jobs"]
        if on_flink.started_ms <= job["start-time"] <= on_flink.ended_ms
    ]
    assert all(job["state"] == "FINISHED" for job in jobs), jobs
    # ExampleGen, StatisticsGen, Transform's analysis, the Evaluator: a Beam pipeline each.
    assert len(jobs) >= 4, jobs
    hosts = {
        subtask["host"]
        for job in jobs
        for vertex in cluster.rest(flink, f"/jobs/{job['jid']}")["vertices"]
        for subtask in cluster.rest(flink, f"/jobs/{job['jid']}/vertices/{vertex['id']}")["subtasks"]
    }
    # After a TaskManager is lost, a job's tasks are those of its last attempt: on the other.
    survivors = flink.taskmanagers[:-1] if PROBLEMS[on_flink.problem] else flink.taskmanagers
    assert hosts == {host.address for host in survivors}


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


def test_the_metrics_and_the_blessing_equal_the_direct_runners(runs):
    direct, on_flink = runs
    expected, got = overall_metrics(direct), overall_metrics(on_flink)
    assert got.keys() == expected.keys()
    assert got["example_count"] == expected["example_count"]
    for name, value in expected.items():
        assert abs(got[name] - value) <= METRIC_TOLERANCE * max(1.0, abs(value)), (name, got[name], value)
    blessed = [os.path.exists(artifact(run, "Evaluator", "blessing") / "BLESSED") for run in runs]
    assert blessed[0] == blessed[1]


def test_a_window_of_spans_is_read_on_the_cluster_as_locally(flink, job_server_jar, small_config, tmp_path_factory):
    """ExampleGen with a rolling window of two spans, its Beam pipeline on the cluster (TFX's
    executor, the older span's rows added), writes the rows the local fast path writes."""
    from components.csv_example_gen import WINDOW_PROPERTY
    from tests.components.test_csv_example_gen import _driven, _spans, _split_records, _windowed
    from tests.support.harness import run_component

    root = tmp_path_factory.mktemp("window")
    data = _spans(root / "data", 3)
    beam_args = [*cluster.pipeline_flags(flink, job_server_jar), f"--sdk_container_image={flink.image}"]
    component = _driven(_windowed(small_config, data, 2), data)
    on_flink = run_component(component, {}, str(root / "flink"), beam_args=beam_args)["examples"][0]
    local = run_component(component, {}, str(root / "local"))["examples"][0]
    assert on_flink.get_string_custom_property(WINDOW_PROPERTY) == "2-3"
    assert _split_records(on_flink) == _split_records(local)
