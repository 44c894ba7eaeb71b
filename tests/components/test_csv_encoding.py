"""Reading CSV blocks: a reader the caller leaves early must not hang the process; a problem's
header names read as its feature names; records as TensorFlow writes them, split as TFX
splits them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
from pyarrow import csv as pa_csv

from components import csv_encoding
from models import problem as models_problem

BLOCK = 1 << 16
# About 4 MB: many blocks more than Arrow reads ahead.
ROWS = 200_000


def _csv(path: Path, rows: int = ROWS) -> Path:
    lines = ["trip_miles,company,fare"] + [f"{i % 97}.5,Company {i % 13},{i % 31}.25" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_local_files_are_read_by_arrow_itself(tmp_path, monkeypatch):
    """Arrow reads ahead on a thread; a Python file object needs the GIL for each read, so
    a reader released early (while Python holds the GIL) would wait on that thread forever."""
    sources = []
    open_csv = pa_csv.open_csv

    def spy(source, **kwargs):
        sources.append(source)
        return open_csv(source, **kwargs)

    monkeypatch.setattr(pa_csv, "open_csv", spy)
    blocks = csv_encoding.read_blocks(str(_csv(tmp_path / "data.csv")), block_bytes=BLOCK)
    assert next(blocks).num_rows
    blocks.close()
    assert len(sources) == 1 and isinstance(sources[0], pa.NativeFile)


def test_a_python_file_left_early_is_read_to_its_end_first(tmp_path, monkeypatch):
    path = _csv(tmp_path / "data.csv")
    opened = []

    class Counting(csv_encoding._Readable):
        """Counts the bytes read through this file object."""

        total = 0

        def readinto(self, buffer):
            n = super().readinto(buffer)
            self.total += n
            return n

    def open_counting(remote_path, mode):
        opened.append(Counting(open(remote_path.split("://", 1)[1], mode)))
        return opened[-1]

    # gs:// and other file systems come through TFX fileio as Python file objects.
    monkeypatch.setattr(csv_encoding, "_open", open_counting)
    blocks = csv_encoding.read_blocks(f"remote://{path}", block_bytes=BLOCK)
    first = next(blocks)
    blocks.close()
    assert first.num_rows and first.num_rows < ROWS
    # The header is read through a file object of its own; the blocks through the last one.
    assert opened[-1].total == path.stat().st_size


def test_every_block_is_read_either_way(tmp_path, monkeypatch):
    path = _csv(tmp_path / "data.csv")
    local = sum(block.num_rows for block in csv_encoding.read_blocks(str(path), block_bytes=BLOCK))
    monkeypatch.setattr(csv_encoding, "_open", lambda p, mode: csv_encoding._Readable(open(p.split("://", 1)[1], mode)))
    remote = sum(block.num_rows for block in csv_encoding.read_blocks(f"remote://{path}", block_bytes=BLOCK))
    assert local == remote == ROWS


# ---------------------------------------------------------------- header names


def _write(path: Path, header: list[str], rows: list[str]) -> str:
    path.write_text("\n".join([",".join(header), *rows]) + "\n", encoding="utf-8")
    return str(path)


def test_a_problems_header_names_become_its_feature_names(tmp_path):
    header = ["Trip Miles", "Company (name)", "fare", "2023 Größe"]
    rows = ["1.5,A,3,7", "2.5,,4,8", "0.5,B,5,"]
    names = models_problem.feature_names(header)
    headers = {feature: name for name, feature in names.items()}
    path = _write(tmp_path / "people.csv", header, rows)
    features = [names[h] for h in header]
    assert csv_encoding.feature_names(path) == header  # no problem, no renaming
    assert csv_encoding.feature_names(path, headers) == features
    types = csv_encoding.infer_column_types([path], headers)
    assert list(types) == features
    (block,) = csv_encoding.read_blocks(path, headers=headers)
    assert block.schema.names == features
    records = csv_encoding.encode_block(block, types)
    import tensorflow as tf

    assert all(set(tf.train.Example.FromString(r).features.feature) == set(features) for r in records)
    # A file whose header already has the feature names reads the same, byte for byte.
    renamed = _write(tmp_path / "features.csv", features, rows)
    (same,) = csv_encoding.read_blocks(renamed, headers=headers)
    assert csv_encoding.encode_block(same, csv_encoding.infer_column_types([renamed], headers)) == records


def test_a_header_renamed_in_the_file_is_named_with_the_fix(tmp_path):
    header = ["Monthly Charges", "Contract Type", "churned"]
    headers = {feature: name for name, feature in models_problem.feature_names(header).items()}
    feature = next(f for f, h in headers.items() if h == "Monthly Charges")
    path = _write(tmp_path / "new-span.csv", ["Monthly charges", "Contract Type", "churned"], ["1,a,yes"])
    with pytest.raises(csv_encoding.CsvFileError) as raised:
        csv_encoding.feature_names(path, headers)
    message = str(raised.value)
    assert "new-span.csv" in message and "'Monthly charges'" in message
    assert "rename it back to 'Monthly Charges'" in message and f"[columns] {feature} = 'Monthly charges'" in message
    both = _write(tmp_path / "both.csv", ["Monthly Charges", feature, "churned"], ["1,2,yes"])
    with pytest.raises(csv_encoding.CsvFileError, match=f"'Monthly Charges' and '{feature}'.*one column"):
        csv_encoding.feature_names(both, headers)


def _tensorflow_bytes(batch: pa.RecordBatch) -> list[bytes]:
    """tfx_bsl's encoder, each record re-serialised by TensorFlow deterministically."""
    import tensorflow as tf
    from tfx_bsl.coders import example_coder

    encoded = example_coder.RecordBatchToExamplesEncoder().encode(batch)
    return [tf.train.Example.FromString(record).SerializeToString(deterministic=True) for record in encoded]


# Every varint length (ints of 1 to 10 bytes, negatives), floats' special values, text whose
# length prefix takes 1, 2 and 3 bytes, empty text, non-ASCII names and values, empty cells
# and a column that never has a value.
WIRE_CSV = (
    "n,x,s,é name,never\n"
    + "".join(
        f"{sign}{10**digits},{value},{'y' * size},Zürich {digits},\n"
        for digits in range(19)
        for sign in ("", "-")
        for value, size in (("1.5", 0), ("-0.0", 1), ("inf", 127), ("nan", 128), ("-inf", 20000), ("3.4e38", 3))
    )
    + ",,,,\n"
    + "9223372036854775807,1e-45,,,\n-9223372036854775808,,z,,\n"
)


@pytest.mark.parametrize("block_rows", [1, 7, None])
def test_records_are_tensorflows_deterministic_bytes(tmp_path, block_rows):
    path = tmp_path / "wire.csv"
    path.write_text(WIRE_CSV, encoding="utf-8")
    types = csv_encoding.infer_column_types([str(path)])
    assert types["n"] == csv_encoding.ColumnType.INT and types["never"] == csv_encoding.ColumnType.UNKNOWN
    (block,) = csv_encoding.read_blocks(str(path))
    batch = csv_encoding.feature_batch(block, types)
    slices = [batch] if block_rows is None else [batch.slice(i, block_rows) for i in range(0, len(batch), block_rows)]
    for part in slices:
        assert csv_encoding.encode_features(part) == _tensorflow_bytes(part)


def test_lists_of_several_values_are_encoded_by_tfx_bsl(tmp_path):
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([[1, 2], [], [3]], pa.large_list(pa.int64())),
            pa.array([[b"a"], [b"b", b"c"], []], pa.large_list(pa.large_binary())),
        ],
        ["a", "b"],
    )
    assert csv_encoding.encode_features(batch) == _tensorflow_bytes(batch)


def test_features_are_in_protobufs_deterministic_order_when_names_begin_one_another():
    """Python's protobuf (upb) puts a map key after the longer keys it begins: the split
    hash reads these bytes, so the order must be protobuf's, not Python's sort."""
    import random

    pieces = ["a", "b", "ab", "é", "_", "z", "A", "0"]
    rng = random.Random(0)
    for _ in range(200):
        names = sorted({"".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))) for _ in range(6)})
        batch = pa.RecordBatch.from_arrays([pa.array([[1], []], pa.large_list(pa.int64())) for _ in names], names)
        assert csv_encoding.encode_features(batch) == _tensorflow_bytes(batch), names


def _records(count: int, seed: int = 0) -> list[bytes]:
    """Records of lengths 0 to 2,000 bytes, repeated lengths among them."""
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(n)) for n in rng.integers(0, 2000, count)] + [b"", b"x" * 300, b"y" * 300]


@pytest.mark.parametrize("buckets", [[2, 3], [1], [7, 10], [1, 5, 100], [(1 << 60), (1 << 61)]])
def test_split_indices_are_tfxs_partition_of_each_record(buckets):
    records = _records(3000)
    expected = [csv_encoding.split_index(record, buckets) for record in records]
    assert csv_encoding.split_indices(records, buckets).tolist() == expected
    assert len(set(expected)) == len(buckets)


def test_tfrecord_frames_are_what_tensorflows_writer_writes(tmp_path):
    records = _records(500)
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    array = pa.array(records, pa.large_binary())
    frames = csv_encoding.tfrecord_frames(array, csv_encoding.record_crcs(records))
    assert frames.to_pybytes() == Path(path).read_bytes()
    # Rows taken from a larger array (an offset into its buffers), as the writer is given them.
    rows = pa.array([3, 1, 400], pa.int64())
    taken = array.take(rows)
    with tf.io.TFRecordWriter(path) as writer:
        for row in rows.to_pylist():
            writer.write(records[row])
    crcs = csv_encoding.record_crcs(records)[rows.to_numpy()]
    assert csv_encoding.tfrecord_frames(taken, crcs).to_pybytes() == Path(path).read_bytes()
    sliced = array.slice(10, 5)
    with tf.io.TFRecordWriter(path) as writer:
        for record in records[10:15]:
            writer.write(record)
    assert (
        csv_encoding.tfrecord_frames(sliced, csv_encoding.record_crcs(records[10:15])).to_pybytes()
        == Path(path).read_bytes()
    )
