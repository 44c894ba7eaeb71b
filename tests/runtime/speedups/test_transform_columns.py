"""runtime.speedups.transform_columns: the columns the fast ExampleGen keeps are, file by
file, what tfx_bsl's decoder reads from its records with the schema; within the block TFX's
Transform reads them through a TFXIO that is TFX's own but for its Beam source, and reads
the records as TFX does wherever the kept columns do not fit."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import apache_beam as beam
import pyarrow as pa
import pytest
import tensorflow as tf
import tensorflow_data_validation as tfdv
from apache_beam.testing.util import assert_that, equal_to
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.transform import executor as transform_executor
from tfx.proto import example_gen_pb2
from tfx_bsl.coders import example_coder
from tfx_bsl.tfxio import tf_example_record

from components import csv_example_gen, csv_statistics
from runtime import decoded_columns
from runtime.speedups import transform_columns
from tests.components.test_csv_statistics import EDGE_CASE_CSV

ROOT = Path(__file__).resolve().parents[3]
BUCKETS = [2, 3]


def _converted(
    csv: Path, out: Path, keep_columns: bool = True, block_bytes: int = 4 << 10
) -> tuple[dict[str, str], schema_pb2.Schema]:
    """``csv`` converted by the fast ExampleGen's workers in small blocks (many batches per
    file), and the schema TFDV infers from the train split, edited as a person may edit it:
    a feature of the data left out, and one the data lacks added."""
    patterns = {split: str(out / f"Split-{split}") for split in ("train", "eval")}
    statistics = [csv_statistics.SplitStatistics() for _ in patterns]
    csv_example_gen.convert(
        [str(csv)], list(patterns.values()), BUCKETS, 2, block_bytes=block_bytes, statistics=statistics,
        keep_columns=keep_columns,
    )  # fmt: skip
    schema = tfdv.infer_schema(statistics[0].to_proto())
    del schema.feature[0]
    schema.feature.add(name="not_in_the_data", type=schema_pb2.FLOAT)
    return {split: directory + "/*" for split, directory in patterns.items()}, schema


@pytest.fixture(scope="module")
def edge_csv(tmp_path_factory) -> Path:
    """Ties, a column never filled, numbers in text, non-ASCII, empty cells."""
    path = tmp_path_factory.mktemp("edge") / "edge.csv"
    path.write_text(EDGE_CASE_CSV)
    return path


@pytest.fixture(scope="module")
def converted(edge_csv, tmp_path_factory) -> tuple[dict[str, str], schema_pb2.Schema]:
    """The edge-case file converted once (each conversion starts two worker processes)."""
    return _converted(edge_csv, tmp_path_factory.mktemp("converted"))


def _copy_of(
    converted: tuple[dict[str, str], schema_pb2.Schema], target: Path
) -> tuple[dict[str, str], schema_pb2.Schema]:
    """The conversion's files (records and kept columns) copied to ``target``, for a test
    that deletes some: the same files a conversion into ``target`` would write."""
    patterns, schema = converted
    source = Path(patterns["train"]).parent.parent
    shutil.copytree(source, target)
    return {split: str(target / Path(pattern).relative_to(source)) for split, pattern in patterns.items()}, schema


def _decoded(record_file: str, schema: schema_pb2.Schema) -> pa.Table:
    records = [r.numpy() for r in tf.data.TFRecordDataset([record_file], compression_type="GZIP")]
    return pa.Table.from_batches(
        [example_coder.ExamplesToRecordBatchDecoder(schema.SerializeToString()).DecodeBatch(records)]
    )


TAXI_CSV = ROOT / "data" / "taxi" / "taxi.csv"
# The whole taxi file (2 MB) in 64 KB blocks: about fifteen batches per file, every row
# compared still. In 4 KB blocks (the small files' size) it made 940 blocks, most of this
# file's time, for no other path.
TAXI_BLOCK_BYTES = 64 << 10


@pytest.mark.parametrize("csv", [TAXI_CSV, ROOT / "data" / "penguins" / "penguins.csv", None], ids=str)
def test_each_files_kept_columns_are_what_tfx_decodes_from_its_records(csv, converted, tmp_path):
    """None: the edge-case file, as the module's other tests convert it."""
    block_bytes = TAXI_BLOCK_BYTES if csv == TAXI_CSV else 4 << 10
    patterns, schema = converted if csv is None else _converted(csv, tmp_path, block_bytes=block_bytes)
    arrow_schema = tf_example_record.TFExampleRecord("unused", schema=schema).ArrowSchema()
    for pattern in patterns.values():
        files = decoded_columns.kept_columns_files(pattern)
        records = sorted(glob.glob(pattern))
        assert files and len(files) == len(records) == 2
        assert decoded_columns.decodes_to(files, arrow_schema)
        for record_file, kept in zip(records, files, strict=True):
            assert os.path.basename(kept) == os.path.basename(record_file) + decoded_columns.SUFFIX
            batches = list(decoded_columns.read_batches(kept, arrow_schema))
            assert len(batches) > 1  # one per block of the file
            read = pa.Table.from_batches(batches, schema=arrow_schema)
            assert read.equals(_decoded(record_file, schema))


def test_batches_hold_at_most_the_batch_size_asked_for(converted):
    patterns, schema = converted
    arrow_schema = tf_example_record.TFExampleRecord("unused", schema=schema).ArrowSchema()
    kept = decoded_columns.kept_columns_files(patterns["train"])[0]
    whole = list(decoded_columns.read_batches(kept, arrow_schema))
    sliced = list(decoded_columns.read_batches(kept, arrow_schema, batch_size=7))
    assert max(b.num_rows for b in sliced) == 7 < max(b.num_rows for b in whole)
    assert pa.Table.from_batches(sliced).equals(pa.Table.from_batches(whole))


def _dataset(pattern: str) -> transform_executor._Dataset:
    """A split as TFX's Transform executor describes it to ``_CreateTFXIO``."""
    return transform_executor._Dataset(pattern, "tfrecords_gzip", example_gen_pb2.FORMAT_TF_EXAMPLE, None)


def _tfxio(pattern: str, schema: schema_pb2.Schema):
    return transform_executor.TransformProcessor()._CreateTFXIO(_dataset(pattern), schema)


def test_within_the_block_transform_reads_the_kept_columns_through_tfx_own_tfxio(converted):
    patterns, schema = converted
    tfx_own = _tfxio(patterns["train"], schema)
    with transform_columns.read_decoded_columns():
        kept = _tfxio(patterns["train"], schema)
    assert type(kept) is transform_columns.KeptColumnsRecord
    assert type(_tfxio(patterns["train"], schema)) is tf_example_record.TFExampleRecord
    assert transform_executor.TransformProcessor._CreateTFXIO is transform_columns.CREATE_TFXIO
    assert kept.ArrowSchema().equals(tfx_own.ArrowSchema())
    assert kept.TensorRepresentations() == tfx_own.TensorRepresentations()
    assert kept.TensorAdapter().OriginalTypeSpecs() == tfx_own.TensorAdapter().OriginalTypeSpecs()
    names = sorted(kept.TensorRepresentations())[:2]
    projected, tfx_projected = kept.Project(names), tfx_own.Project(names)
    assert projected.ArrowSchema().equals(tfx_projected.ArrowSchema()) and len(projected.ArrowSchema()) == 2


def _rows(batch: pa.RecordBatch) -> list[tuple]:
    return [tuple((name, tuple(v) if v is not None else None) for name, v in row.items()) for row in batch.to_pylist()]


def test_the_beam_source_gives_the_rows_tfx_source_gives_without_the_records(converted, tmp_path):
    """Every row and projection TFX's source gives, given again with the records gone: the
    kept columns alone are read."""
    patterns, schema = _copy_of(converted, tmp_path / "copy")
    tfx_own = _tfxio(patterns["train"], schema)
    with transform_columns.read_decoded_columns():
        kept = _tfxio(patterns["train"], schema)
    names = sorted(kept.TensorRepresentations())[1:3]
    records = sorted(glob.glob(patterns["train"]))
    expected = {
        "all": sorted(row for path in records for row in _rows(*_decoded(path, schema).to_batches())),
        "projected": sorted(
            row for path in records for row in _rows(*_decoded(path, schema).select(names).to_batches())
        ),
    }

    def assert_gives(tfxio) -> None:
        for name, source in (("all", tfxio), ("projected", tfxio.Project(names))):
            with beam.Pipeline() as pipeline:
                assert_that(pipeline | source.BeamSource() | beam.FlatMap(_rows), equal_to(expected[name]))

    assert_gives(tfx_own)
    for path in records:
        os.remove(path)
    assert_gives(kept)


def test_a_split_without_kept_columns_for_every_file_is_decoded(converted, edge_csv, tmp_path):
    patterns, schema = _copy_of(converted, tmp_path / "copy")
    os.remove(decoded_columns.kept_columns_files(patterns["eval"])[1])
    assert decoded_columns.kept_columns_files(patterns["eval"]) is None
    plain, _ = _converted(edge_csv, tmp_path / "plain", keep_columns=False)
    assert not os.path.exists(tmp_path / "plain" / decoded_columns.COLUMNS_DIR)
    assert decoded_columns.kept_columns_files(plain["train"]) is None
    assert decoded_columns.kept_columns_files(patterns["train"].removesuffix("/*") + "/data_*") is None
    with transform_columns.read_decoded_columns():
        assert type(_tfxio(patterns["train"], schema)) is transform_columns.KeptColumnsRecord
        for pattern in (patterns["eval"], plain["train"]):
            assert type(_tfxio(pattern, schema)) is tf_example_record.TFExampleRecord


def test_a_schema_typing_a_column_otherwise_is_decoded(converted):
    """The decoder fails on a feature of another kind than the schema's: so does TFX's
    Transform, and the kept columns must not hide it."""
    patterns, schema = converted
    retyped = schema_pb2.Schema()
    retyped.CopyFrom(schema)
    integer = next(f for f in retyped.feature if f.type == schema_pb2.INT)
    integer.type = schema_pb2.FLOAT
    files = decoded_columns.kept_columns_files(patterns["train"])
    tfx_own = tf_example_record.TFExampleRecord(patterns["train"], schema=retyped)
    assert not decoded_columns.decodes_to(files, tfx_own.ArrowSchema())
    with transform_columns.read_decoded_columns():
        assert type(_tfxio(patterns["train"], retyped)) is tf_example_record.TFExampleRecord


def test_raw_records_asked_for_are_read_as_tfx_reads_them(converted):
    patterns, schema = converted
    with_raw = tf_example_record.TFExampleRecord(patterns["train"], schema=schema, raw_record_column_name="raw")
    assert transform_columns._kept_columns_tfxio(with_raw, patterns["train"], schema) is None
    plain = tf_example_record.TFExampleRecord(patterns["train"], schema=schema)
    assert type(transform_columns._kept_columns_tfxio(plain, patterns["train"], schema)) is (
        transform_columns.KeptColumnsRecord
    )


@pytest.mark.parametrize("schema_bytes", [decoded_columns.SCHEMA_BYTES, 16], ids=["head", "schema-past-head"])
def test_columns_on_another_file_system_are_written_and_read_through_fileio(
    edge_csv, tmp_path, monkeypatch, schema_bytes
):
    """gs:// on Vertex; TensorFlow's ram:// file system here, in one process."""
    from tfx.dsl.io import fileio

    monkeypatch.setattr(decoded_columns, "SCHEMA_BYTES", schema_bytes)
    remote = f"ram://kept-columns-{schema_bytes}"
    fileio.makedirs(remote)
    dirs = [f"{remote}/Split-train", f"{remote}/Split-eval"]
    csv_example_gen.convert([str(edge_csv)], dirs, BUCKETS, 1, block_bytes=4 << 10, keep_columns=True)
    local = [str(tmp_path / "Split-train"), str(tmp_path / "Split-eval")]
    csv_example_gen.convert([str(edge_csv)], local, BUCKETS, 1, block_bytes=4 << 10, keep_columns=True)
    schema = tfdv.infer_schema(tfdv.generate_statistics_from_tfrecord(local[0] + "/*"))
    for remote_dir, local_dir in zip(dirs, local, strict=True):
        with transform_columns.read_decoded_columns():
            kept = _tfxio(remote_dir + "/*", schema)
        assert type(kept) is transform_columns.KeptColumnsRecord
        arrow_schema = kept.ArrowSchema()
        (remote_file,) = decoded_columns.kept_columns_files(remote_dir + "/*")
        (local_file,) = decoded_columns.kept_columns_files(local_dir + "/*")
        read = pa.Table.from_batches(list(decoded_columns.read_batches(remote_file, arrow_schema)))
        assert read.equals(pa.Table.from_batches(list(decoded_columns.read_batches(local_file, arrow_schema))))
        assert read.num_rows > 0
