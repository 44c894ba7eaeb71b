"""The Trainer's ``run_fn``: training under the chosen strategy, then the export.

Under every strategy the same code runs: the strategy comes from ``models/strategy.py``,
the input pipeline from ``models/data.py`` (batched to the global batch, which
tf.distribute splits among the replicas) and the export from ``models/signatures.py``.
With several workers
(MultiWorkerMirroredStrategy) each worker keeps its own share of every global batch, only
the chief writes the serving model and TensorBoard logs, and every worker restores the
same BackupAndRestore state, so a restarted Trainer resumes where it was interrupted.
Under ParameterServerStrategy only the chief trains (``models/parameter_server.py``): the
worker and ps tasks serve until it is done. At every epoch's end the validation metric
(``model.monitored_metric``) drives the schedule in ``models/callbacks.py``. The problem
spec (the task, the label, the features) comes in ``custom_config`` from the pipeline.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from models import budget as budget_lib
from models import callbacks as callbacks_lib
from models import model as model_lib
from models import parameter_server, signatures, trees, warm_start
from models import strategy as strategy_lib
from models.backup import IntervalBackup
from models.data import count_records, datasets, shared_shuffle_seed
from models.hparams import PIPELINE_ROOT_KEY, WARM_START_KEY, HParams
from models.iterator_release import releasing
from models.preprocessing import problem_of
from models.problem import ModelFamily, Task
from runtime import champion
from runtime.paths import is_under
from runtime.terminal import report_progress

# BackupAndRestore state under the Trainer's model_run artifact unless custom_config says.
BACKUP_SUBDIR = "backup"
# Written by the chief into the model run directory: strategy, replicas, batch, epochs.
TRAINING_RECORD = "training.json"


def base_model(fn_args) -> tuple[str | None, str]:
    """The serving directory to warm-start from, or None and why not."""
    custom_config = fn_args.custom_config or {}
    if not custom_config.get(WARM_START_KEY):
        return None, "warm start is off"
    base, root = getattr(fn_args, "base_model", None), custom_config.get(PIPELINE_ROOT_KEY)
    if not base:
        return None, "no champion yet"
    # The Champion component's output points at the champion's Model (runtime/champion.py).
    artifact_dir = os.path.dirname(base.rstrip("/"))
    model_dir, reason = champion.resolve(artifact_dir)
    if model_dir is None:
        return None, reason
    if model_dir != artifact_dir:
        base = os.path.join(model_dir, champion.SERVING_DIR)
    if root and not is_under(base, root):
        logging.info("Not warm-starting from %s: not under this pipeline's root %s", base, root)
        return None, f"the champion {base} is another pipeline's"
    return base, ""


def read_training_record(model_run_dir: str) -> dict:
    """What ``run_fn`` recorded in ``model_run_dir`` (empty when it recorded nothing)."""
    path = os.path.join(model_run_dir, TRAINING_RECORD)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


class _LogStartEpoch(keras.callbacks.Callback):
    """Logs whether fit started afresh or resumed from BackupAndRestore's state (which
    BackupAndRestore restores in on_train_begin, before the first epoch begins)."""

    def __init__(self, backup_dir: str, epochs: int):
        super().__init__()
        self._backup_dir, self._epochs, self._logged = backup_dir, epochs, False

    def on_epoch_begin(self, epoch, logs=None):
        if self._logged:
            return
        self._logged = True
        if epoch:
            logging.info(
                "Resumed from the backup in %s after %d completed epoch(s): continuing at epoch %d of %d",
                self._backup_dir,
                epoch,
                epoch,
                self._epochs,
            )
        else:
            logging.info("No backup in %s: training from epoch 0 of %d", self._backup_dir, self._epochs)


class _EpochProgress(keras.callbacks.Callback):
    """Reports each finished epoch (``runtime.terminal.report_progress``): a progress bar in
    a local run's terminal, a log line elsewhere."""

    def __init__(self, epochs: int):
        super().__init__()
        self._epochs = epochs

    def on_epoch_end(self, epoch, logs=None):
        report_progress("Trainer", epoch + 1, self._epochs, "epoch")


def distributed_validation(strategy: tf.distribute.Strategy, eval_ds: tf.data.Dataset) -> tuple[object, int | None]:
    """``fit``'s validation data and steps: the eval dataset distributed as Keras would
    distribute it, with its number of batches, when that number is known.

    Given a plain dataset of known size, Keras' validation makes two distributed iterators
    per epoch (``DataHandler.enumerate_epochs`` makes one, then recreates it), each costing
    more than a short epoch's training; given it distributed with its steps, one. A streamed
    split (size unknown) stays as it is.
    """
    batches = int(eval_ds.cardinality())
    if batches <= 0:
        return eval_ds, None
    return strategy.experimental_distribute_dataset(eval_ds), batches


def _wait_for_all_workers(strategy: tf.distribute.Strategy) -> None:
    """An all-reduce every worker must join: non-chief workers return only once the chief
    has finished writing the model, so their Trainer executor (which checks that
    serving_model_dir exists, on storage all workers share) does not race the chief."""

    @tf.function
    def barrier():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)

    barrier()


def _train_trees(fn_args, problem, hparams: HParams, choice, worker: strategy_lib.WorkerInfo) -> None:
    """The trees family (``models/trees.py``): the chief alone trains, on its CPU."""
    if not worker.is_chief:
        logging.info("Trees train on the chief alone: %s has nothing to do", worker.name)
        return
    if fn_args.train_steps:
        logging.info("Trees ignore --train-steps (%d): they stop on their held-out loss", fn_args.train_steps)
    reason = "YDF trains on this process's CPU threads"
    if choice.kind != strategy_lib.MIRRORED:
        reason += f"; the {choice.kind} strategy ({choice.reason}) is not used"
    record = trees.train_and_export(
        fn_args, problem, hparams.in_memory_max_mb * 2**20 if choice.kind != strategy_lib.TPU else 0,
        fn_args.serving_model_dir,
    )  # fmt: skip
    record.update(
        strategy="none (trees)",
        reason=reason,
        replicas=1,
        workers=worker.num_workers,
        task=problem.task.value,
        warm_start=warm_start.WarmStart(None, reason="trees are grown afresh every run").to_record(),
    )
    tf.io.gfile.makedirs(fn_args.model_run_dir)
    with tf.io.gfile.GFile(os.path.join(fn_args.model_run_dir, TRAINING_RECORD), "w") as f:
        f.write(json.dumps(record))


def run_fn(fn_args, extra_callbacks: Sequence[keras.callbacks.Callback] = ()) -> None:
    """TFX Trainer entry point (``Trainer(run_fn='models.trainer.run_fn')``).

    ``extra_callbacks`` run after this function's own (TFX passes none; tests use them).
    """
    hparams = HParams.from_custom_config(fn_args.custom_config)
    problem = problem_of(fn_args.custom_config)
    # With a Tuner upstream, its best hyperparameters replace the configured ones.
    if getattr(fn_args, "hyperparameters", None):
        from models import tuning

        hparams = tuning.apply_best(hparams, fn_args.hyperparameters)
        logging.info("Hyperparameters chosen by the Tuner: %s", hparams)
    choice = strategy_lib.choose_strategy(os.environ, hparams.strategy)
    logging.info("Training strategy: %s (%s)", choice.kind, choice.reason)
    is_tpu = choice.kind == strategy_lib.TPU
    backup_dir = hparams.backup_dir or os.path.join(fn_args.model_run_dir, BACKUP_SUBDIR)
    if is_tpu:
        strategy_lib.require_remote_paths(
            [*fn_args.train_files, *fn_args.eval_files, fn_args.serving_model_dir, fn_args.model_run_dir, backup_dir]
        )
    # Chief or not matters only when the processes train one model together.
    parameter_servers = choice.kind == strategy_lib.PARAMETER_SERVER
    worker = (
        strategy_lib.worker_info(os.environ.get("TF_CONFIG"))
        if choice.kind == strategy_lib.MULTI_WORKER or parameter_servers
        else strategy_lib.SINGLE_PROCESS
    )
    if problem.model == ModelFamily.TREES:
        _train_trees(fn_args, problem, hparams, choice, worker)
        return
    if parameter_servers and worker.task_type in strategy_lib.SERVING_ROLES:
        parameter_server.serve(worker, os.path.join(fn_args.model_run_dir, TRAINING_RECORD))
        return

    strategy = strategy_lib.create_strategy(choice)
    if worker.num_workers > 1 and strategy.extended.should_checkpoint != worker.is_chief:
        raise RuntimeError(
            f"TF_CONFIG makes {worker.name} {'the' if worker.is_chief else 'not the'} chief, but "
            f"{strategy_lib.public_name(strategy)} disagrees; refusing to risk two models or none."
        )
    replicas = strategy.num_replicas_in_sync
    global_batch = hparams.per_replica_batch_size * replicas
    budget = budget_lib.choose(
        fn_args.train_steps,
        hparams.epochs,
        global_batch,
        lambda: count_records(fn_args.train_files),
        max_rows_seen=hparams.max_rows_seen,
    )
    epochs, steps_per_epoch = budget.epochs, budget.steps_per_epoch
    logging.info("Training budget: %s", budget.reason)
    ema = hparams.ema_momentum_for(budget.max_steps)
    if ema != hparams.ema_momentum:
        logging.info(
            "Weight averaging off: %d steps are too few for momentum %s", budget.max_steps, hparams.ema_momentum
        )
        hparams = dataclasses.replace(hparams, ema_momentum=ema)
    logging.info(
        "%s (%s of %d worker(s)): %d replica(s) in sync; global batch %d; %d epoch(s) x %d steps",
        strategy_lib.public_name(strategy),
        worker.name,
        worker.num_workers,
        replicas,
        global_batch,
        epochs,
        steps_per_epoch,
    )

    # Non-chief workers must still save (the save reads variables through collectives),
    # but to a scratch location of their own that is removed afterwards.
    scratch = None if worker.is_chief else tempfile.mkdtemp(prefix=f"trainer-{worker.task_type}{worker.task_index}-")
    serving_dir = fn_args.serving_model_dir if scratch is None else os.path.join(scratch, "serving_model")
    log_dir = fn_args.model_run_dir if scratch is None else os.path.join(scratch, "logs")
    try:
        # Its graph transforms the raw examples in the input pipeline (models/data.py): one
        # loaded layer for both datasets, which the export then saves with the model.
        tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
        seed = shared_shuffle_seed(fn_args.model_run_dir) if worker.num_workers > 1 else None
        # In memory on one machine only: a multi-worker or TPU input pipeline is rewritten
        # and serialised by tf.distribute, which would copy the captured rows.
        in_memory_bytes = hparams.in_memory_max_mb * 2**20 if worker.num_workers == 1 and not is_tpu else 0
        validation_steps, evaluation_shards = None, 0
        if parameter_servers:
            parameter_server.transform_layer_per_worker(strategy, tf_transform_output)
            train_ds = parameter_server.per_worker_dataset(
                fn_args.train_files, tf_transform_output, global_batch, label_key=problem.label_key
            )
            # Keras' exact evaluation: one step per shard, each eval example counted once. Its
            # val_loss is the data's loss alone (the other strategies' adds the L2 penalty).
            validation_steps = evaluation_shards = parameter_server.evaluation_shards(
                fn_args.eval_files, global_batch, fn_args.eval_steps
            )
            eval_ds = parameter_server.per_worker_eval_dataset(
                fn_args.eval_files,
                tf_transform_output,
                global_batch,
                evaluation_shards,
                fn_args.eval_steps,
                label_key=problem.label_key,
            )
        else:
            train_ds, eval_ds = datasets(
                fn_args,
                tf_transform_output,
                global_batch,
                is_tpu,
                seed,
                in_memory_bytes,
                train_rows=epochs * steps_per_epoch * global_batch,
                label_key=problem.label_key,
                replicas=replicas,
            )
            eval_ds, validation_steps = distributed_validation(strategy, eval_ds)

        schedule = hparams.schedule()
        target_scale = model_lib.target_scale(train_ds) if problem.task == Task.REGRESSION else model_lib.TargetScale()
        with strategy.scope():
            model = model_lib.build_keras_model(
                problem,
                model_lib.categorical_sizes(problem, tf_transform_output),
                hparams,
                # A TPU runs a whole epoch per call from the host: no host work between steps.
                steps_per_execution=steps_per_epoch if is_tpu else 1,
                target_scale=target_scale,
                evaluation_shards=evaluation_shards,
            )
            schedule_state = callbacks_lib.attach_state(model, schedule.keep_best_epoch)
            base, why_not = base_model(fn_args)
            started = warm_start.apply(model, base, tf_transform_output, problem, why_not)
        model.summary(print_fn=logging.info)
        schedule_callbacks = callbacks_lib.schedule_callbacks(
            schedule, schedule_state, model_lib.monitored_metric(problem), budget.warmup_epochs
        )

        # fit's input iterators are deleted on a background thread (models/iterator_release.py).
        with releasing(model):
            history = model.fit(
                train_ds,
                epochs=epochs,
                steps_per_epoch=steps_per_epoch,
                validation_data=eval_ds,
                validation_steps=validation_steps,
                callbacks=[
                    # Before the backup, so each epoch's backup holds the schedule's decisions.
                    *schedule_callbacks,
                    # Then the backup, so an epoch is backed up before any later callback sees its end.
                    IntervalBackup(backup_dir, hparams.backup_every_seconds if worker.num_workers == 1 else 0),
                    _LogStartEpoch(backup_dir, epochs),
                    _EpochProgress(epochs),
                    keras.callbacks.TensorBoard(log_dir=log_dir, update_freq="epoch"),
                    *extra_callbacks,
                ],
                verbose=2,
            )
        signatures.export_serving_model(model, tf_transform_output, serving_dir, problem)
        if scratch is None:
            warm_start.save(model, tf_transform_output, problem, serving_dir)
        if choice.kind == strategy_lib.MULTI_WORKER and worker.num_workers > 1:
            _wait_for_all_workers(strategy)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
            logging.info("Non-chief worker %s: removed its scratch copy %s", worker.name, scratch)
    if worker.is_chief:
        # What the run report shows of the training besides its curves.
        record = {
            "strategy": strategy_lib.public_name(strategy),
            "reason": choice.reason,
            "replicas": replicas,
            "workers": worker.num_workers,
            "global_batch": global_batch,
            "epochs": epochs,
            "steps_per_epoch": steps_per_epoch,
            "budget": budget.to_record(),
            "task": problem.task.value,
            "hparams": hparams.to_custom_config(),
            "warm_start": started.to_record(),
            **callbacks_lib.outcome(schedule_callbacks, history),
        }
        with tf.io.gfile.GFile(os.path.join(fn_args.model_run_dir, TRAINING_RECORD), "w") as f:
            f.write(json.dumps(record))
        # BackupAndRestore deleted its state after the last epoch; drop the empty default dir.
        if not hparams.backup_dir and tf.io.gfile.isdir(backup_dir) and not tf.io.gfile.listdir(backup_dir):
            tf.io.gfile.rmtree(backup_dir)
        logging.info("Serving model written to %s", serving_dir)
