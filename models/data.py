"""The Trainer's input pipeline: Transform's output as batched (features, label) datasets.

Datasets are batched to the global batch (per-replica batch x replicas in sync), which
tf.distribute splits among the replicas. A split small enough is parsed once into memory,
so training steps never wait for reading and parsing; larger ones stream through TFXIO.
With several workers every worker reads the whole split and keeps its own share of each
global batch (``shard_by_data``), in one element order agreed through a shared seed.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

import tensorflow as tf
import tensorflow_transform as tft
from absl import logging
from tfx_bsl.public import tfxio

from models import features

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
    dataset = data_accessor.tf_dataset_factory(file_pattern, options, tf_transform_output.transformed_metadata.schema)
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
        logging.info(
            "Streaming %d file(s) of %.1f MB (in-memory limit %.1f MB, or a feature is not dense)",
            len(files),
            size / 2**20,
            max_bytes / 2**20,
        )
        return None
    compression = "GZIP" if all(f.endswith(".gz") for f in files) else ""
    chunks = (
        # Files one after the other: an AUTOTUNE parallel read of gzipped files measured
        # several times slower here.
        tf.data.TFRecordDataset(files, compression_type=compression)
        .batch(LOAD_CHUNK_ROWS)
        .map(lambda records: tf.io.parse_example(records, spec), num_parallel_calls=tf.data.AUTOTUNE)
    )
    parsed = list(chunks)
    if not parsed:
        return None
    data = {name: tf.concat([chunk[name] for chunk in parsed], axis=0) for name in spec}
    logging.info(
        "Parsed %d rows from %.1f MB of files into memory", int(tf.shape(next(iter(data.values())))[0]), size / 2**20
    )
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
        return tf.data.Dataset.from_tensor_slices(({k: cut(v, order) for k, v in data.items()}, cut(label, order)))

    if training:
        return tf.data.Dataset.range(2**62).flat_map(epoch_batches)
    dataset = tf.data.Dataset.from_tensor_slices(({k: cut(v, None) for k, v in data.items()}, cut(label, None)))
    if rows > full * batch_size and not drop_remainder:
        rest = tf.data.Dataset.from_tensors(
            ({k: v[full * batch_size :] for k, v in data.items()}, label[full * batch_size :])
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
