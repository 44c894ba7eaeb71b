"""The serving side of parameter-server training (with a stand-in server) and the chief's
validation steps; the real four-process training is in test_trainer.py."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tfx.utils import path_utils

from models import data, parameter_server, signatures, trainer
from models import model as model_lib
from models.hparams import HParams
from models.problem import Task
from models.strategy import worker_info
from rehearsal.cloud.jobs import free_ports
from tests.support import training_jobs
from tests.support.fn_args import fn_args_for
from tests.support.problems import SHIPPED, TAXI, with_problem

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


def test_validation_steps_cover_the_eval_split_unless_capped(trainer_inputs, tmp_path):
    eval_files = fn_args_for(trainer_inputs, tmp_path, {}).eval_files
    rows = data.count_records(eval_files)
    # Counted independently: one record per row of the split's gzipped TFRecord files.
    files = [f for pattern in eval_files for f in tf.io.gfile.glob(pattern)]
    assert rows == sum(1 for f in files for _ in tf.compat.v1.io.tf_record_iterator(f, GZIP))
    assert rows > 64
    assert parameter_server.validation_steps(eval_files, 64, None) == math.ceil(rows / 64)
    assert parameter_server.validation_steps(eval_files, 64, 3) == 3


# --- a real cluster, every shipped problem --------------------------------------------------

SERVING_TASKS = [("worker", 0), ("worker", 1), ("ps", 0)]


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


def _train_with_parameter_servers(trainer_inputs: dict, root: Path, problem, config: dict, train_steps: int) -> dict:
    """A chief, two workers and one ps as separate processes, as Vertex AI starts them; every
    one must succeed. Returns the chief's report."""
    ports = free_ports(4)
    cluster = {
        "chief": [f"127.0.0.1:{ports[0]}"],
        "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"],
        "ps": [f"127.0.0.1:{ports[3]}"],
    }
    processes, logs = [], []
    for kind, index in [("chief", 0), *SERVING_TASKS]:
        name = f"{kind}{index}"
        spec = training_jobs.spec(trainer_inputs, root, name, train_steps, with_problem(config, problem))
        logs.append(root / f"{name}.log")
        tf_config = {"cluster": cluster, "task": {"type": kind, "index": index}}
        processes.append(training_jobs.launch(spec, logs[-1], tf_config))
    assert training_jobs.wait(processes, logs) == [0] * len(processes), training_jobs.tail(logs)
    return json.loads((root / "chief0.report.json").read_text())


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
        # The default batch, larger than the whole eval split (140 rows).
        ("penguins", HParams().per_replica_batch_size),
        # Several batches, the last one partial.
        ("penguins", 32),
        ("penguin-body-mass", HParams().per_replica_batch_size),
        ("taxi", 64),
    ],
)
def test_parameter_servers_train_every_shipped_problem_validating_on_its_whole_eval_split(
    inputs_of, tmp_path, name, per_replica_batch
):
    """The chief's validation sees every eval example exactly once, however the split's size
    compares with the batch: its epoch's validation loss and metric are the exported model's
    over the whole split (one epoch, no weight averaging, no penalty: the weights it
    validated are the ones exported, and the loss is the data's alone)."""
    problem, trainer_inputs = SHIPPED[name], inputs_of(name)
    config = HParams(per_replica_batch_size=per_replica_batch, epochs=1, ema_momentum=0, l2=0).to_custom_config()
    chief = _train_with_parameter_servers(trainer_inputs, tmp_path, problem, config, train_steps=4)
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
