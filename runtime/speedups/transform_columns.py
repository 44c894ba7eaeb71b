"""Transform reads each split's columns as the fast ExampleGen kept them
(``runtime.decoded_columns``) instead of decoding every tf.Example of the split again.

TFX's Transform executor reads a split through the TFXIO that
``TransformProcessor._CreateTFXIO`` makes: for tf.Examples, tfx_bsl's ``TFExampleRecord``,
whose Beam source reads the records and decodes them with the schema. Decoding is most of
what Transform's analysis costs at scale, and ExampleGen had those columns in hand when it
encoded the records. Within :func:`read_decoded_columns`, a split whose every record file
has its columns kept, each of a type the schema decodes to, is read through
:class:`KeptColumnsRecord`: TFX's own TFXIO for that split and schema (the same Arrow
schema, tensors, projections, TensorFlow dataset and raw records) whose Beam source reads
the kept files and gives every batch the schema's columns, as the decoder does: a feature
the schema lacks is left out, one the data lacks (or never fills) is null. Any other split
(examples from TFX's own ExampleGen, or written with the speedups off; a schema that types
a column otherwise; raw records asked for) is read as TFX reads it.

What can differ: a batch holds the rows of one CSV block of one file, where Beam's own
batches hold up to 1,000. Analyzers that combine per-batch results in floating point
(means, quantiles) may then differ in their last digits, as they do between two runs of
Beam's dynamic batching; the vocabularies and every integer result do not.

Written against TFX 1.16.0 and the tfx-bsl it pins (``runtime.speedups`` checks the
shapes of the method replaced and of the two TFXIO methods overridden);
``components.transform`` runs TFX's executor inside it.
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterator, Sequence
from typing import IO, Any

import apache_beam as beam
import pyarrow as pa
from absl import logging
from tfx.components.transform import executor as transform_executor
from tfx.dsl.io import fileio
from tfx_bsl.tfxio import tensor_representation_util, tf_example_record

from runtime import decoded_columns

# TFX's method, which the executor calls for every split it reads.
CREATE_TFXIO = transform_executor.TransformProcessor._CreateTFXIO
# What is read of a remote stream for its first message, the schema (about a hundred bytes
# a column; a longer one is read whole).
SCHEMA_BYTES = 1 << 20


def _source(path: str, head_bytes: int = -1) -> IO[bytes]:
    """A kept file to read: a local one directly; one on another file system (gs://)
    through TFX's fileio, as the checks list it, read whole (or its first ``head_bytes``)."""
    if "://" not in path:
        return pa.OSFile(path)
    with fileio.open(path, "rb") as remote:
        return pa.BufferReader(remote.read(head_bytes))


def schema_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """A kept batch with the schema's columns, in its order, as the decoder gives them."""
    columns = []
    for field in schema:
        index = batch.schema.get_field_index(field.name)
        if index < 0 or batch.schema.field(index).type == pa.null():
            columns.append(pa.nulls(batch.num_rows, field.type))
        else:
            columns.append(batch.column(index))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_batches(path: str, schema: pa.Schema, batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
    """One kept file's rows as ``schema``'s batches (of at most ``batch_size`` rows)."""
    with _source(path) as source:
        for batch in decoded_columns.read(source):
            if batch.num_rows == 0:
                continue
            batch = schema_batch(batch, schema)
            if batch_size is None:
                yield batch
            else:
                for start in range(0, batch.num_rows, batch_size):
                    yield batch.slice(start, batch_size)


class KeptColumnsRecord(tf_example_record.TFExampleRecord):
    """tfx_bsl's TFXIO for tf.Example records whose Beam source reads the records' kept
    columns (``columns_files``) instead of decoding the records."""

    def __init__(
        self,
        file_pattern: str | list[str],
        columns_files: Sequence[str],
        schema: Any,
        telemetry_descriptors: list[str] | None = None,
    ) -> None:
        super().__init__(file_pattern=file_pattern, schema=schema, telemetry_descriptors=telemetry_descriptors)
        self._columns_files = list(columns_files)

    def BeamSource(self, batch_size: int | None = None) -> beam.PTransform:  # noqa: N802 (TFXIO's name)
        files, schema = self._columns_files, self.ArrowSchema()

        @beam.ptransform_fn
        def read(pipeline: Any) -> beam.PCollection:
            return (
                pipeline
                | "ColumnsFiles" >> beam.Create(files)
                # A stage of its own, so that the runner shares the files out between workers.
                | "ShareOut" >> beam.Reshuffle()
                | "ReadColumns" >> beam.FlatMap(read_batches, schema=schema, batch_size=batch_size)
            )

        return read()

    def _ProjectImpl(self, tensor_names: list[str]) -> KeptColumnsRecord:  # noqa: N802 (TFXIO's name)
        projected = tensor_representation_util.ProjectTensorRepresentationsInSchema(self._schema, tensor_names)
        return KeptColumnsRecord(self._file_pattern, self._columns_files, projected, self.telemetry_descriptors)


def kept_columns_files(file_pattern: Any) -> list[str] | None:
    """The kept columns of every record file ``file_pattern`` (``<split dir>/*``, as TFX
    names a split's files) matches, or None unless every one has them."""
    if not isinstance(file_pattern, str) or not file_pattern.endswith("/*"):
        return None
    split_dir = file_pattern[:-2]
    directory = decoded_columns.columns_dir(split_dir)
    if not fileio.isdir(directory):
        return None
    records = {posixpath.basename(path) for path in fileio.glob(file_pattern)}
    kept = {
        decoded_columns.record_file_name(posixpath.basename(path)): path
        for path in fileio.glob(decoded_columns.columns_file(directory, "*"))
    }
    if not records or records != set(kept):
        return None
    return [kept[name] for name in sorted(records)]


def _schema(path: str) -> pa.Schema:
    try:
        with _source(path, SCHEMA_BYTES) as source:
            return decoded_columns.read_schema(source)
    except (pa.ArrowInvalid, EOFError):  # a schema longer than the head read (remote files)
        with _source(path) as source:
            return decoded_columns.read_schema(source)


def decodes_to(files: Sequence[str], schema: pa.Schema) -> bool:
    """Whether every kept column the schema reads has the type the schema decodes it to
    (or never holds a value)."""
    for path in files:
        kept = _schema(path)
        for field in schema:
            index = kept.get_field_index(field.name)
            if index >= 0 and kept.field(index).type not in (field.type, pa.null()):
                return False
    return True


def _kept_columns_tfxio(made: Any, file_pattern: Any, schema: Any) -> KeptColumnsRecord | None:
    """``made`` (TFX's TFXIO for a split) reading the split's kept columns, or None."""
    if type(made) is not tf_example_record.TFExampleRecord or made.raw_record_column_name is not None:
        return None
    files = kept_columns_files(file_pattern)
    if files is None:
        return None
    if not decodes_to(files, made.ArrowSchema()):
        logging.info("Transform decodes %s: its kept columns are not of the schema's types.", file_pattern)
        return None
    logging.info("Transform reads %s from the columns ExampleGen kept (%d file(s)).", file_pattern, len(files))
    return KeptColumnsRecord(file_pattern, files, schema, made.telemetry_descriptors)


@contextlib.contextmanager
def read_decoded_columns() -> Iterator[None]:
    """Within this block, TFX's Transform reads a split from its kept columns where it can
    (module docstring), and as TFX reads it otherwise."""

    def create_tfxio(self: Any, dataset: Any, schema: Any) -> Any:
        made = CREATE_TFXIO(self, dataset, schema)
        return _kept_columns_tfxio(made, dataset.file_pattern, schema) or made

    transform_executor.TransformProcessor._CreateTFXIO = create_tfxio
    try:
        yield
    finally:
        transform_executor.TransformProcessor._CreateTFXIO = CREATE_TFXIO
