"""Parameter-server training's two sides: the worker and ps tasks' servers, which serve
until the chief has written the model, and the chief's per-worker datasets
(docs/model.md, "Parameter-server training").
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging

from models import data
from models.strategy import WorkerInfo

# How often a serving task looks for the chief's completion marker, and how often it says
# it is still waiting.
DONE_POLL_SECONDS = 1.0
WAITING_LOG_SECONDS = 300.0


def serve(
    worker: WorkerInfo,
    done_marker: str,
    server_factory: Callable[..., Any] | None = None,
    poll_seconds: float = DONE_POLL_SECONDS,
) -> None:
    """Starts this worker or ps task's server and serves until ``done_marker`` exists.

    The chief writes the marker after the serving model; a restarted chief reconnects to
    the same servers and resumes from its backup, so the servers outlive it.
    """
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    # A worker that cannot reach another task fails the call that needed it (which the
    # chief retries elsewhere) rather than waiting for it forever.
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    server = (server_factory or tf.distribute.Server)(
        resolver.cluster_spec(),
        job_name=worker.task_type,
        task_index=worker.task_index,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    logging.info("Parameter-server training: %s serving at %s until %s exists", worker.name, server.target, done_marker)
    started = last_log = time.monotonic()
    while not tf.io.gfile.exists(done_marker):
        time.sleep(poll_seconds)
        if time.monotonic() - last_log >= WAITING_LOG_SECONDS:
            last_log = time.monotonic()
            logging.info("%s still serving after %.0f s: the chief has not finished", worker.name, last_log - started)
    logging.info("The chief is done: %s stops serving", worker.name)


def per_worker_dataset(
    file_pattern: Sequence[str],
    tf_transform_output: tft.TFTransformOutput,
    global_batch: int,
    *,
    label_key: str,
) -> keras.utils.experimental.DatasetCreator:
    """What ``fit`` trains on under ParameterServerStrategy: a function each worker runs to
    build its own dataset of its per-replica batches.

    The function is traced once on the chief and run by every worker, so it cannot tell
    the workers apart: each reads the whole split in its own shuffled order, repeated
    (training is random sampling, not exact passes). Build the Transform layer under the
    strategy's scope first (``transform_layer_per_worker``), so its lookup tables exist on
    every worker.
    """

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch = input_context.get_per_replica_batch_size(global_batch)
        dataset = data.stream(
            file_pattern,
            tf_transform_output,
            batch,
            training=True,
            drop_remainder=True,
            shuffle_seed=None,
            label_key=label_key,
        )
        return dataset.prefetch(tf.data.AUTOTUNE)

    return keras.utils.experimental.DatasetCreator(dataset_fn)


def per_worker_eval_dataset(
    file_pattern: Sequence[str],
    tf_transform_output: tft.TFTransformOutput,
    global_batch: int,
    shards: int,
    max_batches: int | None = None,
    *,
    label_key: str,
) -> keras.utils.experimental.DatasetCreator:
    """What ``fit`` validates on under ParameterServerStrategy: one ordered pass over the
    eval split (at most ``max_batches`` batches, the last one partial), for Keras' exact
    evaluation (``compile(pss_evaluation_shards=shards)``, see ``evaluation_shards``).

    Keras schedules one function per shard on whichever worker is free; each takes its
    ``1/shards`` of the batches (tf.data's auto-sharding by DATA) and runs through them, and
    the chief adds up the shards' metric states: every eval example counts once, whatever
    the split's size against the batch. The batches are transformed one by one (no
    ``rebatch``, which auto-sharding cannot split by data without a replica count).
    """

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch = input_context.get_per_replica_batch_size(global_batch)
        dataset = data.stream(
            file_pattern,
            tf_transform_output,
            batch,
            training=False,
            drop_remainder=False,
            shuffle_seed=None,
            label_key=label_key,
            in_blocks=False,
        )
        if max_batches:
            dataset = dataset.take(max_batches)
        return data.distribute_by(dataset, shards).prefetch(tf.data.AUTOTUNE)

    return keras.utils.experimental.DatasetCreator(dataset_fn)


def evaluation_shards(eval_files: Sequence[str], global_batch: int, eval_steps: int | None = None) -> int:
    """How many shards exact evaluation cuts the eval split into: one per worker task of the
    TF_CONFIG cluster (which ParameterServerStrategy is built on), but never more than the
    split has batches (``eval_steps`` at most).

    Each shard's function reads the whole split and keeps its share of the batches (sharded
    by data: a split may have fewer files than there are shards), so more shards than
    workers would read it more often for nothing; a shard whose worker fails is run again
    on another. tf.data refuses a shard that would get no batch at all (its error speaks of
    FILE sharding): a split of fewer batches than workers gets one shard per batch.
    """
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    workers = len(resolver.cluster_spec().as_dict().get("worker", []))
    if workers <= 1:
        return 1
    batches = math.ceil(data.count_records(eval_files) / global_batch)
    if eval_steps:
        batches = min(batches, eval_steps)
    return max(1, min(workers, batches))


def transform_layer_per_worker(strategy: tf.distribute.Strategy, tf_transform_output: tft.TFTransformOutput) -> None:
    """Loads the Transform layer (``TFTransformOutput`` keeps it) under the strategy's scope:
    there ParameterServerStrategy gives every worker its own copy of the vocabulary lookup
    tables, which the workers' input pipelines then use locally."""
    with strategy.scope():
        tf_transform_output.transform_features_layer()
