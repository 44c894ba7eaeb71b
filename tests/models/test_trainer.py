"""``run_fn`` for real: on Transform output of a few hundred rows, in this process and in
worker processes launched like replicas of a training job (two-worker
MultiWorkerMirroredStrategy over localhost; a training killed part-way and restarted)."""

from __future__ import annotations

import glob
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from tensorflow.python.distribute import input_ops
from tfx.components.trainer import fn_args_utils
from tfx.proto import trainer_pb2
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import path_utils, proto_utils

from models import features, strategy as strategy_lib, trainer
from models.hparams import HParams
from tests.examples import embedded_rows, raw_example
from tests.models.trainer_entry import fingerprints

REPO_ROOT = Path(__file__).resolve().parents[2]
PER_REPLICA_BATCH = 32
# Generous: two processes importing TFX and joining collectives on 2 CPU cores.
PROCESS_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def transformed(transform, validated_schema) -> dict:
    """Transform output of the sample, from the pipeline's own components (tests/conftest.py)."""
    return {
        "examples": transform["transformed_examples"],
        "transform_graph": transform["transform_graph"],
        "schema": validated_schema,
    }


def _outputs(root: Path) -> dict:
    model, model_run = standard_artifacts.Model(), standard_artifacts.ModelRun()
    model.uri, model_run.uri = str(root / "model"), str(root / "model_run")
    return {"model": [model], "model_run": [model_run]}


def _fn_args(transformed: dict, root: Path, custom_config: dict, train_steps: int = 8) -> fn_args_utils.FnArgs:
    """FnArgs as TFX's GenericExecutor builds them."""
    exec_properties = {
        "train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs(splits=["train"], num_steps=train_steps)),
        "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs(splits=["eval"])),
        "custom_config": json.dumps(custom_config),
    }
    fn_args = fn_args_utils.get_common_fn_args(transformed, exec_properties, str(root / "working"))
    outputs = _outputs(root)
    fn_args.transform_output = fn_args.transform_graph_path
    fn_args.serving_model_dir = path_utils.serving_model_dir(outputs["model"][0].uri)
    fn_args.model_run_dir = outputs["model_run"][0].uri
    return fn_args


def _split_fingerprints(transformed: dict, split: str) -> list[str]:
    """Fingerprints of every transformed example of ``split``, as the entry script takes them."""
    output = tft.TFTransformOutput(artifact_utils.get_single_uri(transformed["transform_graph"]))
    spec = output.transformed_feature_spec()
    label = features.transformed_name(features.LABEL_KEY)
    files = glob.glob(os.path.join(artifact_utils.get_split_uri(transformed["examples"], split), "*"))
    result = []
    for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(256):
        parsed = tf.io.parse_example(batch, spec)
        result += fingerprints({k: v.numpy() for k, v in parsed.items() if k != label})
    return result


# --- pure helpers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("train_steps", "epochs", "expected"),
    [(400, 4, (4, 100)), (40, 2, (2, 20)), (41, 2, (2, 21)), (3, 4, (3, 1)), (1, 1, (1, 1))],
)
def test_epoch_schedule_covers_the_requested_steps(train_steps, epochs, expected):
    got = trainer.epoch_schedule(train_steps, epochs)
    assert got == expected
    assert train_steps <= got[0] * got[1] < train_steps + got[0]


@pytest.mark.parametrize("steps", [None, 0])
def test_epoch_schedule_needs_steps(steps):
    with pytest.raises(ValueError, match="num_steps"):
        trainer.epoch_schedule(steps, 2)


def test_shuffle_seed_is_shared_by_one_execution_and_differs_between_executions():
    assert trainer.shared_shuffle_seed("gs://b/model_run/7") == trainer.shared_shuffle_seed("gs://b/model_run/7")
    assert trainer.shared_shuffle_seed("gs://b/model_run/7") != trainer.shared_shuffle_seed("gs://b/model_run/8")


def test_backup_dir_round_trips_and_rejects_empty():
    hparams = HParams(backup_dir="gs://bucket/backup")
    assert HParams.from_custom_config(json.loads(json.dumps(hparams.to_custom_config()))) == hparams
    with pytest.raises(ValueError, match="backup_dir"):
        HParams(backup_dir=" ")


# --- input pipeline -----------------------------------------------------------------------


def _worker_shard(dataset: tf.data.Dataset, index: int) -> tf.data.Dataset:
    """What tf.distribute applies to a worker's dataset in a two-worker cluster."""
    return input_ops.auto_shard_dataset(dataset, num_shards=2, index=index, num_replicas_in_sync=2)


def _eval_dataset(transformed: dict, fn_args) -> tf.data.Dataset:
    output = tft.TFTransformOutput(fn_args.transform_output)
    return trainer.input_fn(fn_args.eval_files, fn_args.data_accessor, output, 64, training=False, drop_remainder=False)


def test_transform_writes_a_single_file_per_split_so_file_sharding_cannot_work(transformed, tmp_path):
    """Why run_fn shards by data: tf.data's default policy fails on this output."""
    fn_args = _fn_args(transformed, tmp_path, {})
    assert len(tf.io.gfile.glob(fn_args.eval_files[0])) == 1
    output = tft.TFTransformOutput(fn_args.transform_output)
    options = trainer.tfxio.TensorFlowDatasetOptions(batch_size=64, num_epochs=1, shuffle=False)
    as_tfxio_makes_it = fn_args.data_accessor.tf_dataset_factory(
        fn_args.eval_files, options, output.transformed_metadata.schema)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not apply FILE based sharding"):
        list(_worker_shard(as_tfxio_makes_it, 0))


def test_two_workers_split_the_eval_data_between_them_exactly(transformed, tmp_path):
    fn_args = _fn_args(transformed, tmp_path, {})
    label = features.transformed_name(features.LABEL_KEY)
    seen = []
    for index in (0, 1):
        rows = []
        for x, y in _worker_shard(_eval_dataset(transformed, fn_args), index):
            rows += fingerprints({k: v.numpy() for k, v in x.items() if k != label})
        seen.append(rows)
    everything = _split_fingerprints(transformed, "eval")
    assert len(set(everything)) == len(everything)  # fingerprints identify examples
    assert seen[0] and seen[1]
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == sorted(everything)


# --- a split small enough is parsed once into memory -------------------------------------


def _rows(dataset: tf.data.Dataset) -> list[tuple[str, int]]:
    """(fingerprint, label) of every row of ``dataset``'s (features, label) batches."""
    label = features.transformed_name(features.LABEL_KEY)
    rows = []
    for x, y in dataset:
        rows += zip(fingerprints({k: v.numpy() for k, v in x.items() if k != label}), y.numpy().ravel().tolist())
    return rows


@pytest.fixture(scope="module")
def in_memory(transformed, tmp_path_factory):
    fn_args = _fn_args(transformed, tmp_path_factory.mktemp("in_memory"), {})
    output = tft.TFTransformOutput(fn_args.transform_output)
    return fn_args, output


def test_eval_in_memory_gives_every_row_once_with_its_label_like_streaming(in_memory):
    fn_args, output = in_memory
    streamed = trainer.input_fn(fn_args.eval_files, fn_args.data_accessor, output, 64, training=False,
                                drop_remainder=False)
    loaded = trainer.input_fn(fn_args.eval_files, fn_args.data_accessor, output, 64, training=False,
                              drop_remainder=False, in_memory_max_bytes=2**30)
    rows = _rows(loaded)
    assert sorted(rows) == sorted(_rows(streamed))
    assert len({fingerprint for fingerprint, _ in rows}) == len(rows) > 64  # a partial last batch too


def test_training_in_memory_shows_each_row_once_per_epoch_in_a_new_order(in_memory):
    fn_args, output = in_memory
    split = trainer.load_split(fn_args.train_files, output, 2**30)
    assert split is not None
    rows = int(next(iter(split.values())).shape[0])
    batch = 32
    per_epoch = rows // batch
    dataset = trainer.in_memory_dataset(split, batch, training=True, drop_remainder=True, shuffle_seed=7)
    epochs = _rows(dataset.take(2 * per_epoch))
    first, second = epochs[: per_epoch * batch], epochs[per_epoch * batch:]
    everything = set(_rows(tf.data.Dataset.from_tensors((split, split[features.transformed_name(features.LABEL_KEY)]))))
    for epoch in (first, second):
        assert len(set(epoch)) == len(epoch) == per_epoch * batch
        assert set(epoch) <= everything
    assert first != second
    again = trainer.in_memory_dataset(split, batch, training=True, drop_remainder=True, shuffle_seed=7)
    assert _rows(again.take(per_epoch)) == first  # one seed, one order: what several workers need


def test_splits_over_the_limit_or_tiny_ones_stream_from_the_files(in_memory):
    fn_args, output = in_memory
    assert trainer.load_split(fn_args.train_files, output, 0) is None
    assert trainer.load_split(fn_args.train_files, output, 100) is None  # a few hundred rows are more than 100 bytes
    split = trainer.load_split(fn_args.train_files, output, 2**30)
    rows = int(next(iter(split.values())).shape[0])
    assert trainer.in_memory_dataset(split, rows + 1, training=True, drop_remainder=True, shuffle_seed=1) is None


# --- run_fn refuses bad set-ups before doing anything --------------------------------------


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("TF_CONFIG", "TPU_NAME", strategy_lib.STRATEGY_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


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
def test_capped_validation_runs_after_every_epoch(transformed, tmp_path, clean_env, cap_over_split):
    """A cap larger than the eval split validates on the whole split every epoch; a
    smaller one on that many batches every epoch."""
    epochs = 3
    split_batches = math.ceil(len(_split_fingerprints(transformed, "eval")) / PER_REPLICA_BATCH)
    config = HParams(per_replica_batch_size=PER_REPLICA_BATCH, epochs=epochs).to_custom_config()
    fn_args = _fn_args(transformed, tmp_path, config, train_steps=epochs * 2)
    fn_args.eval_steps = split_batches + cap_over_split
    validation = _Validation()
    trainer.run_fn(fn_args, extra_callbacks=[validation])
    assert validation.batches == [min(split_batches, fn_args.eval_steps)] * epochs
    assert all("val_auc" in logs for logs in validation.epoch_logs) and len(validation.epoch_logs) == epochs


def test_run_fn_on_tpu_refuses_local_paths_before_touching_the_tpu(transformed, tmp_path, clean_env):
    clean_env.setenv("TPU_NAME", "my-tpu")
    touched = []

    def no_tpu(*args, **kwargs):
        touched.append(args)
        raise AssertionError("a TPU was touched")

    clean_env.setattr(strategy_lib, "create_strategy", no_tpu)
    clean_env.setattr(strategy_lib.TpuSystem, "real", classmethod(no_tpu))
    clean_env.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", no_tpu)
    fn_args = _fn_args(transformed, tmp_path, {})
    with pytest.raises(ValueError, match="Use gs:// paths") as raised:
        trainer.run_fn(fn_args)
    assert fn_args.model_run_dir in str(raised.value)
    assert not touched
    assert not os.path.exists(fn_args.model_run_dir) and not os.path.exists(fn_args.serving_model_dir)


@pytest.mark.parametrize(
    ("custom_config", "env", "source"),
    [({"strategy": "gpu"}, {}, "custom_config 'strategy'"), ({}, {"TRAINING_STRATEGY": "parameter_server"}, "TRAINING_STRATEGY")],
)
def test_run_fn_rejects_an_unknown_strategy_with_the_allowed_list(transformed, tmp_path, clean_env, custom_config, env, source):
    for name, value in env.items():
        clean_env.setenv(name, value)
    fn_args = _fn_args(transformed, tmp_path, custom_config)
    with pytest.raises(ValueError, match="allowed: auto, tpu, multi_worker, mirrored") as raised:
        trainer.run_fn(fn_args)
    assert source in str(raised.value)
    assert not os.path.exists(fn_args.model_run_dir) and not os.path.exists(fn_args.serving_model_dir)


# --- worker processes ----------------------------------------------------------------------


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _spec(transformed: dict, root: Path, name: str, train_steps: int, custom_config: dict, **extra) -> Path:
    inputs = {k: transformed[k] for k in ("examples", "transform_graph", "schema")}
    spec = {
        "inputs": artifact_utils.jsonify_artifact_dict(inputs),
        "outputs": artifact_utils.jsonify_artifact_dict(_outputs(root / "out")),
        "train_steps": train_steps,
        "custom_config": custom_config,
        "report": str(root / f"{name}.report.json"),
        **extra,
    }
    path = root / f"{name}.spec.json"
    path.write_text(json.dumps(spec))
    return path


def _launch(spec: Path, log: Path, tf_config: dict | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "TPU_NAME", strategy_lib.STRATEGY_ENV)}
    env.update(TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(REPO_ROOT))
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    with open(log, "w") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.models.trainer_entry", str(spec)],
            cwd=REPO_ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )


def _wait(processes: list[subprocess.Popen], logs: list[Path], timeout: float = PROCESS_TIMEOUT_S) -> list[int]:
    """Return codes; a process still running after ``timeout`` fails the test (all are killed)."""
    deadline = time.monotonic() + timeout
    try:
        return [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in processes]
    except subprocess.TimeoutExpired:
        pytest.fail(f"worker process(es) still running after {timeout:.0f} s; logs:\n"
                    + "\n".join(f"--- {log}\n{log.read_text()[-3000:]}" for log in logs))
    finally:
        for p in processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def _tail(logs: list[Path]) -> str:
    return "\n".join(f"--- {log}\n{log.read_text()[-4000:]}" for log in logs)


@pytest.mark.slow
def test_two_workers_train_one_model_together_and_only_the_chief_writes_it(transformed, tmp_path):
    epochs, steps_per_epoch = 2, 4
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    config = HParams(per_replica_batch_size=PER_REPLICA_BATCH, epochs=epochs).to_custom_config()
    # Both replicas get the same artifacts, as the workers of one Trainer job do.
    specs = [_spec(transformed, tmp_path, f"worker{i}", epochs * steps_per_epoch, config) for i in range(2)]
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

    # Sharding: within the first pass over the training data no example reached both
    # workers, and every evaluation covered the eval split exactly once between them.
    train = _split_fingerprints(transformed, "train")
    first_pass_steps = len(train) // (2 * PER_REPLICA_BATCH)
    assert first_pass_steps >= 3
    per_worker = [[e for s in r["train_steps"][:first_pass_steps] for e in s["examples"]] for r in reports]
    assert not set(per_worker[0]) & set(per_worker[1])
    assert set(per_worker[0]) | set(per_worker[1]) <= set(train)
    evaluation = _split_fingerprints(transformed, "eval")
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

    rows = embedded_rows(20)
    loaded = tf.saved_model.load(serving_dir)
    result = loaded.signatures["serving_default"](examples=tf.constant([raw_example(r) for r in rows]))
    probability = result["probability"].numpy()
    assert probability.shape == (20, 1) and ((probability >= 0) & (probability <= 1)).all()
    assert ((probability > 0.5).astype(int) == result["big_tipper"].numpy()).all()


@pytest.mark.slow
def test_a_training_killed_part_way_resumes_from_its_last_completed_epoch(transformed, tmp_path):
    epochs, steps_per_epoch = 3, 3
    config = HParams(per_replica_batch_size=PER_REPLICA_BATCH, epochs=epochs).to_custom_config()
    train_steps = epochs * steps_per_epoch
    backup_dir = tmp_path / "out" / "model_run" / trainer.BACKUP_SUBDIR

    # First attempt: killed (SIGKILL) in the middle of epoch 1, after epoch 0 completed.
    first_log = tmp_path / "first.log"
    first = _launch(_spec(transformed, tmp_path, "first", train_steps, config, kill_at=[1, 1]), first_log)
    assert _wait([first], [first_log]) == [-signal.SIGKILL], _tail([first_log])
    report = json.loads((tmp_path / "first.report.json").read_text())
    assert report["epochs_begun"] == [0, 1] and report["killed_at"] == [1, 1]
    assert report["restored_optimizer_iterations"] == 0
    assert glob.glob(str(backup_dir / "**" / "checkpoint"), recursive=True)
    assert not glob.glob(str(tmp_path / "out" / "**" / "saved_model.pb"), recursive=True)

    # The same job restarted (same artifacts): continues at epoch 1 with epoch 0's state.
    second_log = tmp_path / "second.log"
    second = _launch(_spec(transformed, tmp_path, "second", train_steps, config), second_log)
    assert _wait([second], [second_log]) == [0], _tail([second_log])
    report = json.loads((tmp_path / "second.report.json").read_text())
    assert report["epochs_begun"] == [1, 2]
    assert report["restored_optimizer_iterations"] == steps_per_epoch
    assert len(report["train_steps"]) == (epochs - 1) * steps_per_epoch
    assert "Resumed from the backup" in second_log.read_text()
    assert "continuing at epoch 1 of 3" in second_log.read_text()
    assert os.path.exists(os.path.join(path_utils.serving_model_dir(str(tmp_path / "out" / "model")), "saved_model.pb"))
    assert not backup_dir.exists()  # deleted once training completed
