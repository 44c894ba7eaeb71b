"""Parameter-server training: the serving side (with a stand-in server); the chief's exact
evaluation (its shards, each eval row in exactly one); and a real cluster of two workers and a
ps, on which a chief trains every shipped problem, its validation the whole eval split, and
then the cluster's own job, whose chief is killed and restarted."""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow.python.distribute import input_ops
from tfx.utils import path_utils

from models import data, parameter_server, signatures, trainer
from models import model as model_lib
from models import strategy as strategy_lib
from models.hparams import HParams
from models.problem import Task
from models.strategy import worker_info
from rehearsal.cloud.jobs import free_ports
from tests.support import training_jobs
from tests.support.fn_args import fn_args_for
from tests.support.problems import SHIPPED, TAXI, with_problem
from tests.support.raw_examples import raw_example
from tests.support.sample_data import embedded_rows
from tests.support.trainer_entry import fingerprints, split_fingerprints

GZIP = tf.io.TFRecordOptions(compression_type="GZIP")

CLUSTER = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]}


@pytest.fixture
def as_ps_task(monkeypatch):
    tf_config = json.dumps({"cluster": CLUSTER, "task": {"type": "ps", "index": 0}})
    monkeypatch.setenv("TF_CONFIG", tf_config)
    return worker_info(tf_config)


def test_a_serving_task_starts_its_server_and_returns_once_the_chief_is_done(as_ps_task, tmp_path):
    started = []

    class Server:
        target = "grpc://127.0.0.1:3"

        def __init__(self, cluster_spec, job_name, task_index, protocol, start):
            started.append((cluster_spec.as_dict(), job_name, task_index, protocol, start))

    marker = tmp_path / "training.json"
    served = threading.Thread(
        target=parameter_server.serve, args=(as_ps_task, str(marker), Server), kwargs={"poll_seconds": 0.01}
    )
    served.start()
    served.join(timeout=0.3)
    assert served.is_alive(), "stopped serving before the chief was done"
    marker.write_text("{}")
    served.join(timeout=5)
    assert not served.is_alive()
    assert started == [(CLUSTER, "ps", 0, "grpc", True)]


@pytest.fixture(scope="module")
def eval_split(trainer_inputs, tmp_path_factory):
    """The taxi sample's eval files, their rows, and the Transform output."""
    fn_args = fn_args_for(trainer_inputs, tmp_path_factory.mktemp("eval_split"), {})
    rows = data.count_records(fn_args.eval_files)
    # Counted independently: one record per row of the split's gzipped TFRecord files.
    files = [f for pattern in fn_args.eval_files for f in tf.io.gfile.glob(pattern)]
    assert rows == sum(1 for f in files for _ in tf.compat.v1.io.tf_record_iterator(f, GZIP))
    assert 3 * 64 < rows < 256
    return fn_args.eval_files, rows, tft.TFTransformOutput(fn_args.transform_output)


@pytest.fixture(scope="module")
def eval_rows(trainer_inputs) -> list[str]:
    """The eval split's examples as the Trainer gets them (``split_fingerprints``)."""
    return split_fingerprints(trainer_inputs, "eval")


def _cluster_of(monkeypatch, workers: int) -> None:
    cluster = {**CLUSTER, "worker": [f"127.0.0.1:{10 + i}" for i in range(workers)]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}}))


@pytest.mark.parametrize(
    ("workers", "batch", "eval_steps", "shards"),
    [
        (1, 64, None, 1),
        (2, 64, None, 2),
        # The split has 4 batches of 64 rows: never a shard without one.
        (5, 64, None, 4),
        (5, 64, 2, 2),
        # Fewer rows than one batch: one shard.
        (3, 256, None, 1),
    ],
)
def test_exact_evaluation_has_a_shard_per_worker_but_never_more_than_batches(
    eval_split, monkeypatch, workers, batch, eval_steps, shards
):
    eval_files, rows, _ = eval_split
    assert math.ceil(rows / 64) == 4
    _cluster_of(monkeypatch, workers)
    assert parameter_server.evaluation_shards(eval_files, batch, eval_steps) == shards


def _shard_rows(creator, shards: int, batch: int) -> list[list[tuple[str, int]]]:
    """Each shard's (fingerprint, label) rows, as Keras' exact evaluation cuts the dataset
    one worker builds (``input_ops.auto_shard_dataset``, without replicas in sync); and no
    batch larger than the global batch."""
    dataset = creator(tf.distribute.InputContext())
    cut = []
    for index in range(shards):
        rows = []
        for x, y in input_ops.auto_shard_dataset(dataset, shards, index):
            assert int(tf.shape(y)[0]) <= batch
            rows += zip(fingerprints({k: v.numpy() for k, v in x.items()}), y.numpy().ravel().tolist(), strict=True)
        cut.append(rows)
    return cut


@pytest.mark.parametrize(("workers", "batch"), [(2, 256), (2, 64), (3, 64), (5, 64), (1, 64)])
def test_exact_evaluation_shards_cover_the_eval_split_once_whatever_its_size(
    eval_split, eval_rows, monkeypatch, workers, batch
):
    """Every eval row lands in exactly one shard, however many workers and whatever the
    split's size against the batch (one batch larger than the split: the penguins' case)."""
    eval_files, rows, output = eval_split
    _cluster_of(monkeypatch, workers)
    shards = parameter_server.evaluation_shards(eval_files, batch)
    creator = parameter_server.per_worker_eval_dataset(eval_files, output, batch, shards, label_key=TAXI.label_key)
    cut = _shard_rows(creator, shards, batch)
    assert all(cut), "a shard without rows"
    assert len(set(eval_rows)) == len(eval_rows) == rows
    assert sorted(f for shard in cut for f, _ in shard) == sorted(eval_rows)


def test_a_capped_exact_evaluation_covers_the_first_batches_once(eval_split, eval_rows, monkeypatch):
    eval_files, _, output = eval_split
    _cluster_of(monkeypatch, 3)
    shards = parameter_server.evaluation_shards(eval_files, 64, eval_steps=2)
    creator = parameter_server.per_worker_eval_dataset(eval_files, output, 64, shards, 2, label_key=TAXI.label_key)
    cut = _shard_rows(creator, shards, 64)
    assert shards == 2 and all(cut)
    first = eval_rows[: 2 * 64]
    assert sorted(f for shard in cut for f, _ in shard) == sorted(first)


# --- a real cluster: every shipped problem, then a chief killed and restarted ----------------

SERVING_TASKS = [("worker", 0), ("worker", 1), ("ps", 0)]
# The job whose chief is killed and restarted (the last on the cluster): its servers' spec.
RESTARTED_EPOCHS, RESTARTED_STEPS_PER_EPOCH = 3, 4
RESTARTED_JOB = HParams(per_replica_batch_size=32, epochs=RESTARTED_EPOCHS, backup_every_seconds=0).to_custom_config()


@pytest.fixture(scope="module")
def inputs_of(request, tmp_path_factory):
    """The Trainer's inputs for a shipped problem, each made once: the taxi sample's (the
    session's), the penguins' on their own data and contract."""
    made = {}

    def inputs(name: str) -> dict:
        if name not in made:
            made[name] = (
                request.getfixturevalue("trainer_inputs")
                if SHIPPED[name] is TAXI
                else training_jobs.problem_trainer_inputs(SHIPPED[name], tmp_path_factory.mktemp(name))
            )
        return made[name]

    return inputs


@dataclasses.dataclass(frozen=True)
class _Cluster:
    """Two workers and one ps as separate processes, as Vertex AI starts them; a chief
    launched into the cluster trains on them. They serve until the restarted job's chief
    (outputs under ``root``) is done, so every chief of this module trains on them in turn,
    as a restarted chief reconnects to the servers it left."""

    tasks: dict
    root: Path
    servers: list[subprocess.Popen]
    logs: list[Path]

    def chief(self, trainer_inputs: dict, root: Path, name: str, train_steps: int, config: dict, **extra):
        """A chief process writing under ``root``, and its log."""
        log = root / f"{name}.log"
        spec = training_jobs.spec(trainer_inputs, root, name, train_steps, config, **extra)
        return training_jobs.launch(spec, log, {"cluster": self.tasks, "task": {"type": "chief", "index": 0}}), log

    def serving(self) -> bool:
        return all(process.poll() is None for process in self.servers)


@pytest.fixture(scope="module")
def cluster(trainer_inputs, tmp_path_factory):
    """The servers of the restarted job (the taxi sample's), started once for the module."""
    root = tmp_path_factory.mktemp("cluster")
    ports = free_ports(4)
    tasks = {
        "chief": [f"127.0.0.1:{ports[0]}"],
        "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"],
        "ps": [f"127.0.0.1:{ports[3]}"],
    }
    servers, logs = [], []
    train_steps = RESTARTED_EPOCHS * RESTARTED_STEPS_PER_EPOCH
    for kind, index in SERVING_TASKS:
        name = f"{kind}{index}"
        spec = training_jobs.spec(trainer_inputs, root, name, train_steps, RESTARTED_JOB)
        logs.append(root / f"{name}.log")
        servers.append(training_jobs.launch(spec, logs[-1], {"cluster": tasks, "task": {"type": kind, "index": index}}))
    yield _Cluster(tasks, root, servers, logs)
    # Servers still serving (the restarted job's test not selected, or failed) are stopped.
    training_jobs.stop(servers)


def _whole_split_metrics(problem, serving_dir: str, eval_files) -> dict[str, float]:
    """The exported model's loss and metrics over every example of the eval split, once each,
    computed here from its serving outputs and labels (as the Evaluator would get them)."""
    files = [f for pattern in eval_files for f in tf.io.gfile.glob(pattern)]
    examples = tf.constant([r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")])
    model = tf.saved_model.load(serving_dir)
    outputs = model.signatures[signatures.SERVING_SIGNATURE](examples=examples)
    labels = model.signatures[signatures.LABEL_SIGNATURE](examples=examples)[problem.label_key].numpy().ravel()
    eps = 1e-7
    if problem.task == Task.BINARY:
        p = np.clip(outputs[signatures.PROBABILITY_KEY].numpy().ravel().astype(np.float64), eps, 1 - eps)
        loss = -np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p))
        return {"loss": loss, "accuracy": np.mean((p > 0.5) == labels), "examples": len(labels)}
    if problem.task == Task.MULTICLASS:
        probabilities = outputs[signatures.PROBABILITIES_KEY].numpy().astype(np.float64)
        picked = np.clip(probabilities[np.arange(len(labels)), labels], eps, 1 - eps)
        accuracy = np.mean(np.argmax(probabilities, axis=1) == labels)
        return {"loss": -np.mean(np.log(picked)), "accuracy": accuracy, "examples": len(labels)}
    errors = outputs[problem.label.name].numpy().ravel().astype(np.float64) - labels
    return {"loss": np.mean(errors**2), "rmse": np.sqrt(np.mean(errors**2)), "examples": len(labels)}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "per_replica_batch"),
    [
        # Each task once; each side of the batch edge. The default batch, larger than the
        # whole eval split (140 rows): multi-class and regression.
        ("penguins", HParams().per_replica_batch_size),
        ("penguin-body-mass", HParams().per_replica_batch_size),
        # Several batches, the last one partial (4 of 64, the split between 192 and 256
        # rows: eval_split above): binary. The shards and the validation are the same code
        # whatever the task; only the metric compared here is the task's.
        ("taxi", 64),
    ],
)
def test_parameter_servers_train_every_shipped_problem_validating_on_its_whole_eval_split(
    inputs_of, cluster, tmp_path, name, per_replica_batch
):
    """The chief's validation sees every eval example exactly once, however the split's size
    compares with the batch: its epoch's validation loss and metric are the exported model's
    over the whole split (one epoch, no weight averaging, no penalty: the weights it
    validated are the ones exported, and the loss is the data's alone)."""
    problem, trainer_inputs = SHIPPED[name], inputs_of(name)
    config = HParams(per_replica_batch_size=per_replica_batch, epochs=1, ema_momentum=0, l2=0).to_custom_config()
    process, log = cluster.chief(trainer_inputs, tmp_path, "chief0", 4, with_problem(config, problem))
    assert training_jobs.wait([process], [log]) == [0], training_jobs.tail([log, *cluster.logs])
    assert cluster.serving(), training_jobs.tail(cluster.logs)
    chief = json.loads((tmp_path / "chief0.report.json").read_text())
    assert chief["strategy"] == "ParameterServerStrategy" and chief["epochs_begun"] == [0]

    fn_args = fn_args_for(trainer_inputs, tmp_path, with_problem(config, problem))
    record = json.loads((tmp_path / "out" / "model_run" / trainer.TRAINING_RECORD).read_text())
    assert record["strategy"] == "ParameterServerStrategy" and record["task"] == problem.task.value
    serving_dir = path_utils.serving_model_dir(str(tmp_path / "out" / "model"))
    expected = _whole_split_metrics(problem, serving_dir, fn_args.eval_files)
    assert expected["examples"] == data.count_records(fn_args.eval_files)
    validated = chief["epoch_logs"][-1]
    assert model_lib.monitored_metric(problem)[0] in validated
    metric = "rmse" if problem.task == Task.REGRESSION else "accuracy"
    assert validated[f"val_{metric}"] == pytest.approx(expected[metric], rel=1e-4, abs=1e-6), validated
    assert validated["val_loss"] == pytest.approx(expected["loss"], rel=1e-3), validated


@pytest.mark.slow
def test_parameter_servers_train_one_model_and_a_restarted_chief_resumes(trainer_inputs, cluster):
    """The cluster's own job: its chief is killed as its second epoch begins and restarted;
    the servers keep serving, and stop once the restarted chief is done."""
    epochs, steps_per_epoch, root = RESTARTED_EPOCHS, RESTARTED_STEPS_PER_EPOCH, cluster.root
    train_steps = epochs * steps_per_epoch
    first, first_log = cluster.chief(trainer_inputs, root, "chief-first", train_steps, RESTARTED_JOB, kill_at=[1, None])
    all_logs = [first_log, *cluster.logs]
    assert training_jobs.wait([first], [first_log]) == [-signal.SIGKILL], training_jobs.tail(all_logs)
    killed = json.loads((root / "chief-first.report.json").read_text())
    assert killed["strategy"] == "ParameterServerStrategy" and killed["choice"] == strategy_lib.PARAMETER_SERVER
    assert killed["epochs_begun"] == [0, 1] and killed["restored_optimizer_iterations"] == 0
    assert cluster.serving(), "a server stopped with the chief"

    second, second_log = cluster.chief(trainer_inputs, root, "chief-second", train_steps, RESTARTED_JOB)
    all_logs.append(second_log)
    codes = training_jobs.wait([second, *cluster.servers], [second_log, *cluster.logs])
    assert codes == [0, 0, 0, 0], training_jobs.tail(all_logs)
    resumed = json.loads((root / "chief-second.report.json").read_text())
    assert resumed["epochs_begun"] == [1, 2]
    assert resumed["restored_optimizer_iterations"] == steps_per_epoch
    assert "continuing at epoch 1 of 3" in second_log.read_text()
    for (kind, index), log in zip(SERVING_TASKS, cluster.logs, strict=True):
        assert f"{kind}:{index} serving at" in log.read_text() and "The chief is done" in log.read_text()
        assert json.loads((root / f"{kind}{index}.report.json").read_text())["epochs_begun"] == []

    # Exactly one serving model, the chief's, and it serves raw examples.
    serving_dir = path_utils.serving_model_dir(str(root / "out" / "model"))
    assert [os.path.dirname(p) for p in glob.glob(str(root / "**" / "saved_model.pb"), recursive=True)] == [serving_dir]
    record = json.loads((root / "out" / "model_run" / trainer.TRAINING_RECORD).read_text())
    assert record["strategy"] == "ParameterServerStrategy"
    assert record["last_epoch"] == epochs - 1 and record["best_epoch"] >= 0
    rows = embedded_rows(20)
    loaded = tf.saved_model.load(serving_dir)
    result = loaded.signatures["serving_default"](examples=tf.constant([raw_example(r) for r in rows]))
    probability = result["probability"].numpy()
    assert probability.shape == (20, 1) and ((probability >= 0) & (probability <= 1)).all()
