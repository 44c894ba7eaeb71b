"""The Trainer's ``run_fn``: input pipelines, training under the chosen strategy, export."""

from __future__ import annotations

import os
from typing import Sequence

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging
from tfx_bsl.public import tfxio

from models import features, model as model_lib, signatures, strategy as strategy_lib
from models.hparams import HParams


def input_fn(
    file_pattern: Sequence[str],
    data_accessor,
    tf_transform_output: tft.TFTransformOutput,
    batch_size: int,
    training: bool,
    drop_remainder: bool = True,
) -> tf.data.Dataset:
    """Batched (features, label) from Transform output.

    TFXIO reads files with a parallel interleave, parses in parallel and prefetches.
    Training repeats forever, shuffles and drops the last partial batch (static shapes);
    evaluation makes one ordered pass.
    """
    options = tfxio.TensorFlowDatasetOptions(
        batch_size=batch_size,
        label_key=features.transformed_name(features.LABEL_KEY),
        num_epochs=None if training else 1,
        shuffle=training,
        drop_final_batch=drop_remainder,
        sloppy_ordering=training,
    )
    dataset = data_accessor.tf_dataset_factory(
        file_pattern, options, tf_transform_output.transformed_metadata.schema
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


def categorical_sizes(tf_transform_output: tft.TFTransformOutput) -> dict[str, int]:
    """Category counts: fixed ones from ``features``, vocabularies from Transform output."""
    sizes = model_lib.fixed_categorical_sizes()
    for key in features.VOCAB_FEATURES:
        sizes[features.transformed_name(key)] = (
            tf_transform_output.vocabulary_size_by_name(key) + features.VOCAB_OOV_BUCKETS
        )
    return sizes


def run_fn(fn_args) -> None:
    """TFX Trainer entry point (``Trainer(run_fn='models.trainer.run_fn')``)."""
    hparams = HParams.from_custom_config(fn_args.custom_config)
    choice = strategy_lib.choose_strategy(os.environ, hparams.strategy)
    logging.info("Training strategy: %s (%s)", choice.kind, choice.reason)
    is_tpu = choice.kind == strategy_lib.TPU
    if is_tpu:
        strategy_lib.require_remote_paths(
            [*fn_args.train_files, *fn_args.eval_files, fn_args.serving_model_dir, fn_args.model_run_dir]
        )
    strategy = strategy_lib.create_strategy(choice)
    replicas = strategy.num_replicas_in_sync
    global_batch = hparams.per_replica_batch_size * replicas
    logging.info("%d replica(s) in sync; global batch %d", replicas, global_batch)

    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    train_ds = input_fn(fn_args.train_files, fn_args.data_accessor, tf_transform_output, global_batch, training=True)
    eval_ds = input_fn(
        fn_args.eval_files, fn_args.data_accessor, tf_transform_output, global_batch,
        training=False, drop_remainder=is_tpu,
    )
    epochs = min(hparams.epochs, fn_args.train_steps)
    steps_per_epoch = max(1, fn_args.train_steps // epochs)

    with strategy.scope():
        model = model_lib.build_keras_model(categorical_sizes(tf_transform_output), hparams)
    model.summary(print_fn=logging.info)

    model.fit(
        train_ds,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        validation_data=eval_ds,
        validation_steps=fn_args.eval_steps or None,
        callbacks=[keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir, update_freq="epoch")],
        verbose=2,
    )
    signatures.export_serving_model(model, tf_transform_output, fn_args.serving_model_dir)
    logging.info("Serving model written to %s", fn_args.serving_model_dir)
