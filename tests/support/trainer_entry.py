"""Test-only: runs the real TFX Trainer executor (GenericExecutor) in its own process, as one
replica of a training job would, with ``run_fn`` wrapped to report what it did.

    python -m tests.support.trainer_entry SPEC.json

SPEC.json: ``inputs``/``outputs`` (artifact dicts as ``artifact_utils.jsonify_artifact_dict``
writes them), ``train_steps``, ``custom_config``, ``report`` (where to write the JSON
report) and optionally ``kill_at`` ([epoch, batch]: SIGKILL this process after that
training batch, to simulate a preempted worker). TF_CONFIG comes from the environment.

The report says which strategy ran and how it saw the cluster, which epochs began, the
training state right after BackupAndRestore's restore, and a fingerprint of every example
each training and evaluation step consumed on this worker (to check sharding).
``logical_cpus`` (N): the process's CPU split into N logical devices, and MirroredStrategy
built over them, so that one process trains N replicas in sync as a machine with N GPUs does.

The process starts as a local run's do (``runtime/start.py``): its heavy imports' objects
are kept out of garbage collections, which would otherwise cost about as much as the imports.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import tempfile

SPEC_ENV = "TRAINER_ENTRY_SPEC"
RUN_FN = "tests.support.trainer_entry.run_fn"


def fingerprints(features: dict) -> list[str]:
    """One short hash per example of its transformed features (label excluded); the test
    computes the same from the raw examples and the transform graph to know which exist."""
    import numpy as np

    columns = [np.asarray(features[k], dtype=np.float64).reshape(len(features[k]), -1) for k in sorted(features)]
    rows = np.concatenate(columns, axis=1)
    return [hashlib.sha1(row.tobytes()).hexdigest()[:16] for row in rows]


def split_fingerprints(trainer_inputs: dict, split: str) -> list[str]:
    """Fingerprints of every example of ``split`` as the Trainer gets it (its raw example
    through the transform graph), as the entry script takes them."""
    from tests.support.problems import TAXI
    from tests.support.transformed import graph_applied

    label = TAXI.label_key
    return fingerprints({k: v for k, v in graph_applied(trainer_inputs, split).items() if k != label})


def run_fn(fn_args) -> None:
    """``models.trainer.run_fn`` with taps: wraps strategy creation, the model's train and
    test steps and scratch-directory creation, and adds recording callbacks."""
    import tensorflow as tf
    import tf_keras as keras

    from models import model as model_lib
    from models import strategy as strategy_lib
    from models import trainer

    with open(os.environ[SPEC_ENV]) as f:
        spec = json.load(f)
    report: dict = {"pid": os.getpid(), "epochs_begun": [], "train_steps": [], "eval_steps": [], "scratch_dirs": []}
    state = {"epoch": None}

    def write_report() -> None:
        with open(spec["report"] + ".tmp", "w") as f:
            json.dump(report, f)
        os.replace(spec["report"] + ".tmp", spec["report"])

    real_create = strategy_lib.create_strategy

    def create_strategy(choice, *args, **kwargs):
        if spec.get("logical_cpus") and choice.kind == strategy_lib.MIRRORED:
            devices = [device.name for device in tf.config.list_logical_devices("CPU")]
            kwargs["strategy_factory"] = lambda: tf.distribute.MirroredStrategy(devices)
        strategy = real_create(choice, *args, **kwargs)
        resolver = getattr(strategy, "cluster_resolver", None)
        cluster = resolver.cluster_spec().as_dict() if resolver is not None else {}
        report.update(
            strategy=strategy_lib.public_name(strategy),
            choice=choice.kind,
            num_replicas_in_sync=strategy.num_replicas_in_sync,
            task_type=getattr(resolver, "task_type", None),
            task_id=getattr(resolver, "task_id", None),
            cluster_workers=sum(len(cluster.get(role, [])) for role in ("chief", "worker")),
            should_checkpoint=bool(strategy.extended.should_checkpoint),
        )
        return strategy

    def record(kind: str):
        def tap(*columns):
            report[kind].append(
                {"epoch": state["epoch"], "examples": fingerprints(dict(zip(keys, columns, strict=True)))}
            )
            return 0

        return tap

    keys: list[str] = []
    real_build = model_lib.build_keras_model

    def build_keras_model(*args, **kwargs):
        model = real_build(*args, **kwargs)
        if isinstance(tf.distribute.get_strategy(), tf.distribute.ParameterServerStrategy):
            # Steps run on the workers' servers, where no Python function can be called.
            return model
        real_train, real_test = model.train_step, model.test_step

        def tapped(step, kind):
            def run(data):
                x = data[0]
                keys[:] = sorted(x)
                tf.py_function(record(kind), [x[k] for k in keys], tf.int32)
                return step(data)

            return run

        model.train_step = tapped(real_train, "train_steps")
        model.test_step = tapped(real_test, "eval_steps")
        return model

    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):
        path = real_mkdtemp(*args, **kwargs)
        if str(kwargs.get("prefix", "")).startswith("trainer-"):
            report["scratch_dirs"].append(path)
        return path

    class Recorder(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            # BackupAndRestore (an earlier callback) has restored any backup by now.
            report["restored_train_counter"] = int(self.model._train_counter.numpy())
            report["restored_optimizer_iterations"] = int(self.model.optimizer.iterations.numpy())

        def on_epoch_begin(self, epoch, logs=None):
            state["epoch"] = epoch
            report["epochs_begun"].append(epoch)
            write_report()
            if spec.get("kill_at") == [epoch, None]:
                report["killed_at"] = [epoch, None]
                write_report()
                os.kill(os.getpid(), signal.SIGKILL)

        def on_epoch_end(self, epoch, logs=None):
            report.setdefault("epoch_logs", []).append({"epoch": epoch, **{k: float(v) for k, v in logs.items()}})
            write_report()

    class BatchKiller(Recorder):
        """Batch hooks, which ParameterServerStrategy refuses: only when killing mid-epoch."""

        def on_train_batch_end(self, batch, logs=None):
            if spec.get("kill_at") == [state["epoch"], batch]:
                report["killed_at"] = [state["epoch"], batch]
                write_report()
                os.kill(os.getpid(), signal.SIGKILL)

    strategy_lib.create_strategy = create_strategy
    model_lib.build_keras_model = build_keras_model
    tempfile.mkdtemp = mkdtemp
    try:
        kill_mid_epoch = spec.get("kill_at") and spec["kill_at"][1] is not None
        trainer.run_fn(fn_args, extra_callbacks=[BatchKiller() if kill_mid_epoch else Recorder()])
    finally:
        strategy_lib.create_strategy, model_lib.build_keras_model, tempfile.mkdtemp = (
            real_create,
            real_build,
            real_mkdtemp,
        )
        report["scratch_dirs_left"] = [d for d in report["scratch_dirs"] if os.path.exists(d)]
        write_report()


def main(spec_path: str) -> int:
    from runtime import start

    start.before_imports()
    with start.heavy_imports():
        import tf_keras  # noqa: F401  (run_fn's, imported here to be frozen with the others)
        from absl import logging
        from tfx.components.trainer import executor as trainer_executor
        from tfx.dsl.components.base import base_executor
        from tfx.proto import trainer_pb2
        from tfx.types import artifact_utils
        from tfx.utils import proto_utils

        from models import trainer  # noqa: F401

    logging.set_verbosity(logging.INFO)
    with open(spec_path) as f:
        spec = json.load(f)
    if spec.get("logical_cpus"):
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * spec["logical_cpus"])
    os.environ[SPEC_ENV] = os.path.abspath(spec_path)
    exec_properties = {
        "train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs(splits=["train"], num_steps=spec["train_steps"])),
        "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs(splits=["eval"])),
        "custom_config": json.dumps(spec["custom_config"]),
        "run_fn": RUN_FN,
    }
    context = base_executor.BaseExecutor.Context(tmp_dir=tempfile.mkdtemp(prefix="entry-") + "/", unique_id="Trainer")
    trainer_executor.GenericExecutor(context).Do(
        artifact_utils.parse_artifact_dict(spec["inputs"]),
        artifact_utils.parse_artifact_dict(spec["outputs"]),
        exec_properties,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
