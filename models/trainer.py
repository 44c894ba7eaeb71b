"""The Trainer's ``run_fn``: choose the strategy, this process's role and the budget, read
the inputs, build the model, fit, export, and record the training (``training.json``).
docs/model.md describes the strategies, the input pipeline and the workers' roles.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from models import budget as budget_lib
from models import callbacks as callbacks_lib
from models import choice as choice_lib
from models import model as model_lib
from models import parameter_server, signatures, trees, warm_start
from models import strategy as strategy_lib
from models.backup import IntervalBackup
from models.data import count_records, datasets, shared_shuffle_seed
from models.hparams import PIPELINE_ROOT_KEY, WARM_START_KEY, HParams
from models.iterator_release import releasing
from models.preprocessing import problem_of
from models.problem import ModelFamily, Problem, Task
from runtime import champion, speedups
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


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What ``run_fn`` settles before training: the problem, the hyperparameters, the
    strategy chosen, this process's role in the cluster and where backups go."""

    problem: Problem
    hparams: HParams
    choice: strategy_lib.StrategyChoice
    worker: strategy_lib.WorkerInfo
    backup_dir: str

    @property
    def is_tpu(self) -> bool:
        return self.choice.kind == strategy_lib.TPU

    @property
    def parameter_servers(self) -> bool:
        return self.choice.kind == strategy_lib.PARAMETER_SERVER

    @property
    def serves_only(self) -> bool:
        """A worker or ps task of parameter-server training: it serves, the chief trains."""
        return self.parameter_servers and self.worker.task_type in strategy_lib.SERVING_ROLES


def _plan(fn_args) -> _Plan:
    """The problem, the hyperparameters (the Tuner's choices when a Tuner ran upstream),
    the strategy and this process's role; a TPU's local paths are refused here, before
    anything touches the TPU."""
    speedups.follow(fn_args.custom_config)
    hparams = HParams.from_custom_config(fn_args.custom_config)
    problem = problem_of(fn_args.custom_config)
    if getattr(fn_args, "hyperparameters", None):
        from models import tuning

        hparams = tuning.apply_best(hparams, fn_args.hyperparameters)
        logging.info("Hyperparameters chosen by the Tuner: %s", hparams)
    choice = strategy_lib.choose_strategy(os.environ, hparams.strategy)
    logging.info("Training strategy: %s (%s)", choice.kind, choice.reason)
    backup_dir = hparams.backup_dir or os.path.join(fn_args.model_run_dir, BACKUP_SUBDIR)
    if choice.kind == strategy_lib.TPU:
        strategy_lib.require_remote_paths(
            [*fn_args.train_files, *fn_args.eval_files, fn_args.serving_model_dir, fn_args.model_run_dir, backup_dir]
        )
    # Chief or not matters only when the processes train one model together.
    worker = (
        strategy_lib.worker_info(os.environ.get("TF_CONFIG"))
        if choice.kind in (strategy_lib.MULTI_WORKER, strategy_lib.PARAMETER_SERVER)
        else strategy_lib.SINGLE_PROCESS
    )
    return _Plan(problem, hparams, choice, worker, backup_dir)


def _train_trees(fn_args, plan: _Plan) -> dict | None:
    """The trees family (``models/trees.py``): the chief alone trains, on its CPU. Its
    training record; None on the other workers."""
    worker, choice = plan.worker, plan.choice
    if not worker.is_chief:
        logging.info("Trees train on the chief alone: %s has nothing to do", worker.name)
        return None
    if fn_args.train_steps:
        logging.info("Trees ignore --train-steps (%d): they stop on their held-out loss", fn_args.train_steps)
    reason = "YDF trains on this process's CPU threads"
    if choice.kind != strategy_lib.MIRRORED:
        reason += f"; the {choice.kind} strategy ({choice.reason}) is not used"
    record = trees.train_and_export(
        fn_args, plan.problem, 0 if plan.is_tpu else plan.hparams.in_memory_max_mb * 2**20, fn_args.serving_model_dir
    )
    record.update(
        strategy="none (trees)",
        reason=reason,
        replicas=1,
        workers=worker.num_workers,
        task=plan.problem.task.value,
        warm_start=warm_start.WarmStart(None, reason="trees are grown afresh every run").to_record(),
    )
    return record


@dataclasses.dataclass(frozen=True)
class _Setup:
    """The strategy and what it decides: the global batch, the budget, and the
    hyperparameters training uses (the plan's, weight averaging off for a short budget)."""

    strategy: tf.distribute.Strategy
    global_batch: int
    budget: budget_lib.Budget
    hparams: HParams

    @property
    def replicas(self) -> int:
        return self.strategy.num_replicas_in_sync


def _set_up_strategy_and_budget(fn_args, plan: _Plan) -> _Setup:
    """Creates the strategy (refusing one whose chief is not TF_CONFIG's) and fits the
    training budget to its global batch."""
    worker, hparams = plan.worker, plan.hparams
    strategy = strategy_lib.create_strategy(plan.choice)
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
        budget.epochs,
        budget.steps_per_epoch,
    )
    return _Setup(strategy, global_batch, budget, hparams)


@dataclasses.dataclass(frozen=True)
class _Outputs:
    """Where this worker writes the serving model and the TensorBoard logs: the Trainer's
    outputs on the chief; elsewhere a scratch directory of its own, removed afterwards
    (non-chief workers must still save: the save reads variables through collectives)."""

    serving_dir: str
    log_dir: str
    scratch: str | None = None

    @classmethod
    def for_worker(cls, fn_args, worker: strategy_lib.WorkerInfo) -> _Outputs:
        if worker.is_chief:
            return cls(fn_args.serving_model_dir, fn_args.model_run_dir)
        scratch = tempfile.mkdtemp(prefix=f"trainer-{worker.task_type}{worker.task_index}-")
        return cls(os.path.join(scratch, "serving_model"), os.path.join(scratch, "logs"), scratch)

    def remove_scratch(self, worker: strategy_lib.WorkerInfo) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            logging.info("Non-chief worker %s: removed its scratch copy %s", worker.name, self.scratch)


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """What ``fit`` reads, and the Transform output whose graph made it (which the export
    saves with the model)."""

    transform_output: tft.TFTransformOutput
    train: object
    eval: object
    validation_steps: int | None
    # Keras' exact evaluation under ParameterServerStrategy: its shards (0: none).
    evaluation_shards: int = 0


def _inputs(fn_args, plan: _Plan, setup: _Setup) -> _Inputs:
    """The train and eval data: ExampleGen's raw examples through the Transform graph
    (``models/data.py``), one loaded layer for both datasets."""
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    if plan.parameter_servers:
        return _parameter_server_inputs(fn_args, plan, setup, tf_transform_output)
    return _synchronous_inputs(fn_args, plan, setup, tf_transform_output)


def _parameter_server_inputs(fn_args, plan: _Plan, setup: _Setup, tf_transform_output) -> _Inputs:
    """Datasets each worker builds for itself under ParameterServerStrategy."""
    parameter_server.transform_layer_per_worker(setup.strategy, tf_transform_output)
    label_key = plan.problem.label_key
    train_ds = parameter_server.per_worker_dataset(
        fn_args.train_files, tf_transform_output, setup.global_batch, label_key=label_key
    )
    # Keras' exact evaluation: one step per shard, each eval example counted once. Its
    # val_loss is the data's loss alone (the other strategies' adds the L2 penalty).
    shards = parameter_server.evaluation_shards(fn_args.eval_files, setup.global_batch, fn_args.eval_steps)
    eval_ds = parameter_server.per_worker_eval_dataset(
        fn_args.eval_files, tf_transform_output, setup.global_batch, shards, fn_args.eval_steps, label_key=label_key
    )
    return _Inputs(tf_transform_output, train_ds, eval_ds, validation_steps=shards, evaluation_shards=shards)


def _synchronous_inputs(fn_args, plan: _Plan, setup: _Setup, tf_transform_output) -> _Inputs:
    """Datasets of global batches for the synchronous strategies, the eval one distributed."""
    worker = plan.worker
    seed = shared_shuffle_seed(fn_args.model_run_dir) if worker.num_workers > 1 else None
    # In memory on one machine only: a multi-worker or TPU input pipeline is rewritten
    # and serialised by tf.distribute, which would copy the captured rows.
    in_memory_bytes = plan.hparams.in_memory_max_mb * 2**20 if worker.num_workers == 1 and not plan.is_tpu else 0
    train_ds, eval_ds = datasets(
        fn_args,
        tf_transform_output,
        setup.global_batch,
        plan.is_tpu,
        seed,
        in_memory_bytes,
        train_rows=setup.budget.max_steps * setup.global_batch,
        label_key=plan.problem.label_key,
        replicas=setup.replicas,
    )
    eval_ds, validation_steps = distributed_validation(setup.strategy, eval_ds)
    return _Inputs(tf_transform_output, train_ds, eval_ds, validation_steps)


@dataclasses.dataclass(frozen=True)
class _Model:
    """The compiled model, the epoch-end schedule's callbacks and how its warm start went."""

    keras_model: keras.Model
    schedule_callbacks: list
    warm_start: warm_start.WarmStart


def _build_model(fn_args, plan: _Plan, setup: _Setup, inputs: _Inputs) -> _Model:
    """The model under the strategy's scope, warm-started from the champion when asked."""
    problem, hparams = plan.problem, setup.hparams
    schedule = hparams.schedule()
    target_scale = model_lib.target_scale(inputs.train) if problem.task == Task.REGRESSION else model_lib.TargetScale()
    with setup.strategy.scope():
        model = model_lib.build_keras_model(
            problem,
            model_lib.categorical_sizes(problem, inputs.transform_output),
            hparams,
            # A TPU runs a whole epoch per call from the host: no host work between steps.
            steps_per_execution=setup.budget.steps_per_epoch if plan.is_tpu else 1,
            target_scale=target_scale,
            evaluation_shards=inputs.evaluation_shards,
        )
        schedule_state = callbacks_lib.attach_state(model, schedule.keep_best_epoch)
        base, why_not = base_model(fn_args)
        started = warm_start.apply(model, base, inputs.transform_output, problem, why_not)
    model.summary(print_fn=logging.info)
    schedule_callbacks = callbacks_lib.schedule_callbacks(
        schedule, schedule_state, model_lib.monitored_metric(problem), setup.budget.warmup_epochs
    )
    return _Model(model, schedule_callbacks, started)


def _fit(
    model: _Model,
    inputs: _Inputs,
    plan: _Plan,
    setup: _Setup,
    log_dir: str,
    extra_callbacks: Sequence[keras.callbacks.Callback],
) -> keras.callbacks.History:
    """Keras ``fit`` within the budget, backed up and reported each epoch."""
    epochs = setup.budget.epochs
    backup_every_seconds = setup.hparams.backup_every_seconds if plan.worker.num_workers == 1 else 0
    # fit's input iterators are deleted on a background thread (models/iterator_release.py).
    with releasing(model.keras_model):
        return model.keras_model.fit(
            inputs.train,
            epochs=epochs,
            steps_per_epoch=setup.budget.steps_per_epoch,
            validation_data=inputs.eval,
            validation_steps=inputs.validation_steps,
            callbacks=[
                # Before the backup, so each epoch's backup holds the schedule's decisions.
                *model.schedule_callbacks,
                # Then the backup, so an epoch is backed up before any later callback sees its end.
                IntervalBackup(plan.backup_dir, backup_every_seconds),
                _LogStartEpoch(plan.backup_dir, epochs),
                _EpochProgress(epochs),
                keras.callbacks.TensorBoard(log_dir=log_dir, update_freq="epoch"),
                *extra_callbacks,
            ],
            verbose=2,
        )


def _export(model: _Model, inputs: _Inputs, plan: _Plan, setup: _Setup, outputs: _Outputs) -> None:
    """The serving model (and, on the chief, what a later warm start reads); under
    MultiWorkerMirroredStrategy every worker then waits for the others."""
    signatures.export_serving_model(model.keras_model, inputs.transform_output, outputs.serving_dir, plan.problem)
    if outputs.scratch is None:
        warm_start.save(model.keras_model, inputs.transform_output, plan.problem, outputs.serving_dir)
    if plan.choice.kind == strategy_lib.MULTI_WORKER and plan.worker.num_workers > 1:
        _wait_for_all_workers(setup.strategy)


def _network_record(plan: _Plan, setup: _Setup, model: _Model, history: keras.callbacks.History) -> dict:
    """What the run report shows of the network's training besides its curves."""
    return {
        "strategy": strategy_lib.public_name(setup.strategy),
        "reason": plan.choice.reason,
        "replicas": setup.replicas,
        "workers": plan.worker.num_workers,
        "global_batch": setup.global_batch,
        "epochs": setup.budget.epochs,
        "steps_per_epoch": setup.budget.steps_per_epoch,
        "budget": setup.budget.to_record(),
        "task": plan.problem.task.value,
        "hparams": setup.hparams.to_custom_config(),
        "warm_start": model.warm_start.to_record(),
        **callbacks_lib.outcome(model.schedule_callbacks, history),
    }


def _remove_empty_backup_dir(plan: _Plan) -> None:
    """BackupAndRestore deletes its state after the last epoch: the empty default directory
    goes too."""
    backup_dir = plan.backup_dir
    if not plan.hparams.backup_dir and tf.io.gfile.isdir(backup_dir) and not tf.io.gfile.listdir(backup_dir):
        tf.io.gfile.rmtree(backup_dir)


def _write_training_record(model_run_dir: str, record: dict) -> None:
    """The chief's ``training.json`` (``read_training_record``); under parameter servers
    its appearance also tells the serving tasks that training is done."""
    tf.io.gfile.makedirs(model_run_dir)
    with tf.io.gfile.GFile(os.path.join(model_run_dir, TRAINING_RECORD), "w") as f:
        f.write(json.dumps(record))


def _train_network(fn_args, plan: _Plan, extra_callbacks: Sequence[keras.callbacks.Callback]) -> dict | None:
    """The network family: trained under the plan's strategy and exported; the chief's
    training record, None on the other workers."""
    setup = _set_up_strategy_and_budget(fn_args, plan)
    outputs = _Outputs.for_worker(fn_args, plan.worker)
    try:
        inputs = _inputs(fn_args, plan, setup)
        model = _build_model(fn_args, plan, setup, inputs)
        history = _fit(model, inputs, plan, setup, outputs.log_dir, extra_callbacks)
        _export(model, inputs, plan, setup, outputs)
    finally:
        outputs.remove_scratch(plan.worker)
    if not plan.worker.is_chief:
        return None
    _remove_empty_backup_dir(plan)
    logging.info("Serving model written to %s", outputs.serving_dir)
    return _network_record(plan, setup, model, history)


def _train_family(
    family: ModelFamily, fn_args, plan: _Plan, extra_callbacks: Sequence[keras.callbacks.Callback]
) -> dict | None:
    if family == ModelFamily.TREES:
        return _train_trees(fn_args, plan)
    return _train_network(fn_args, plan, extra_callbacks)


def _trial(family: ModelFamily, fn_args, plan: _Plan, fit_file: str, validation_file: str, folder: str) -> str:
    """``family`` trained on the fit part, validated on the validation part, from scratch
    (no warm start, a backup of its own), exported under ``folder``: its serving directory."""
    trial_args = copy.copy(fn_args)
    trial_args.train_files, trial_args.eval_files = [fit_file], [validation_file]
    trial_args.serving_model_dir = os.path.join(folder, "serving_model")
    trial_args.model_run_dir = os.path.join(folder, "model_run")
    trial_args.base_model = None
    _train_family(family, trial_args, dataclasses.replace(plan, backup_dir=os.path.join(folder, "backup")), ())
    # The final model's layers are named as in a run without a trial (warm start reads them).
    keras.backend.clear_session()
    return trial_args.serving_model_dir


def _choose(fn_args, plan: _Plan, train_rows: int) -> choice_lib.Choice:
    """Each family trained on the fit part of the training split (a sample of it above
    ``choice_rows``) and scored on its validation part (``models/choice.py``); the better one."""
    scratch = tempfile.mkdtemp(prefix="choose-family-")
    step = choice_lib.sample_step(train_rows, plan.hparams.choice_rows)
    try:
        fit_file, validation_file, fit_rows, validation_rows = choice_lib.split_training_rows(
            fn_args.train_files, os.path.join(scratch, "rows"), step
        )
        trials = []
        for family in choice_lib.FAMILIES:
            started = time.monotonic()
            serving_dir = _trial(family, fn_args, plan, fit_file, validation_file, os.path.join(scratch, family.value))
            metric = choice_lib.score(serving_dir, validation_file, plan.problem)
            trials.append(choice_lib.Trial(family, metric, round(time.monotonic() - started, 1)))
            logging.info(
                "Choosing the family: the %s scored %s %.4f", family.value, plan.problem.blessing.metric, metric
            )
        chosen = choice_lib.better(plan.problem, trials)
        sampled_from = train_rows if step > 1 else 0
        choice = choice_lib.Choice(
            chosen.family, plan.problem.blessing.metric, "", tuple(trials), fit_rows, validation_rows, sampled_from
        )
        logging.info("Model: %s", choice.describe())
        return choice
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _train_choosing(fn_args, plan: _Plan, extra_callbacks: Sequence[keras.callbacks.Callback]) -> dict | None:
    """The choose family: the better family by measurement, or the network with the reason
    a run cannot choose."""
    train_rows = count_records(fn_args.train_files)
    reason = choice_lib.reason_not_to_choose(
        train_rows,
        plan.hparams.choice_rows,
        single_process=plan.worker.num_workers == 1 and not plan.is_tpu and not plan.parameter_servers,
        tuned=bool(getattr(fn_args, "hyperparameters", None)),
    )
    if reason:
        logging.info("Model: the network, without a choice: %s", reason)
        choice = choice_lib.not_chosen(plan.problem, reason)
    else:
        choice = _choose(fn_args, plan, train_rows)
    record = _train_family(choice.family, fn_args, plan, extra_callbacks)
    if record is not None:
        record["choice"] = choice.to_record()
    return record


def run_fn(fn_args, extra_callbacks: Sequence[keras.callbacks.Callback] = ()) -> None:
    """TFX Trainer entry point (``Trainer(run_fn='models.trainer.run_fn')``).

    ``extra_callbacks`` run after this function's own (TFX passes none; tests use them).
    """
    plan = _plan(fn_args)
    if plan.problem.model == ModelFamily.TREES:
        record = _train_trees(fn_args, plan)
    elif plan.serves_only:
        parameter_server.serve(plan.worker, os.path.join(fn_args.model_run_dir, TRAINING_RECORD))
        return
    elif plan.problem.model == ModelFamily.CHOOSE:
        record = _train_choosing(fn_args, plan, extra_callbacks)
    else:
        record = _train_network(fn_args, plan, extra_callbacks)
    # Only the chief records (every family alike).
    if record is not None:
        _write_training_record(fn_args.model_run_dir, record)
