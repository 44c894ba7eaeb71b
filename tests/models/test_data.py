"""The Trainer's input pipeline (models/data.py) on the pipeline's own Transform output:
sharding among workers, and splits parsed once into memory."""

from __future__ import annotations

import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow.python.distribute import input_ops

from models import data, features
from tests.support.fn_args import fn_args_for
from tests.support.trainer_entry import fingerprints, split_fingerprints


def _worker_shard(dataset: tf.data.Dataset, index: int) -> tf.data.Dataset:
    """What tf.distribute applies to a worker's dataset in a two-worker cluster."""
    return input_ops.auto_shard_dataset(dataset, num_shards=2, index=index, num_replicas_in_sync=2)


def _eval_dataset(transformed: dict, fn_args) -> tf.data.Dataset:
    output = tft.TFTransformOutput(fn_args.transform_output)
    return data.input_fn(fn_args.eval_files, fn_args.data_accessor, output, 64, training=False, drop_remainder=False)


def test_transform_writes_a_single_file_per_split_so_file_sharding_cannot_work(transformed, tmp_path):
    """Why run_fn shards by data: tf.data's default policy fails on this output."""
    fn_args = fn_args_for(transformed, tmp_path, {})
    assert len(tf.io.gfile.glob(fn_args.eval_files[0])) == 1
    output = tft.TFTransformOutput(fn_args.transform_output)
    options = data.tfxio.TensorFlowDatasetOptions(batch_size=64, num_epochs=1, shuffle=False)
    as_tfxio_makes_it = fn_args.data_accessor.tf_dataset_factory(
        fn_args.eval_files, options, output.transformed_metadata.schema
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not apply FILE based sharding"):
        list(_worker_shard(as_tfxio_makes_it, 0))


def test_two_workers_split_the_eval_data_between_them_exactly(transformed, tmp_path):
    fn_args = fn_args_for(transformed, tmp_path, {})
    label = features.transformed_name(features.LABEL_KEY)
    seen = []
    for index in (0, 1):
        rows = []
        for x, _ in _worker_shard(_eval_dataset(transformed, fn_args), index):
            rows += fingerprints({k: v.numpy() for k, v in x.items() if k != label})
        seen.append(rows)
    everything = split_fingerprints(transformed, "eval")
    assert len(set(everything)) == len(everything)  # fingerprints identify examples
    assert seen[0] and seen[1]
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == sorted(everything)


def _rows(dataset: tf.data.Dataset) -> list[tuple[str, int]]:
    """(fingerprint, label) of every row of ``dataset``'s (features, label) batches."""
    label = features.transformed_name(features.LABEL_KEY)
    rows = []
    for x, y in dataset:
        rows += zip(
            fingerprints({k: v.numpy() for k, v in x.items() if k != label}), y.numpy().ravel().tolist(), strict=True
        )
    return rows


@pytest.fixture(scope="module")
def in_memory(transformed, tmp_path_factory):
    fn_args = fn_args_for(transformed, tmp_path_factory.mktemp("in_memory"), {})
    output = tft.TFTransformOutput(fn_args.transform_output)
    return fn_args, output


def test_eval_in_memory_gives_every_row_once_with_its_label_like_streaming(in_memory):
    fn_args, output = in_memory
    streamed = data.input_fn(
        fn_args.eval_files, fn_args.data_accessor, output, 64, training=False, drop_remainder=False
    )
    loaded = data.input_fn(
        fn_args.eval_files,
        fn_args.data_accessor,
        output,
        64,
        training=False,
        drop_remainder=False,
        in_memory_max_bytes=2**30,
    )
    rows = _rows(loaded)
    assert sorted(rows) == sorted(_rows(streamed))
    assert len({fingerprint for fingerprint, _ in rows}) == len(rows) > 64  # a partial last batch too


def test_training_in_memory_shows_each_row_once_per_epoch_in_a_new_order(in_memory):
    fn_args, output = in_memory
    split = data.load_split(fn_args.train_files, output, 2**30)
    assert split is not None
    rows = int(next(iter(split.values())).shape[0])
    batch = 32
    per_epoch = rows // batch
    dataset = data.in_memory_dataset(split, batch, training=True, drop_remainder=True, shuffle_seed=7)
    epochs = _rows(dataset.take(2 * per_epoch))
    first, second = epochs[: per_epoch * batch], epochs[per_epoch * batch :]
    everything = set(_rows(tf.data.Dataset.from_tensors((split, split[features.transformed_name(features.LABEL_KEY)]))))
    for epoch in (first, second):
        assert len(set(epoch)) == len(epoch) == per_epoch * batch
        assert set(epoch) <= everything
    assert first != second
    again = data.in_memory_dataset(split, batch, training=True, drop_remainder=True, shuffle_seed=7)
    assert _rows(again.take(per_epoch)) == first  # one seed, one order: what several workers need


def test_splits_over_the_limit_or_tiny_ones_stream_from_the_files(in_memory):
    fn_args, output = in_memory
    assert data.load_split(fn_args.train_files, output, 0) is None
    assert data.load_split(fn_args.train_files, output, 100) is None  # a few hundred rows are more than 100 bytes
    split = data.load_split(fn_args.train_files, output, 2**30)
    rows = int(next(iter(split.values())).shape[0])
    assert data.in_memory_dataset(split, rows + 1, training=True, drop_remainder=True, shuffle_seed=1) is None


def test_shuffle_seed_is_shared_by_one_execution_and_differs_between_executions():
    assert data.shared_shuffle_seed("gs://b/model_run/7") == data.shared_shuffle_seed("gs://b/model_run/7")
    assert data.shared_shuffle_seed("gs://b/model_run/7") != data.shared_shuffle_seed("gs://b/model_run/8")
