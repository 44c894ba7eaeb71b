"""The Trainer's input pipeline (models/data.py) on the pipeline's own ExampleGen and
Transform output: what it yields (the transform graph applied to the raw examples, what
Transform used to write), sharding among workers, and splits transformed once into memory."""

from __future__ import annotations

from collections import Counter

import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow.python.distribute import input_ops

from models import data
from tests.support import transformed
from tests.support.fn_args import fn_args_for
from tests.support.problems import TAXI  # noqa: E402
from tests.support.trainer_entry import fingerprints, split_fingerprints

LABEL = TAXI.label_key


def _worker_shard(dataset: tf.data.Dataset, index: int) -> tf.data.Dataset:
    """What tf.distribute applies to a worker's dataset in a two-worker cluster."""
    return input_ops.auto_shard_dataset(dataset, num_shards=2, index=index, num_replicas_in_sync=2)


def _eval_dataset(fn_args) -> tf.data.Dataset:
    output = tft.TFTransformOutput(fn_args.transform_output)
    return data.input_fn(
        fn_args.eval_files, output, 64, training=False, drop_remainder=False, label_key=LABEL, replicas=2
    )


def test_example_gen_writes_a_single_file_per_split_so_file_sharding_cannot_work(trainer_inputs, tmp_path):
    """Why input_fn shards by data: tf.data's default policy fails on this output."""
    fn_args = fn_args_for(trainer_inputs, tmp_path, {})
    assert len(tf.io.gfile.glob(fn_args.eval_files[0])) == 1
    output = tft.TFTransformOutput(fn_args.transform_output)
    by_default = data.stream(
        fn_args.eval_files, output, 64, training=False, drop_remainder=False, shuffle_seed=None, label_key=LABEL
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not apply FILE based sharding"):
        list(_worker_shard(by_default, 0))


def test_two_workers_split_the_eval_data_between_them_exactly(trainer_inputs, tmp_path):
    fn_args = fn_args_for(trainer_inputs, tmp_path, {})
    seen = []
    for index in (0, 1):
        rows = []
        for x, _ in _worker_shard(_eval_dataset(fn_args), index):
            rows += fingerprints({k: v.numpy() for k, v in x.items()})
        seen.append(rows)
    everything = split_fingerprints(trainer_inputs, "eval")
    assert len(set(everything)) == len(everything)  # fingerprints identify examples
    assert seen[0] and seen[1]
    assert not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == sorted(everything)


def _rows(dataset: tf.data.Dataset) -> list[tuple]:
    """Every row of ``dataset``'s (features, label) batches, as ``transformed.rows`` gives
    them (the label among the features, under its name); the label is never a feature."""
    rows = []
    for x, y in dataset:
        assert LABEL not in x
        rows += transformed.rows({**{k: v.numpy() for k, v in x.items()}, LABEL: y.numpy()})
    return rows


def _fingerprint_rows(dataset: tf.data.Dataset) -> list[tuple[str, int]]:
    """(fingerprint of the features, label) of every row of ``dataset``."""
    rows = []
    for x, y in dataset:
        rows += zip(fingerprints({k: v.numpy() for k, v in x.items()}), y.numpy().ravel().tolist(), strict=True)
    return rows


@pytest.fixture(scope="module")
def in_memory(trainer_inputs, tmp_path_factory):
    fn_args = fn_args_for(trainer_inputs, tmp_path_factory.mktemp("in_memory"), {})
    output = tft.TFTransformOutput(fn_args.transform_output)
    return fn_args, output


def _datasets(fn_args, output, split: str, training: bool, batch: int = 64) -> dict[str, tf.data.Dataset]:
    """input_fn's two paths over ``split``: loaded into memory, and streamed."""
    files = fn_args.train_files if split == "train" else fn_args.eval_files
    return {
        path: data.input_fn(
            files,
            output,
            batch,
            training=training,
            drop_remainder=training,
            shuffle_seed=3,
            in_memory_max_bytes=limit,
            label_key=LABEL,
        )
        for path, limit in (("in memory", 2**30), ("streamed", 0))
    }


@pytest.mark.parametrize("split", ["train", "eval"])
def test_both_paths_give_the_transform_graph_applied_to_the_raw_examples(trainer_inputs, in_memory, split):
    """Evaluation: every row once, in file order, equal to the graph applied to the raw
    examples in one call. Training: each row at most once per pass, in some order."""
    fn_args, output = in_memory
    expected = transformed.rows(transformed.graph_applied(trainer_inputs, split))
    assert len(set(expected)) == len(expected) > 128
    for path, dataset in _datasets(fn_args, output, split, training=False).items():
        assert _rows(dataset) == expected, path
    batch = 32
    per_pass = len(expected) // batch
    for path, dataset in _datasets(fn_args, output, split, training=True, batch=batch).items():
        first_pass = _rows(dataset.take(per_pass))
        assert len(first_pass) == per_pass * batch, path
        assert len(set(first_pass)) == len(first_pass) and set(first_pass) <= set(expected), path
        assert first_pass != expected[: len(first_pass)], path  # shuffled


@pytest.mark.parametrize("split", ["train", "eval"])
def test_the_trainer_gets_what_transform_wrote_when_it_materialized(trainer_inputs, materialized, in_memory, split):
    """The same rows, value for value, as the transformed examples Transform wrote before
    (the same Transform with ``materialize=True``, its own analysis of the same data)."""
    fn_args, output = in_memory
    written = sorted(transformed.rows(transformed.materialized(materialized, split)))
    assert sorted(transformed.rows(transformed.graph_applied(trainer_inputs, split))) == written
    for path, dataset in _datasets(fn_args, output, split, training=False).items():
        assert sorted(_rows(dataset)) == written, path


def test_the_transform_graph_is_loaded_once_for_every_dataset(in_memory, monkeypatch):
    fn_args, _ = in_memory
    loads = Counter()
    real = tft.output_wrapper.saved_transform_io_v2.SavedModelLoader

    class CountingLoader(real):
        def __init__(self, *args, **kwargs):
            loads["loads"] += 1
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tft.output_wrapper.saved_transform_io_v2, "SavedModelLoader", CountingLoader)
    output = tft.TFTransformOutput(fn_args.transform_output)
    for split, training in (("train", True), ("eval", False), ("train", False)):
        for dataset in _datasets(fn_args, output, split, training).values():
            for _ in dataset.take(3):
                pass
    assert loads == {"loads": 1}


def test_eval_in_memory_gives_every_row_once_with_its_label_like_streaming(in_memory):
    fn_args, output = in_memory
    datasets = _datasets(fn_args, output, "eval", training=False)
    rows = _fingerprint_rows(datasets["in memory"])
    assert rows == _fingerprint_rows(datasets["streamed"])
    assert len({fingerprint for fingerprint, _ in rows}) == len(rows) > 64  # a partial last batch too


def test_training_in_memory_shows_each_row_once_per_epoch_in_a_new_order(in_memory):
    fn_args, output = in_memory
    split = data.load_split(fn_args.train_files, output, 2**30)
    assert split is not None
    rows = int(next(iter(split.values())).shape[0])
    batch = 32
    per_epoch = rows // batch
    dataset = data.in_memory_dataset(split, batch, training=True, drop_remainder=True, shuffle_seed=7, label_key=LABEL)
    epochs = _fingerprint_rows(dataset.take(2 * per_epoch))
    first, second = epochs[: per_epoch * batch], epochs[per_epoch * batch :]
    features_only = {k: v for k, v in split.items() if k != LABEL}
    everything = set(_fingerprint_rows(tf.data.Dataset.from_tensors((features_only, split[LABEL]))))
    for epoch in (first, second):
        assert len(set(epoch)) == len(epoch) == per_epoch * batch
        assert set(epoch) <= everything
    assert first != second
    again = data.in_memory_dataset(split, batch, training=True, drop_remainder=True, shuffle_seed=7, label_key=LABEL)
    assert _fingerprint_rows(again.take(per_epoch)) == first  # one seed, one order: what several workers need


def test_splits_over_the_limit_or_tiny_ones_stream_from_the_files(in_memory):
    fn_args, output = in_memory
    assert data.load_split(fn_args.train_files, output, 0) is None
    assert data.load_split(fn_args.train_files, output, 100) is None  # a few hundred rows are more than 100 bytes


def test_a_split_smaller_than_one_batch_trains_on_whole_batches_of_its_rows_repeated(in_memory):
    fn_args, output = in_memory
    split = data.load_split(fn_args.train_files, output, 2**30)
    rows = int(next(iter(split.values())).shape[0])
    dataset = data.in_memory_dataset(
        split, rows + 7, training=True, drop_remainder=True, shuffle_seed=1, label_key=LABEL
    )
    batches = list(dataset.take(3))
    assert all(int(y.shape[0]) == rows + 7 for _, y in batches)
    everything = set(_loaded_rows(split))
    seen = set(_fingerprint_rows(tf.data.Dataset.from_tensors(batches[0])))
    # Nothing but the split's rows, a batch holding most of them (each at most twice).
    assert seen <= everything and len(seen) >= (rows + 7) // 2


def test_shuffle_seed_is_shared_by_one_execution_and_differs_between_executions():
    assert data.shared_shuffle_seed("gs://b/model_run/7") == data.shared_shuffle_seed("gs://b/model_run/7")
    assert data.shared_shuffle_seed("gs://b/model_run/7") != data.shared_shuffle_seed("gs://b/model_run/8")


def _loaded_rows(split: dict[str, tf.Tensor]) -> list[tuple[str, int]]:
    features_only = {k: v for k, v in split.items() if k != LABEL}
    return _fingerprint_rows(tf.data.Dataset.from_tensors((features_only, split[LABEL])))


def test_a_split_larger_than_training_reads_is_loaded_as_a_sample_of_all_of_it(in_memory):
    fn_args, output = in_memory
    everything = _loaded_rows(data.load_split(fn_args.train_files, output, 2**30))
    keep = len(everything) // 4
    sample = _loaded_rows(data.load_split(fn_args.train_files, output, 2**30, max_rows=keep, seed=5))
    assert len(sample) == len(set(sample)) == keep
    assert set(sample) <= set(everything)
    # Drawn from the whole split, not its first rows: some come from each half of the files.
    position = {row: i for i, row in enumerate(everything)}
    assert min(position[row] for row in sample) < len(everything) // 2 <= max(position[row] for row in sample)
    assert sample != everything[:keep]
    again = _loaded_rows(data.load_split(fn_args.train_files, output, 2**30, max_rows=keep, seed=5))
    other = _loaded_rows(data.load_split(fn_args.train_files, output, 2**30, max_rows=keep, seed=6))
    assert again == sample  # one seed, one sample
    assert set(other) != set(sample)


def test_a_split_training_reads_whole_is_loaded_whole(in_memory):
    fn_args, output = in_memory
    everything = _loaded_rows(data.load_split(fn_args.train_files, output, 2**30))
    for max_rows in (len(everything), len(everything) + 1):
        assert _loaded_rows(data.load_split(fn_args.train_files, output, 2**30, max_rows=max_rows)) == everything


def _train_split(fn_args) -> tuple[list[str], int, int]:
    """The training split's files, their bytes and their rows."""
    files = sorted(f for pattern in fn_args.train_files for f in tf.io.gfile.glob(pattern))
    return files, sum(tf.io.gfile.stat(f).length for f in files), data.count_records(files)


def test_a_split_over_the_limit_is_loaded_when_the_rows_its_passes_read_fit(in_memory):
    """The limit weighs the rows to load (their share of the files' bytes), not the whole
    split: a sample of what training reads stays in memory however large the split."""
    fn_args, output = in_memory
    files, size, rows = _train_split(fn_args)
    limit = size // 2
    assert data.load_split(files, output, limit) is None
    sample = data.load_split(files, output, limit, max_rows=rows // 4, seed=5)
    assert len(_loaded_rows(sample)) == rows // 4
    assert data.load_split(files, output, limit, max_rows=rows * 3 // 4) is None


def test_an_in_memory_limit_below_one_batch_is_refused_with_its_fix(in_memory):
    fn_args, output = in_memory
    files, size, rows = _train_split(fn_args)
    limit = 10 * size // rows  # ten rows' worth of bytes
    with pytest.raises(ValueError, match=r"in_memory_max_mb=\S+ cannot hold one batch of 64 rows .*in_memory_max_mb=0"):
        data.input_fn(files, output, 64, training=True, in_memory_max_bytes=limit, label_key=LABEL)
    # Zero streams, and a limit holding a batch but not the split streams too.
    for streamed_limit in (0, 100 * size // rows):
        dataset = data.input_fn(files, output, 64, training=True, in_memory_max_bytes=streamed_limit, label_key=LABEL)
        assert int(next(iter(dataset))[1].shape[0]) == 64


def _distributed_rows(strategy: tf.distribute.Strategy, dataset: tf.data.Dataset, batches: int | None = None):
    """(fingerprint, label) rows of ``dataset`` as the strategy's one replica gets them, and
    the size of each batch it got."""
    rows, sizes = [], []
    for step, (x, y) in enumerate(strategy.experimental_distribute_dataset(dataset)):
        if batches is not None and step == batches:
            break
        sizes.append(int(y.shape[0]))
        rows += zip(fingerprints({k: v.numpy() for k, v in x.items()}), y.numpy().ravel().tolist(), strict=True)
    return rows, sizes


@pytest.mark.parametrize("split", ["train", "eval"])
def test_under_a_strategy_streamed_batches_are_the_global_batch_and_the_rows_in_memory_ones(in_memory, split):
    """What fit gets under MirroredStrategy with one replica (this process's CPU), where
    tf.distribute's data sharding used to hand the stream's 4096-row blocks through whole."""
    fn_args, output = in_memory
    strategy = tf.distribute.MirroredStrategy()
    batch = 32
    evaluation = {
        path: _distributed_rows(strategy, dataset)
        for path, dataset in _datasets(fn_args, output, split, False, batch).items()
    }
    (memory_rows, memory_sizes), (streamed_rows, streamed_sizes) = evaluation["in memory"], evaluation["streamed"]
    assert streamed_rows == memory_rows and streamed_sizes == memory_sizes
    assert set(streamed_sizes[:-1]) == {batch} and 0 < streamed_sizes[-1] <= batch
    per_pass = len(memory_rows) // batch
    for path, dataset in _datasets(fn_args, output, split, True, batch).items():
        rows, sizes = _distributed_rows(strategy, dataset, batches=per_pass)
        assert sizes == [batch] * per_pass, path
        assert len(set(rows)) == len(rows) and set(rows) <= set(memory_rows), path


def test_a_tpu_gets_static_batches_from_the_stream(in_memory):
    """What a TPU's host feeds (no in-memory split, every batch whole, every shape static),
    as far as it can be checked without a TPU."""
    fn_args, output = in_memory
    train, evaluation = data.datasets(fn_args, output, 48, True, None, 0, label_key=LABEL, replicas=8)
    for dataset in (train, evaluation):
        features, label = dataset.element_spec
        assert label.shape.is_fully_defined() and label.shape[0] == 48
        assert all(spec.shape.is_fully_defined() and spec.shape[0] == 48 for spec in features.values())
    assert {int(y.shape[0]) for _, y in evaluation} == {48}


# --- features that are not dense ------------------------------------------------------------


SPARSE_ROWS = 300


@pytest.fixture(scope="module")
def sparse_split(tmp_path_factory) -> tuple[list[str], tft.TFTransformOutput]:
    """A Transform output whose features include a sparse one (a vocabulary of a
    variable-length column), analysed by TFT's own Beam transforms, and raw examples of
    ``SPARSE_ROWS`` rows: row i has the tags ``["a", "b"][: i % 3]``, x = i, y = i % 2."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

    root = tmp_path_factory.mktemp("sparse")
    raw_spec = {
        "tags": tf.io.VarLenFeature(tf.string),
        "x": tf.io.FixedLenFeature([], tf.float32),
        "y": tf.io.FixedLenFeature([], tf.int64),
    }

    def preprocessing_fn(inputs):
        return {
            "tags_id": tft.compute_and_apply_vocabulary(inputs["tags"]),
            "x_z": tft.scale_to_z_score(inputs["x"]),
            "y": inputs["y"],
        }

    rows = [{"tags": [b"a", b"b"][: i % 3], "x": float(i), "y": i % 2} for i in range(SPARSE_ROWS)]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    with beam.Pipeline(options=PipelineOptions([])) as pipeline, tft_beam.Context(temp_dir=str(root / "tmp")):
        transform_fn = (pipeline | beam.Create(rows), metadata) | tft_beam.AnalyzeDataset(preprocessing_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(str(root / "transform"))
    # The raw schema beside it, as TFX's Transform writes it: the Trainer parses with it.
    metadata_io.write_metadata(metadata, str(root / "transform" / tft.TFTransformOutput.RAW_METADATA_DIR))
    path = str(root / "data.gz")
    with tf.io.TFRecordWriter(path, options="GZIP") as writer:
        for row in rows:
            feature = {
                "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=row["tags"])),
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[row["x"]])),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[row["y"]])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    return [path], tft.TFTransformOutput(str(root / "transform"))


def test_a_feature_that_is_not_dense_streams_in_whole_batches_under_a_strategy(sparse_split):
    files, output = sparse_split
    assert not isinstance(output.transformed_feature_spec()["tags_id"], tf.io.FixedLenFeature)
    assert data.load_split(files, output, 2**30) is None
    strategy = tf.distribute.MirroredStrategy()
    batch = 32
    tags, labels, sizes = [], [], []
    evaluation = data.input_fn(
        files, output, batch, training=False, drop_remainder=False, in_memory_max_bytes=2**30, label_key="y"
    )
    for x, y in strategy.experimental_distribute_dataset(evaluation):
        sizes.append(int(y.shape[0]))
        assert int(x["tags_id"].dense_shape[0]) == sizes[-1]
        tags += tf.RaggedTensor.from_sparse(x["tags_id"]).to_list()
        labels += y.numpy().ravel().tolist()
    # "a" is in two rows of three, "b" in one: ids 0 and 1 by frequency.
    assert tags == [[0, 1][: i % 3] for i in range(SPARSE_ROWS)]
    assert labels == [i % 2 for i in range(SPARSE_ROWS)]
    assert set(sizes[:-1]) == {batch} and sizes[-1] == SPARSE_ROWS % batch
    training = data.input_fn(files, output, batch, training=True, in_memory_max_bytes=2**30, label_key="y")
    for step, (x, y) in enumerate(strategy.experimental_distribute_dataset(training)):
        if step == 20:  # two passes
            break
        assert int(y.shape[0]) == int(x["tags_id"].dense_shape[0]) == batch


@pytest.fixture
def numbered_files(tmp_path) -> tuple[list[str], list[int]]:
    """Two gzipped TFRecord files of the numbers 0..n as text, one of them more than two
    blocks long, the other shorter than one."""
    sizes = [2 * data.COUNT_BLOCK_ROWS + 7, 100]
    files, first = [], 0
    for index, size in enumerate(sizes):
        path = str(tmp_path / f"part-{index}.gz")
        with tf.io.TFRecordWriter(path, options="GZIP") as writer:
            for number in range(first, first + size):
                writer.write(str(number).encode())
        files.append(path)
        first += size
    return files, sizes


def _numbers(dataset: tf.data.Dataset) -> list[int]:
    return [int(record) for record in dataset.as_numpy_iterator()]


def test_sample_records_keeps_exactly_the_drawn_records_of_every_file(numbered_files):
    files, sizes = numbered_files
    rows = sum(sizes)
    assert data.records_per_file(files) == sizes
    kept = _numbers(data.sample_records(files, sizes, 1000, seed=1))
    assert len(kept) == len(set(kept)) == 1000 and set(kept) <= set(range(rows))
    assert _numbers(data.sample_records(files, sizes, 1000, seed=1)) == kept  # one seed, one order
    all_but_three = _numbers(data.sample_records(files, sizes, rows - 3, seed=1))
    assert len(set(all_but_three)) == rows - 3 and set(all_but_three) <= set(range(rows))
    # The first file's last, partial block and the second file are drawn from too.
    assert any(2 * data.COUNT_BLOCK_ROWS <= n < sizes[0] for n in all_but_three)
    assert sum(n >= sizes[0] for n in all_but_three) >= sizes[1] - 3
    assert sorted(_numbers(data.sample_records(files, sizes, rows, seed=1))) == list(range(rows))


def test_count_records_counts_every_record(in_memory):
    fn_args, output = in_memory
    assert data.count_records(fn_args.train_files) == len(
        _loaded_rows(data.load_split(fn_args.train_files, output, 2**30))
    )


def test_untuned_reads_the_same_elements_without_autotuning():
    dataset = tf.data.Dataset.range(100).map(lambda x: x * 2, num_parallel_calls=tf.data.AUTOTUNE)
    once = data.untuned(dataset)
    assert once.options().autotune.enabled is False
    assert dataset.options().autotune.enabled is not False
    assert list(once.as_numpy_iterator()) == list(dataset.as_numpy_iterator())


def test_counts_and_the_in_memory_load_read_without_autotuning(in_memory, monkeypatch):
    fn_args, output = in_memory
    passes: list[str] = []
    real = data.untuned
    monkeypatch.setattr(data, "untuned", lambda dataset: passes.append("pass") or real(dataset))
    monkeypatch.setattr(data, "_COUNTED", {})
    rows = data.count_records(fn_args.train_files)
    assert passes == ["pass"]
    data.load_split(fn_args.train_files, output, 2**30)
    assert passes == ["pass"] * 2
    # Counted once per process: the budget, the in-memory decision and the sample ask alike.
    assert data.count_records(fn_args.train_files) == rows and passes == ["pass"] * 2


def test_fits_batches_from_memory_are_untuned_and_streamed_ones_tuned(in_memory):
    """Nothing to tune in batches cut from rows in memory, and no tuning thread for a
    training process to wait on at its end; streamed files keep tf.data's autotuning."""
    fn_args, output = in_memory
    for training in (True, False):
        loaded = data.input_fn(fn_args.train_files, output, 16, training, in_memory_max_bytes=2**30, label_key=LABEL)
        streamed = data.input_fn(fn_args.train_files, output, 16, training, label_key=LABEL)
        assert loaded.options().autotune.enabled is False
        assert streamed.options().autotune.enabled is not False


def test_a_capped_validation_is_a_fixed_uniform_sample_loaded_once(trainer_inputs, in_memory):
    """eval_steps batches, drawn from the whole eval split (not its first rows), the same
    rows every time, in memory (its size known: one distributed iterator per validation)."""
    fn_args, output = in_memory
    batch, steps = 16, 3
    fn_args.eval_steps = steps
    try:
        draws = [data.datasets(fn_args, output, batch, False, None, 2**30, label_key=LABEL)[1] for _ in range(2)]
    finally:
        fn_args.eval_steps = None
    assert int(draws[0].cardinality()) == steps
    rows = [fingerprint for fingerprint, _ in _fingerprint_rows(draws[0])]
    assert rows == [fingerprint for fingerprint, _ in _fingerprint_rows(draws[1])]
    split = split_fingerprints(trainer_inputs, "eval")
    assert len(rows) == len(set(rows)) == steps * batch
    assert set(rows) <= set(split)
    assert rows != split[: steps * batch]


@pytest.mark.parametrize("batch", [64, 256])
def test_a_stream_transformed_batch_by_batch_gives_the_batches_of_the_stream_in_blocks(in_memory, batch):
    """``in_blocks=False`` (ParameterServerStrategy's exact evaluation): the same batches,
    rows and order, none larger than the batch."""
    fn_args, output = in_memory

    def batches(in_blocks: bool) -> list[list[tuple[str, int]]]:
        dataset = data.stream(
            fn_args.eval_files,
            output,
            batch,
            training=False,
            drop_remainder=False,
            shuffle_seed=None,
            label_key=LABEL,
            in_blocks=in_blocks,
        )
        return [_fingerprint_rows(tf.data.Dataset.from_tensors(element)) for element in dataset]

    by_batch = batches(in_blocks=False)
    assert by_batch == batches(in_blocks=True)
    assert {len(rows) for rows in by_batch[:-1]} <= {batch} and 0 < len(by_batch[-1]) <= batch
