"""Parameter-server training's two sides: the worker and ps tasks' servers, and the chief's
per-worker datasets.

Under ``ParameterServerStrategy`` only the chief runs ``run_fn``'s training: Keras ``fit``
on the chief schedules each step on some worker's server, and the variables live on the ps
tasks' servers. Every replica of a Vertex AI (or TFJob) training job runs the same Trainer
executor, so on the worker and ps tasks ``run_fn`` starts this task's server and returns
once the chief has written the model: the executor then finds the serving model the chief
wrote (on storage every task shares) and the job ends with the chief.
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
    training: bool,
    *,
    label_key: str,
) -> keras.utils.experimental.DatasetCreator:
    """What ``fit`` takes under ParameterServerStrategy: a function each worker runs to
    build its own dataset of its per-replica batches.

    The function is traced once on the chief and run by every worker, so it cannot tell
    the workers apart: each reads the whole split in its own shuffled order (training is
    random sampling, not exact passes). Evaluation repeats, as each validation step lands
    on whichever worker is free. Build the Transform layer under the strategy's scope first
    (``transform_layer_per_worker``), so its lookup tables exist on every worker.
    """

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch = input_context.get_per_replica_batch_size(global_batch)
        dataset = data.stream(
            file_pattern,
            tf_transform_output,
            batch,
            training=training,
            drop_remainder=True,
            shuffle_seed=None,
            label_key=label_key,
        )
        return (dataset if training else dataset.repeat()).prefetch(tf.data.AUTOTUNE)

    return keras.utils.experimental.DatasetCreator(dataset_fn)


def transform_layer_per_worker(strategy: tf.distribute.Strategy, tf_transform_output: tft.TFTransformOutput) -> None:
    """Loads the Transform layer (``TFTransformOutput`` keeps it) under the strategy's scope:
    there ParameterServerStrategy gives every worker its own copy of the vocabulary lookup
    tables, which the workers' input pipelines then use locally."""
    with strategy.scope():
        tf_transform_output.transform_features_layer()


def validation_steps(eval_files: Sequence[str], global_batch: int, eval_steps: int | None) -> int:
    """Validation steps per epoch: ``eval_steps``, else one batch per ``global_batch`` eval
    rows (``fit`` needs a number, as the per-worker datasets repeat)."""
    if eval_steps:
        return eval_steps
    return max(1, math.ceil(data.count_records(eval_files) / global_batch))
