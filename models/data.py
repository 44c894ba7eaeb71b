"""The Trainer's input pipeline: ExampleGen's raw examples through the Transform graph, as
(features, label) datasets of global batches; a split small enough is loaded once into
memory, a larger one streams from the files. docs/model.md ("Batches, input and
distributed training") says why and how.
"""

from __future__ import annotations

import dataclasses
import math
import random
import zlib
from collections.abc import Callable, Sequence

import tensorflow as tf
import tensorflow_transform as tft
from absl import logging

# Records parsed and transformed per step when a split is loaded into memory (chunks run in
# parallel).
LOAD_CHUNK_ROWS = 16384
# Records counted, or drawn from, per step.
COUNT_BLOCK_ROWS = 4096
# Streaming: records parsed and transformed per map call, then cut into batches. Each call
# has a fixed cost, so blocks larger than a batch keep up with training better.
STREAM_BLOCK_ROWS = 4096
# Streaming training: records shuffled in a buffer of this many (TFXIO's default).
SHUFFLE_BUFFER_ROWS = 10000


def input_fn(
    file_pattern: Sequence[str],
    tf_transform_output: tft.TFTransformOutput,
    batch_size: int,
    training: bool,
    drop_remainder: bool = True,
    shuffle_seed: int | None = None,
    in_memory_max_bytes: int = 0,
    max_rows: int | None = None,
    *,
    label_key: str,
    replicas: int = 1,
) -> tf.data.Dataset:
    """Batched (transformed features, transformed label) from ExampleGen's raw examples,
    ``batch_size`` being the global batch.

    A split whose files total at most ``in_memory_max_bytes`` is parsed and transformed
    once into memory and batches are cut from it (``in_memory_dataset``): the training
    steps then never wait for the input; given ``max_rows`` (the rows its passes read), at
    most that many, drawn from the whole split. Otherwise the files stream (``stream``).
    Training repeats forever, shuffles and drops the last partial batch (static shapes);
    evaluation makes one ordered pass. With several workers, pass the same
    ``shuffle_seed`` to all of them: sharding by data needs one element order everywhere.
    ``label_key``: the transformed label (``Problem.label_key``), split off as the target.
    ``replicas``: the strategy's replicas in sync (``distribute_by``).
    """
    in_memory = load_split(
        file_pattern, tf_transform_output, in_memory_max_bytes, max_rows, shuffle_seed, batch_size=batch_size
    )
    if in_memory is not None:
        dataset = in_memory_dataset(in_memory, batch_size, training, drop_remainder, shuffle_seed, label_key=label_key)
        if dataset is not None:
            return untuned(distribute_by(dataset, replicas).prefetch(tf.data.AUTOTUNE))
    dataset = stream(
        file_pattern, tf_transform_output, batch_size, training, drop_remainder, shuffle_seed, label_key=label_key
    )
    return distribute_by(dataset, replicas).prefetch(tf.data.AUTOTUNE)


def transform_records(tf_transform_output: tft.TFTransformOutput) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
    """For ``Dataset.map``: serialized raw tf.Examples to every transformed feature, label
    included. The Transform graph is loaded here, once (``TFTransformOutput`` keeps one
    layer, which the export reuses), and only called in the traced map functions."""
    raw_spec = tf_transform_output.raw_feature_spec()
    layer = tf_transform_output.transform_features_layer()
    return without_autograph(lambda records: layer(tf.io.parse_example(records, raw_spec)))


def without_autograph(fn: Callable) -> Callable:
    """``fn`` as tf.data traces it (``map``, ``interleave``, ``reduce``...), minus AutoGraph:
    tf.data converts its functions and every function they call (through Keras's layer
    call, the Transform layer's code), re-parsing their sources in every process, though
    none of the input pipeline's has tensor-dependent Python control flow."""
    return tf.autograph.experimental.do_not_convert(fn)


def untuned(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` without tf.data's autotuning: for a pass read once from Python (counts,
    the in-memory load) and for ``fit``'s batches cut from rows in memory, where there is
    nothing to tune. Deleting an autotuned iterator joins its tuning thread, which in
    TensorFlow 2.16 can miss the cancellation and sleep until its next scheduled
    optimization, up to the iterator's own age (``models/iterator_release.py`` has the
    details), and a process that ends after training waits for it; without autotuning no
    such thread exists. Parallel calls given as AUTOTUNE then keep tf.data's starting
    parallelism (one per core, at most 16), untuned: as fast for these reads
    (docs/performance.md).
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def split_label(transformed: dict[str, tf.Tensor], label_key: str) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    """(the model's inputs, the label): the transformed label is the target, not an input."""
    inputs = dict(transformed)
    label = inputs.pop(label_key)
    return inputs, label


def _files(file_pattern: Sequence[str]) -> list[str]:
    return sorted(f for pattern in file_pattern for f in tf.io.gfile.glob(pattern))


def _compression(files: Sequence[str]) -> str:
    """ExampleGen writes gzipped TFRecords (``.gz``)."""
    return "GZIP" if all(f.endswith(".gz") for f in files) else ""


def raw_records(file_pattern: Sequence[str]) -> tf.data.Dataset:
    """The serialized records of the files the patterns match, file after file in name order."""
    files = _files(file_pattern)
    return tf.data.TFRecordDataset(files, compression_type=_compression(files))


def count_records(file_pattern: Sequence[str]) -> int:
    """How many records the files hold (read through once)."""
    return sum(records_per_file(_files(file_pattern)))


# Record counts by (file, size): TFX artifacts' files never change once written, and the
# budget, the in-memory decision and the sample all need the training split's counts.
_COUNTED: dict[tuple[str, int], int] = {}


def records_per_file(files: Sequence[str]) -> list[int]:
    """How many records each file holds, the files read in parallel (once per process)."""
    keys = [(f, tf.io.gfile.stat(f).length) for f in files]
    missing = [key for key in keys if key not in _COUNTED]
    if missing:
        _COUNTED.update(zip(missing, _count_each([f for f, _ in missing]), strict=True))
    return [_COUNTED[key] for key in keys]


def _count_each(files: Sequence[str]) -> list[int]:
    blocks = _blocks_per_file(
        files, lambda i, blocks: blocks.map(without_autograph(lambda block: (i, _rows_in(block)))), deterministic=False
    )
    counts = untuned(blocks).reduce(
        tf.zeros([len(files)], tf.int64),
        without_autograph(lambda total, count: tf.tensor_scatter_nd_add(total, [[count[0]]], [count[1]])),
    )
    return [int(count) for count in counts]


def record_blocks(files: Sequence[str], block_rows: int = COUNT_BLOCK_ROWS) -> tf.data.Dataset:
    """The files' serialized records in blocks of up to ``block_rows``, the files read in
    parallel and the blocks in no particular order: for whole-split reductions (counts)."""
    return _blocks_per_file(files, lambda _, blocks: blocks, deterministic=False, block_rows=block_rows)


def _blocks_per_file(
    files: Sequence[str],
    per_file: Callable[[tf.Tensor, tf.data.Dataset], tf.data.Dataset],
    deterministic: bool,
    block_rows: int = COUNT_BLOCK_ROWS,
) -> tf.data.Dataset:
    """``per_file(file index, the file's records in blocks of up to block_rows)`` for every
    file, the files read in parallel. Blocks, not records, cross the interleave: records one
    at a time through a parallel interleave measured several times slower than one file
    after the other."""
    names = tf.constant(list(files), tf.string)
    compression = _compression(files)
    return tf.data.Dataset.range(len(files)).interleave(
        without_autograph(
            lambda i: per_file(i, tf.data.TFRecordDataset(names[i], compression_type=compression).batch(block_rows))
        ),
        cycle_length=max(1, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )


def _rows_in(block: tf.Tensor) -> tf.Tensor:
    return tf.shape(block, out_type=tf.int64)[0]


def sample_records(files: Sequence[str], counts: Sequence[int], keep: int, seed: int) -> tf.data.Dataset:
    """``keep`` of the records of ``files`` (holding ``counts`` records each), drawn
    uniformly from all of them (seeded), in one order for given files. The files are read
    in parallel, a block of records per step, each block cut by its slice of the draw."""
    rows = sum(counts)
    drawn = tf.random.experimental.stateless_shuffle(tf.range(rows, dtype=tf.int64), seed=[seed, rows])[:keep]
    mask = tf.scatter_nd(drawn[:, None], tf.ones([keep], tf.bool), [rows])
    # [file, block, row in block]: each file's share of the draw, in blocks.
    blocks = max(-(-count // COUNT_BLOCK_ROWS) for count in counts)
    starts = [sum(counts[:i]) for i in range(len(counts))]
    masks = tf.stack(
        [
            tf.reshape(tf.pad(mask[start : start + count], [[0, blocks * COUNT_BLOCK_ROWS - count]]), [blocks, -1])
            for start, count in zip(starts, counts, strict=True)
        ]
    )

    def kept(i: tf.Tensor, file_blocks: tf.data.Dataset) -> tf.data.Dataset:
        return file_blocks.enumerate().map(
            without_autograph(lambda j, block: tf.boolean_mask(block, masks[i][j][: tf.shape(block)[0]]))
        )

    return _blocks_per_file(files, kept, deterministic=True).unbatch()


def stream(
    file_pattern: Sequence[str],
    tf_transform_output: tft.TFTransformOutput,
    batch_size: int,
    training: bool,
    drop_remainder: bool,
    shuffle_seed: int | None,
    *,
    label_key: str,
    in_blocks: bool = True,
) -> tf.data.Dataset:
    """(features, label) batches read from the files as training consumes them.

    Records are read (files interleaved in parallel), shuffled record by record for
    training (a seeded buffer, a new order each pass), parsed and transformed
    ``STREAM_BLOCK_ROWS`` at a time in parallel map calls, then cut into batches
    (``rebatch``: the batches ``batch`` would make of the same records). Parsing inside the
    parallel map lets it use every core of the host; TFXIO parses on one thread.

    ``in_blocks=False``: the same batches, each parsed and transformed by its own map call,
    without ``rebatch``: tf.data's auto-sharding by DATA given no replica count
    (ParameterServerStrategy's exact evaluation) cannot shard a pipeline holding a rebatch
    (it falls back to FILE sharding, which fails on a split of one file).
    """
    files = _files(file_pattern)
    if not files:
        raise ValueError(f"No files match {list(file_pattern)}")
    names = tf.data.Dataset.from_tensor_slices(files)
    if training:
        names = names.shuffle(len(files), seed=shuffle_seed)
    compression = _compression(files)
    records = names.interleave(
        without_autograph(lambda name: tf.data.TFRecordDataset(name, compression_type=compression)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    if training:
        records = records.shuffle(SHUFFLE_BUFFER_ROWS, seed=shuffle_seed).repeat()
    transform = transform_records(tf_transform_output)
    if not in_blocks:
        return records.batch(batch_size, drop_remainder=drop_remainder).map(
            without_autograph(lambda batch: split_label(transform(batch), label_key)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    return (
        records.batch(max(batch_size, STREAM_BLOCK_ROWS))
        .map(
            without_autograph(lambda block: split_label(transform(block), label_key)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .rebatch(batch_size, drop_remainder=drop_remainder)
    )


def load_split(
    file_pattern: Sequence[str],
    tf_transform_output: tft.TFTransformOutput,
    max_bytes: int,
    max_rows: int | None = None,
    seed: int | None = None,
    *,
    batch_size: int = 1,
) -> dict[str, tf.Tensor] | None:
    """The rows of a split, parsed and transformed (one tensor per transformed feature,
    label included), when the rows to load come from at most ``max_bytes`` of its raw files
    and every transformed feature is dense; None otherwise (stream it instead).

    With ``max_rows`` (what the passes over it will read: training's steps, a capped
    validation), a split holding more rows is loaded as a uniform sample of ``max_rows`` of
    them drawn from the whole split (``seed``): memory then stays flat however large the
    data, and the passes still see rows from all of it, where a stream, and a prefix of it,
    would see only the first rows of the files. The rows to load are weighed by their share
    of the files' bytes. A positive ``max_bytes`` below one batch of ``batch_size`` rows
    is a setting that cannot work: ValueError.
    """
    files = _files(file_pattern)
    if not files:
        return None
    if max_bytes <= 0:
        logging.info(
            "Streaming %d file(s): no in-memory limit (in_memory_max_mb 0, several workers or a TPU)", len(files)
        )
        return None
    size = sum(tf.io.gfile.stat(f).length for f in files)
    spec = tf_transform_output.transformed_feature_spec()
    not_dense = sorted(name for name, s in spec.items() if not isinstance(s, tf.io.FixedLenFeature))
    if not_dense:
        logging.info("Streaming %d file(s): the transformed feature(s) %s are not dense", len(files), not_dense)
        return None
    share = _share_to_load(files, size, max_bytes, max_rows, batch_size)
    if share is None:
        return None
    return _parse_into_memory(files, tf_transform_output, spec, share, seed)


@dataclasses.dataclass(frozen=True)
class _Share:
    """The rows of a split to load: ``loaded`` of its ``rows`` (``counts`` per file; none
    counted when the whole split loads without), about ``load_bytes`` of its files."""

    counts: list[int]
    rows: int
    loaded: int
    load_bytes: float


def _share_to_load(
    files: Sequence[str], size: int, max_bytes: int, max_rows: int | None, batch_size: int
) -> _Share | None:
    """The rows to load from ``files`` (``size`` bytes), or None when they take more than
    ``max_bytes``; ValueError when even one batch would."""
    counts = records_per_file(files) if max_rows or size > max_bytes else []
    rows = sum(counts)
    loaded = min(rows, max_rows or rows)
    load_bytes = size * loaded / rows if rows else size
    if load_bytes <= max_bytes:
        return _Share(counts, rows, loaded, load_bytes)
    batch_bytes = size * batch_size / rows if rows else 0
    if batch_bytes > max_bytes:
        raise ValueError(
            f"in_memory_max_mb={max_bytes / 2**20:g} cannot hold one batch of {batch_size} rows (about "
            f"{batch_bytes / 2**20:.2f} MB of these files): set in_memory_max_mb=0 to stream the files, or at "
            f"least {math.ceil(batch_bytes / 2**20)} to load them"
        )
    logging.info(
        "Streaming %d file(s): the %d rows to read take about %.1f MB of the %.1f MB of files (in-memory limit "
        "%.1f MB, --hparam in_memory_max_mb)",
        len(files),
        loaded,
        load_bytes / 2**20,
        size / 2**20,
        max_bytes / 2**20,
    )
    return None


def _parse_into_memory(
    files: Sequence[str],
    tf_transform_output: tft.TFTransformOutput,
    spec: dict,
    share: _Share,
    seed: int | None,
) -> dict[str, tf.Tensor] | None:
    """``share`` of the files' rows parsed and transformed into one tensor per transformed
    feature (``spec``); None when there are none."""
    # Whole: the files one after the other (records one at a time through a parallel
    # interleave measured several times slower); sampled: the files in parallel, a block of
    # records at a time (sample_records).
    records = tf.data.TFRecordDataset(files, compression_type=_compression(files))
    if share.loaded < share.rows:
        records = sample_records(files, share.counts, share.loaded, random.randrange(2**31) if seed is None else seed)
        logging.info(
            "Loading a uniform sample of %d of the split's %d rows: what its passes read", share.loaded, share.rows
        )
    chunks = records.batch(LOAD_CHUNK_ROWS).map(
        transform_records(tf_transform_output), num_parallel_calls=tf.data.AUTOTUNE
    )
    transformed = list(untuned(chunks))
    if not transformed:
        return None
    data = {name: tf.concat([chunk[name] for chunk in transformed], axis=0) for name in spec}
    logging.info(
        "Parsed and transformed %d rows from %.1f MB of files into memory",
        int(tf.shape(next(iter(data.values())))[0]),
        share.load_bytes / 2**20,
    )
    return data


def in_memory_dataset(
    data: dict[str, tf.Tensor],
    batch_size: int,
    training: bool,
    drop_remainder: bool,
    shuffle_seed: int | None,
    *,
    label_key: str,
) -> tf.data.Dataset | None:
    """(features, label) batches cut from transformed rows (``load_split``): for training
    a fresh permutation of all rows every epoch (seeded per epoch, so workers given one
    seed agree), for evaluation one ordered pass. None when there are no rows to train on."""
    data, label = split_label(data, label_key)
    rows = int(tf.shape(label)[0])
    if training and 0 < rows < batch_size:
        # Fewer rows than one batch (a small data set): each epoch's permutation is of the
        # rows repeated until they fill a batch, so training still sees whole batches.
        copies = -(-batch_size // rows)
        data = {k: tf.concat([v] * copies, axis=0) for k, v in data.items()}
        label = tf.concat([label] * copies, axis=0)
        rows *= copies
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
        return tf.data.Dataset.range(2**62).flat_map(without_autograph(epoch_batches))
    dataset = tf.data.Dataset.from_tensor_slices(({k: cut(v, None) for k, v in data.items()}, cut(label, None)))
    if rows > full * batch_size and not drop_remainder:
        rest = tf.data.Dataset.from_tensors(
            ({k: v[full * batch_size :] for k, v in data.items()}, label[full * batch_size :])
        )
        dataset = dataset.concatenate(rest)
    return dataset


def distribute_by(dataset: tf.data.Dataset, replicas: int) -> tf.data.Dataset:
    """How tf.distribute is to share ``dataset`` among ``replicas`` in sync: by element
    (DATA) with several, untouched (OFF) with one.

    ExampleGen writes one file per split and Beam worker process (one on small data), and
    tf.data's default policy (AUTO, which tries FILE first) fails outright with fewer files
    than workers. By DATA, every worker reads the whole split and keeps its own slice of each
    global batch: no example is trained on twice per pass, whatever the number of files.
    One replica is one worker with nothing to share, where the DATA rewrite would break the
    streamed batches: it turns every ``rebatch`` into tf.data's legacy rebatch, which with a
    single replica passes the stream's blocks through whole (docs/performance.md).
    """
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA if replicas > 1 else tf.data.experimental.AutoShardPolicy.OFF
    )
    return dataset.with_options(options)


def shared_shuffle_seed(run_id: str) -> int:
    """A seed every worker of one Trainer execution derives alike (from its model_run
    URI), so their shuffles agree, while each execution still shuffles differently."""
    return zlib.crc32(run_id.encode()) & 0x7FFFFFFF


# The seed of a capped validation's sample: the same rows every run of a given split, so that
# runs' validation curves compare.
EVAL_SAMPLE_SEED = 0


def datasets(
    fn_args,
    tf_transform_output,
    global_batch: int,
    is_tpu: bool,
    seed: int | None,
    in_memory_bytes: int,
    train_rows: int | None = None,
    *,
    label_key: str,
    replicas: int = 1,
):
    """(train, eval) datasets of global batches for the synchronous strategies (and the
    Tuner's trials, which train as the Trainer does). ``train_rows``: how many rows the
    training steps read (steps x global batch), all a training split in memory needs."""
    train_ds = input_fn(
        fn_args.train_files,
        tf_transform_output,
        global_batch,
        training=True,
        shuffle_seed=seed,
        in_memory_max_bytes=in_memory_bytes,
        max_rows=train_rows,
        label_key=label_key,
        replicas=replicas,
    )
    # A capped validation reads at most eval_steps batches each epoch: those rows, a uniform
    # sample of the split (or all of a shorter one), are loaded once, as the training rows
    # are, where streaming would parse and transform them again every epoch.
    eval_ds = input_fn(
        fn_args.eval_files,
        tf_transform_output,
        global_batch,
        training=False,
        drop_remainder=is_tpu,
        shuffle_seed=EVAL_SAMPLE_SEED,
        in_memory_max_bytes=in_memory_bytes,
        max_rows=fn_args.eval_steps * global_batch if fn_args.eval_steps else None,
        label_key=label_key,
        replicas=replicas,
    )
    if fn_args.eval_steps:
        # Capped by the dataset, not by fit's validation_steps: given steps, Keras keeps one
        # iterator across epochs, so a split shorter than the cap was validated on after
        # the first epoch only (later epochs found it exhausted).
        eval_ds = eval_ds.take(fn_args.eval_steps)
    return train_ds, eval_ds
