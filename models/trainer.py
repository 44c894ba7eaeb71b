"""The Trainer's ``run_fn``: input pipelines, training under the chosen strategy, export.

Under every strategy the same code runs: the strategy comes from ``models/strategy.py``,
datasets are batched to the global batch (per-replica batch x replicas in sync) and
tf.distribute splits each global batch among the replicas. With several workers
(MultiWorkerMirroredStrategy) each worker keeps its own share of every global batch, only
the chief writes the serving model and TensorBoard logs, and every worker restores the
same BackupAndRestore state, so a restarted Trainer resumes where it was interrupted.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import shutil
import tempfile
import zlib
from typing import Sequence

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging
from tfx_bsl.public import tfxio

from models import features, model as model_lib, signatures, strategy as strategy_lib
from models.hparams import HParams

# BackupAndRestore state under the Trainer's model_run artifact unless custom_config says.
BACKUP_SUBDIR = "backup"
# Records parsed per step when a split is loaded into memory (chunks parse in parallel).
LOAD_CHUNK_ROWS = 16384


def input_fn(
    file_pattern: Sequence[str],
    data_accessor,
    tf_transform_output: tft.TFTransformOutput,
    batch_size: int,
    training: bool,
    drop_remainder: bool = True,
    shuffle_seed: int | None = None,
    in_memory_max_bytes: int = 0,
) -> tf.data.Dataset:
    """Batched (features, label) from Transform output, ``batch_size`` being the global batch.

    A split whose files total at most ``in_memory_max_bytes`` is parsed once into memory
    and batches are cut from it (``in_memory_dataset``): the training steps then never
    wait for reading and parsing. Otherwise TFXIO streams the files (parallel interleave,
    prefetch). Training repeats forever, shuffles and drops the last partial batch (static
    shapes); evaluation makes one ordered pass. With several workers, pass the same
    ``shuffle_seed`` to all of them: sharding by data needs one element order everywhere.
    """
    in_memory = load_split(file_pattern, tf_transform_output, in_memory_max_bytes)
    if in_memory is not None:
        dataset = in_memory_dataset(in_memory, batch_size, training, drop_remainder, shuffle_seed)
        if dataset is not None:
            return shard_by_data(dataset).prefetch(tf.data.AUTOTUNE)
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=batch_size,
        label_key=features.transformed_name(features.LABEL_KEY),
        num_epochs=None if training else 1,
        shuffle=training,
        shuffle_seed=shuffle_seed,
        drop_final_batch=drop_remainder,
        sloppy_ordering=training and shuffle_seed is None,
    )
    dataset = data_accessor.tf_dataset_factory(
        file_pattern, options, tf_transform_output.transformed_metadata.schema
    )
    return shard_by_data(dataset).prefetch(tf.data.AUTOTUNE)


def load_split(
    file_pattern: Sequence[str], tf_transform_output: tft.TFTransformOutput, max_bytes: int
) -> dict[str, tf.Tensor] | None:
    """Every row of a split, parsed (one tensor per feature), when its files total at most
    ``max_bytes`` and every feature is dense; None otherwise (stream it instead)."""
    if max_bytes <= 0:
        return None
    files = sorted(f for pattern in file_pattern for f in tf.io.gfile.glob(pattern))
    size = sum(tf.io.gfile.stat(f).length for f in files)
    spec = tf_transform_output.transformed_feature_spec()
    if not files or size > max_bytes or not all(isinstance(s, tf.io.FixedLenFeature) for s in spec.values()):
        logging.info("Streaming %d file(s) of %.1f MB (in-memory limit %.1f MB, or a feature is not dense)",
                     len(files), size / 2**20, max_bytes / 2**20)
        return None
    compression = "GZIP" if all(f.endswith(".gz") for f in files) else ""
    chunks = (
        # Files one after the other: an AUTOTUNE parallel read of gzipped files measured
        # 10x slower here (5.2 s against 0.5 s for 100k rows).
        tf.data.TFRecordDataset(files, compression_type=compression)
        .batch(LOAD_CHUNK_ROWS)
        .map(lambda records: tf.io.parse_example(records, spec), num_parallel_calls=tf.data.AUTOTUNE)
    )
    parsed = list(chunks)
    if not parsed:
        return None
    data = {name: tf.concat([chunk[name] for chunk in parsed], axis=0) for name in spec}
    logging.info("Parsed %d rows from %.1f MB of files into memory", int(tf.shape(next(iter(data.values())))[0]),
                 size / 2**20)
    return data


def in_memory_dataset(
    data: dict[str, tf.Tensor], batch_size: int, training: bool, drop_remainder: bool, shuffle_seed: int | None
) -> tf.data.Dataset | None:
    """(features, label) batches cut from parsed rows: for training a fresh permutation of
    all rows every epoch (seeded per epoch, so workers given one seed agree), for
    evaluation one ordered pass. None when there is not one full training batch."""
    data = dict(data)
    label = data.pop(features.transformed_name(features.LABEL_KEY))
    rows = int(tf.shape(label)[0])
    full = rows // batch_size
    if training and full == 0:
        return None
    seed = tf.constant(random.randrange(2**31) if shuffle_seed is None else shuffle_seed, tf.int64)

    def cut(tensor: tf.Tensor, order: tf.Tensor | None) -> tf.Tensor:
        head = tensor[: full * batch_size] if order is None else tf.gather(tensor, order)
        return tf.reshape(head, tf.concat([[full, batch_size], tf.shape(tensor)[1:]], axis=0))

    def epoch_batches(epoch: tf.Tensor) -> tf.data.Dataset:
        order = tf.random.experimental.stateless_shuffle(tf.range(rows), seed=tf.stack([seed, epoch]))
        order = order[: full * batch_size]
        return tf.data.Dataset.from_tensor_slices(
            ({k: cut(v, order) for k, v in data.items()}, cut(label, order))
        )

    if training:
        return tf.data.Dataset.range(2**62).flat_map(epoch_batches)
    dataset = tf.data.Dataset.from_tensor_slices(({k: cut(v, None) for k, v in data.items()}, cut(label, None)))
    if rows > full * batch_size and not drop_remainder:
        rest = tf.data.Dataset.from_tensors(
            ({k: v[full * batch_size:] for k, v in data.items()}, label[full * batch_size:])
        )
        dataset = dataset.concatenate(rest)
    return dataset


def shard_by_data(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Makes tf.distribute shard ``dataset`` among workers by element, not by file.

    Transform writes one file per split unless the data is large, and tf.data's default
    policy (AUTO, which tries FILE first) fails outright with fewer files than workers.
    By DATA, every worker reads the whole split and keeps its own slice of each global
    batch: no example is trained on twice per pass, whatever the number of files. (A
    no-op with one worker.)
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def shared_shuffle_seed(run_id: str) -> int:
    """A seed every worker of one Trainer execution derives alike (from its model_run
    URI), so their shuffles agree, while each execution still shuffles differently."""
    return zlib.crc32(run_id.encode()) & 0x7FFFFFFF


def epoch_schedule(train_steps: int, epochs: int) -> tuple[int, int]:
    """(epochs, steps per epoch): at most one epoch per step, and at least ``train_steps``
    steps of one global batch each in total (fewer than ``epochs`` extra)."""
    if not train_steps or train_steps < 1:
        raise ValueError(f"train_args.num_steps must be a positive number of steps, got {train_steps!r}")
    epochs = max(1, min(epochs, train_steps))
    return epochs, math.ceil(train_steps / epochs)


def categorical_sizes(tf_transform_output: tft.TFTransformOutput) -> dict[str, int]:
    """Category counts: fixed ones from ``features``, vocabularies from Transform output."""
    sizes = model_lib.fixed_categorical_sizes()
    for key in features.VOCAB_FEATURES:
        sizes[features.transformed_name(key)] = (
            tf_transform_output.vocabulary_size_by_name(key) + features.VOCAB_OOV_BUCKETS
        )
    return sizes


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
            logging.info("Resumed from the backup in %s after %d completed epoch(s): continuing at epoch %d of %d",
                         self._backup_dir, epoch, epoch, self._epochs)
        else:
            logging.info("No backup in %s: training from epoch 0 of %d", self._backup_dir, self._epochs)


def _wait_for_all_workers(strategy: tf.distribute.Strategy) -> None:
    """An all-reduce every worker must join: non-chief workers return only once the chief
    has finished writing the model, so their Trainer executor (which checks that
    serving_model_dir exists, on storage all workers share) does not race the chief."""

    @tf.function
    def barrier():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)

    barrier()


def run_fn(fn_args, extra_callbacks: Sequence[keras.callbacks.Callback] = ()) -> None:
    """TFX Trainer entry point (``Trainer(run_fn='models.trainer.run_fn')``).

    ``extra_callbacks`` run after this function's own (TFX passes none; tests use them).
    """
    hparams = HParams.from_custom_config(fn_args.custom_config)
    choice = strategy_lib.choose_strategy(os.environ, hparams.strategy)
    logging.info("Training strategy: %s (%s)", choice.kind, choice.reason)
    is_tpu = choice.kind == strategy_lib.TPU
    backup_dir = hparams.backup_dir or os.path.join(fn_args.model_run_dir, BACKUP_SUBDIR)
    if is_tpu:
        strategy_lib.require_remote_paths(
            [*fn_args.train_files, *fn_args.eval_files, fn_args.serving_model_dir, fn_args.model_run_dir, backup_dir]
        )
    epochs, steps_per_epoch = epoch_schedule(fn_args.train_steps, hparams.epochs)
    ema = hparams.ema_momentum_for(epochs * steps_per_epoch)
    if ema != hparams.ema_momentum:
        logging.info("Weight averaging off: %d steps are too few for momentum %s", epochs * steps_per_epoch,
                     hparams.ema_momentum)
        hparams = dataclasses.replace(hparams, ema_momentum=ema)
    # Chief or not matters only when the processes train one model together.
    worker = (strategy_lib.worker_info(os.environ.get("TF_CONFIG")) if choice.kind == strategy_lib.MULTI_WORKER
              else strategy_lib.SINGLE_PROCESS)

    strategy = strategy_lib.create_strategy(choice)
    if worker.num_workers > 1 and strategy.extended.should_checkpoint != worker.is_chief:
        raise RuntimeError(f"TF_CONFIG makes {worker.name} {'the' if worker.is_chief else 'not the'} chief, but "
                           f"{type(strategy).__name__} disagrees; refusing to risk two models or none.")
    replicas = strategy.num_replicas_in_sync
    global_batch = hparams.per_replica_batch_size * replicas
    logging.info("%s (%s of %d worker(s)): %d replica(s) in sync; global batch %d; %d epoch(s) x %d steps",
                 type(strategy).__name__, worker.name, worker.num_workers, replicas, global_batch, epochs,
                 steps_per_epoch)

    # Non-chief workers must still save (the save reads variables through collectives),
    # but to a scratch location of their own that is removed afterwards.
    scratch = None if worker.is_chief else tempfile.mkdtemp(prefix=f"trainer-{worker.task_type}{worker.task_index}-")
    serving_dir = fn_args.serving_model_dir if scratch is None else os.path.join(scratch, "serving_model")
    log_dir = fn_args.model_run_dir if scratch is None else os.path.join(scratch, "logs")
    try:
        tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
        seed = shared_shuffle_seed(fn_args.model_run_dir) if worker.num_workers > 1 else None
        # In memory on one machine only: a multi-worker or TPU input pipeline is rewritten
        # and serialised by tf.distribute, which would copy the captured rows.
        in_memory_bytes = hparams.in_memory_max_mb * 2**20 if worker.num_workers == 1 and not is_tpu else 0
        train_ds = input_fn(fn_args.train_files, fn_args.data_accessor, tf_transform_output, global_batch,
                            training=True, shuffle_seed=seed, in_memory_max_bytes=in_memory_bytes)
        # A capped validation reads only its first batches: loading the split would cost more.
        eval_ds = input_fn(fn_args.eval_files, fn_args.data_accessor, tf_transform_output, global_batch,
                           training=False, drop_remainder=is_tpu,
                           in_memory_max_bytes=0 if fn_args.eval_steps else in_memory_bytes)
        if fn_args.eval_steps:
            # Capped by the dataset, not by fit's validation_steps: given steps, Keras keeps one
            # iterator across epochs, so a split shorter than the cap was validated on after
            # the first epoch only (later epochs found it exhausted).
            eval_ds = eval_ds.take(fn_args.eval_steps)

        with strategy.scope():
            model = model_lib.build_keras_model(categorical_sizes(tf_transform_output), hparams)
        model.summary(print_fn=logging.info)

        model.fit(
            train_ds,
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            validation_data=eval_ds,
            callbacks=[
                # First, so an epoch is backed up before any later callback sees its end.
                keras.callbacks.BackupAndRestore(backup_dir),
                _LogStartEpoch(backup_dir, epochs),
                keras.callbacks.TensorBoard(log_dir=log_dir, update_freq="epoch"),
                *extra_callbacks,
            ],
            verbose=2,
        )
        signatures.export_serving_model(model, tf_transform_output, serving_dir)
        if worker.num_workers > 1:
            _wait_for_all_workers(strategy)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
            logging.info("Non-chief worker %s: removed its scratch copy %s", worker.name, scratch)
    if worker.is_chief:
        # BackupAndRestore deleted its state after the last epoch; drop the empty default dir.
        if not hparams.backup_dir and tf.io.gfile.isdir(backup_dir) and not tf.io.gfile.listdir(backup_dir):
            tf.io.gfile.rmtree(backup_dir)
        logging.info("Serving model written to %s", serving_dir)
