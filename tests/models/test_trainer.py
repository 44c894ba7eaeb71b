"""``run_fn`` for real: on ExampleGen and Transform output of a few hundred rows, in this process and in
worker processes launched like replicas of a training job (two-worker
MultiWorkerMirroredStrategy over localhost; a training killed part-way and restarted). Parameter
servers, a restarted chief among them, are in test_parameter_server.py."""

from __future__ import annotations

import glob
import json
import math
import os
import signal
from pathlib import Path

import pytest
import tensorflow as tf
import tf_keras
from tfx.utils import path_utils

from models import data, trainer
from models import strategy as strategy_lib
from models.hparams import HParams
from rehearsal.cloud.jobs import free_ports
from tests.support.fn_args import fn_args_for
from tests.support.raw_examples import raw_example
from tests.support.sample_data import embedded_rows
from tests.support.trainer_entry import split_fingerprints
from tests.support.training_jobs import launch as _launch
from tests.support.training_jobs import spec as _spec
from tests.support.training_jobs import tail as _tail
from tests.support.training_jobs import wait as _wait

REPO_ROOT = Path(__file__).resolve().parents[2]
PER_REPLICA_BATCH = 32
# No epoch gains 1.0 AUC: every epoch after the first is a plateau for the schedule.
PLATEAU = dict(per_replica_batch_size=PER_REPLICA_BATCH, reduce_lr_patience=1, min_auc_gain=1.0)


# --- pure helpers -------------------------------------------------------------------------


# --- run_fn refuses bad set-ups before doing anything --------------------------------------


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("TF_CONFIG", "TPU_NAME", strategy_lib.STRATEGY_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def split_rows(trainer_inputs) -> dict[str, list[str]]:
    """Each split's examples as the Trainer gets them (``split_fingerprints``), computed once."""
    return {split: split_fingerprints(trainer_inputs, split) for split in ("train", "eval")}


class _Validation(tf_keras.callbacks.Callback):
    """Counts validation batches and keeps the logs of every epoch."""

    def __init__(self):
        super().__init__()
        self.batches: list[int] = []
        self.epoch_logs: list[dict] = []

    def on_test_begin(self, logs=None):
        self.batches.append(0)

    def on_test_batch_end(self, batch, logs=None):
        self.batches[-1] += 1

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_logs.append(dict(logs or {}))


@pytest.mark.parametrize("cap_over_split", [5, -1])
def test_capped_validation_runs_after_every_epoch(trainer_inputs, split_rows, tmp_path, clean_env, cap_over_split):
    """A cap larger than the eval split validates on the whole split every epoch; a
    smaller one on that many batches every epoch."""
    epochs = 3
    split_batches = math.ceil(len(split_rows["eval"]) / PER_REPLICA_BATCH)
    config = HParams(per_replica_batch_size=PER_REPLICA_BATCH, epochs=epochs).to_custom_config()
    fn_args = fn_args_for(trainer_inputs, tmp_path, config, train_steps=epochs * 2)
    fn_args.eval_steps = split_batches + cap_over_split
    validation = _Validation()
    trainer.run_fn(fn_args, extra_callbacks=[validation])
    assert validation.batches == [min(split_batches, fn_args.eval_steps)] * epochs
    assert all("val_auc" in logs for logs in validation.epoch_logs) and len(validation.epoch_logs) == epochs


def test_run_fn_trains_on_the_streamed_splits_under_mirrored_strategy(trainer_inputs, split_rows, tmp_path, clean_env):
    """The files streamed (no in-memory split), one replica: every validation is the eval
    split in batches of the global batch, and the model is exported."""
    epochs = 2
    config = HParams(per_replica_batch_size=PER_REPLICA_BATCH, epochs=epochs, in_memory_max_mb=0).to_custom_config()
    fn_args = fn_args_for(trainer_inputs, tmp_path, config, train_steps=epochs * 3)
    streamed = []
    real_stream = data.stream
    clean_env.setattr(data, "stream", lambda *args, **kwargs: streamed.append(args[0]) or real_stream(*args, **kwargs))
    validation = _Validation()
    trainer.run_fn(fn_args, extra_callbacks=[validation])
    assert streamed == [fn_args.train_files, fn_args.eval_files]
    eval_rows = len(split_rows["eval"])
    assert validation.batches == [math.ceil(eval_rows / PER_REPLICA_BATCH)] * epochs
    assert os.path.exists(os.path.join(fn_args.serving_model_dir, "saved_model.pb"))
    record = trainer.read_training_record(fn_args.model_run_dir)
    assert record["strategy"] == "MirroredStrategy" and record["last_epoch"] == epochs - 1


def test_run_fn_on_tpu_refuses_local_paths_before_touching_the_tpu(trainer_inputs, tmp_path, clean_env):
    clean_env.setenv("TPU_NAME", "my-tpu")
    touched = []

    def no_tpu(*args, **kwargs):
        touched.append(args)
        raise AssertionError("a TPU was touched")

    clean_env.setattr(strategy_lib, "create_strategy", no_tpu)
    clean_env.setattr(strategy_lib.TpuSystem, "real", classmethod(no_tpu))
    clean_env.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", no_tpu)
    fn_args = fn_args_for(trainer_inputs, tmp_path, {})
    with pytest.raises(ValueError, match="Use gs:// paths") as raised:
        trainer.run_fn(fn_args)
    assert fn_args.model_run_dir in str(raised.value)
    assert not touched
    assert not os.path.exists(fn_args.model_run_dir) and not os.path.exists(fn_args.serving_model_dir)


@pytest.mark.parametrize(
    ("custom_config", "env", "source"),
    [
        ({"strategy": "gpu"}, {}, "custom_config 'strategy'"),
        ({}, {"TRAINING_STRATEGY": "estimator"}, "TRAINING_STRATEGY"),
    ],
)
def test_run_fn_rejects_an_unknown_strategy_with_the_allowed_list(
    trainer_inputs, tmp_path, clean_env, custom_config, env, source
):
    for name, value in env.items():
        clean_env.setenv(name, value)
    fn_args = fn_args_for(trainer_inputs, tmp_path, custom_config)
    with pytest.raises(ValueError, match="allowed: auto, tpu, parameter_server, multi_worker, mirrored") as raised:
        trainer.run_fn(fn_args)
    assert source in str(raised.value)
    assert not os.path.exists(fn_args.model_run_dir) and not os.path.exists(fn_args.serving_model_dir)


# --- worker processes ----------------------------------------------------------------------


@pytest.mark.slow
def test_two_workers_train_one_model_together_and_only_the_chief_writes_it(trainer_inputs, split_rows, tmp_path):
    # The schedule sees no epoch gain 1.0 AUC: the rate halves after epoch 1, which ends
    # training (patience 1) with epoch 0's weights. Both workers must decide alike.
    planned, epochs, steps_per_epoch = 3, 2, 4
    ports = free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    config = HParams(**PLATEAU, early_stopping_patience=1, epochs=planned).to_custom_config()
    # Both replicas get the same artifacts, as the workers of one Trainer job do.
    specs = [_spec(trainer_inputs, tmp_path, f"worker{i}", planned * steps_per_epoch, config) for i in range(2)]
    logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    processes = [
        _launch(specs[i], logs[i], {"cluster": cluster, "task": {"type": "worker", "index": i}}) for i in range(2)
    ]
    assert _wait(processes, logs) == [0, 0], _tail(logs)
    reports = [json.loads((tmp_path / f"worker{i}.report.json").read_text()) for i in range(2)]

    for index, report in enumerate(reports):
        assert report["choice"] == strategy_lib.MULTI_WORKER
        assert report["strategy"] == "MultiWorkerMirroredStrategy"
        assert report["num_replicas_in_sync"] == 2 and report["cluster_workers"] == 2
        assert (report["task_type"], report["task_id"]) == ("worker", index)
        assert report["should_checkpoint"] == (index == 0)
        assert report["epochs_begun"] == list(range(epochs))
        # Each worker ran every step in sync, on its own half of each global batch.
        assert len(report["train_steps"]) == epochs * steps_per_epoch
        assert {len(step["examples"]) for step in report["train_steps"]} == {PER_REPLICA_BATCH}
        assert "Training strategy: multi_worker" in logs[index].read_text()
        # Several workers always stream the splits (models/trainer.py).
        assert "into memory" not in logs[index].read_text()

    # Sharding: within the first pass over the training data no example reached both
    # workers, and every evaluation covered the eval split exactly once between them.
    train = split_rows["train"]
    first_pass_steps = len(train) // (2 * PER_REPLICA_BATCH)
    assert first_pass_steps >= 3
    per_worker = [[e for s in r["train_steps"][:first_pass_steps] for e in s["examples"]] for r in reports]
    assert not set(per_worker[0]) & set(per_worker[1])
    assert set(per_worker[0]) | set(per_worker[1]) <= set(train)
    evaluation = split_rows["eval"]
    for epoch in range(epochs):
        seen = [[e for s in r["eval_steps"] if s["epoch"] == epoch for e in s["examples"]] for r in reports]
        assert not set(seen[0]) & set(seen[1]), epoch
        assert sorted(seen[0] + seen[1]) == sorted(evaluation), epoch

    # Exactly one serving model, the chief's; the other worker's scratch copy is gone.
    out = tmp_path / "out"
    serving_dir = path_utils.serving_model_dir(str(out / "model"))
    assert [os.path.dirname(p) for p in glob.glob(str(tmp_path / "**" / "saved_model.pb"), recursive=True)] == [
        serving_dir
    ]
    assert reports[0]["scratch_dirs"] == []
    assert len(reports[1]["scratch_dirs"]) == 1 and not os.path.exists(reports[1]["scratch_dirs"][0])
    assert not glob.glob(str(tmp_path / "**" / "workertemp_*"), recursive=True)
    assert glob.glob(str(out / "model_run" / "**" / "events.out.tfevents.*"), recursive=True)
    assert not os.path.exists(out / "model_run" / trainer.BACKUP_SUBDIR)
    # The same decisions on both workers, at every epoch's end.
    rates = [[logs["lr"] for logs in report["epoch_logs"]] for report in reports]
    assert rates[0] == rates[1] == pytest.approx([0.001, 0.001])
    record = json.loads((out / "model_run" / trainer.TRAINING_RECORD).read_text())
    assert record["stopped_early_at_epoch"] == 1 and record["best_epoch"] == 0
    assert record["final_learning_rate"] == pytest.approx(0.0005)
    assert "Restored the weights of epoch 0" in logs[0].read_text() and "Restored the weights" in logs[1].read_text()

    rows = embedded_rows(20)
    loaded = tf.saved_model.load(serving_dir)
    result = loaded.signatures["serving_default"](examples=tf.constant([raw_example(r) for r in rows]))
    probability = result["probability"].numpy()
    assert probability.shape == (20, 1) and ((probability >= 0) & (probability <= 1)).all()
    assert ((probability > 0.5).astype(int) == result["big_tipper"].numpy()).all()


@pytest.mark.slow
def test_two_replicas_in_one_process_train_on_the_streamed_splits_each_on_its_half_of_every_batch(
    trainer_inputs, split_rows, tmp_path
):
    """MirroredStrategy over two logical CPUs (as over two GPUs), the splits streamed: each
    replica's step gets its own half of the global batch, and each validation covers the
    eval split exactly once between them."""
    epochs, steps_per_epoch = 2, 3
    config = HParams(per_replica_batch_size=PER_REPLICA_BATCH, epochs=epochs, in_memory_max_mb=0).to_custom_config()
    spec = _spec(trainer_inputs, tmp_path, "replicas", epochs * steps_per_epoch, config, logical_cpus=2)
    log = tmp_path / "replicas.log"
    assert _wait([_launch(spec, log)], [log]) == [0], _tail([log])
    report = json.loads((tmp_path / "replicas.report.json").read_text())
    assert report["strategy"] == "MirroredStrategy" and report["num_replicas_in_sync"] == 2
    assert "into memory" not in log.read_text()
    steps = report["train_steps"]
    assert len(steps) == 2 * epochs * steps_per_epoch
    assert {len(step["examples"]) for step in steps} == {PER_REPLICA_BATCH}
    # Within the first pass over the training split (a step across two passes may hold a row
    # of each, reshuffled), no row reached both replicas, nor any step twice.
    train = split_rows["train"]
    first_pass = [e for step in steps[: 2 * (len(train) // (2 * PER_REPLICA_BATCH))] for e in step["examples"]]
    assert len(first_pass) >= 4 * PER_REPLICA_BATCH
    assert len(set(first_pass)) == len(first_pass) and set(first_pass) <= set(train)
    assert {e for step in steps for e in step["examples"]} <= set(train)
    evaluation = split_rows["eval"]
    for epoch in range(epochs):
        seen = [e for step in report["eval_steps"] if step["epoch"] == epoch for e in step["examples"]]
        assert sorted(seen) == sorted(evaluation), epoch
    assert os.path.exists(os.path.join(path_utils.serving_model_dir(str(tmp_path / "out" / "model")), "saved_model.pb"))


@pytest.mark.slow
def test_a_training_killed_part_way_resumes_from_its_last_completed_epoch(trainer_inputs, tmp_path):
    epochs, steps_per_epoch = 3, 3
    # Every epoch backed up: the kill comes well within the default interval.
    config = HParams(**PLATEAU, early_stopping_patience=2, epochs=epochs, backup_every_seconds=0).to_custom_config()
    train_steps = epochs * steps_per_epoch
    backup_dir = tmp_path / "out" / "model_run" / trainer.BACKUP_SUBDIR

    # First attempt: killed (SIGKILL) in the middle of epoch 1, after epoch 0 completed.
    first_log = tmp_path / "first.log"
    first = _launch(_spec(trainer_inputs, tmp_path, "first", train_steps, config, kill_at=[1, 1]), first_log)
    assert _wait([first], [first_log]) == [-signal.SIGKILL], _tail([first_log])
    report = json.loads((tmp_path / "first.report.json").read_text())
    assert report["epochs_begun"] == [0, 1] and report["killed_at"] == [1, 1]
    assert report["restored_optimizer_iterations"] == 0
    assert glob.glob(str(backup_dir / "**" / "checkpoint"), recursive=True)
    assert not glob.glob(str(tmp_path / "out" / "**" / "saved_model.pb"), recursive=True)

    # The same job restarted (same artifacts): continues at epoch 1 with epoch 0's state.
    second_log = tmp_path / "second.log"
    second = _launch(_spec(trainer_inputs, tmp_path, "second", train_steps, config), second_log)
    assert _wait([second], [second_log]) == [0], _tail([second_log])
    report = json.loads((tmp_path / "second.report.json").read_text())
    assert report["epochs_begun"] == [1, 2]
    assert report["restored_optimizer_iterations"] == steps_per_epoch
    assert len(report["train_steps"]) == (epochs - 1) * steps_per_epoch
    assert "Resumed from the backup" in second_log.read_text()
    assert "continuing at epoch 1 of 3" in second_log.read_text()
    assert os.path.exists(os.path.join(path_utils.serving_model_dir(str(tmp_path / "out" / "model")), "saved_model.pb"))
    assert not backup_dir.exists()  # deleted once training completed
    # The schedule went on from epoch 0's decisions: a fresh one would have taken epoch 1 for
    # the best, lowered the rate once and not stopped.
    record = json.loads((tmp_path / "out" / "model_run" / trainer.TRAINING_RECORD).read_text())
    assert record["best_epoch"] == 0 and record["stopped_early_at_epoch"] == 2
    assert record["final_learning_rate"] == pytest.approx(0.00025)
