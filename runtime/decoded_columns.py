"""Each split's columns as TFX's decoder reads its tf.Examples back, kept beside the examples
by the fast ExampleGen (speedups on) for Transform to read instead of decoding every record
again (``runtime.speedups.transform_columns``): under the examples' URI,
``_decoded_columns/Split-<name>/<record file>.arrow``, an Arrow IPC stream (lz4) per record
file. A reader uses them only when every record file of the split has one.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator, Sequence
from typing import IO, Any

import pyarrow as pa

COLUMNS_DIR = "_decoded_columns"
SUFFIX = ".arrow"
_WRITE_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
# What is read of a remote stream for its first message, the schema (about a hundred bytes
# a column; a longer one is read whole).
SCHEMA_BYTES = 1 << 20


def _join(*parts: str) -> str:
    return posixpath.join(*parts) if "://" in parts[0] else os.path.join(*parts)


def columns_dir(split_dir: str) -> str:
    """Where the columns of a split's record files are kept: for ``<examples
    URI>/Split-<name>``, ``<examples URI>/_decoded_columns/Split-<name>``."""
    split_dir = split_dir.rstrip("/")
    path = posixpath if "://" in split_dir else os.path
    return _join(path.dirname(split_dir), COLUMNS_DIR, path.basename(split_dir))


def columns_file(directory: str, record_file_name: str) -> str:
    """The file of one record file's columns in the split's ``columns_dir``."""
    return _join(directory, record_file_name + SUFFIX)


def record_file_name(columns_file_name: str) -> str:
    """The record file whose columns a file in ``columns_dir`` holds."""
    return columns_file_name.removesuffix(SUFFIX)


class Writer:
    """Writes one record file's columns, batches of ``schema`` one at a time, to an open
    binary file (a file with no rows holds the schema alone)."""

    def __init__(self, sink: IO[bytes], schema: pa.Schema) -> None:
        self._sink = sink
        self._stream = pa.ipc.new_stream(sink, schema, options=_WRITE_OPTIONS)

    def write(self, batch: pa.RecordBatch) -> None:
        self._stream.write_batch(batch)

    def close(self) -> None:
        self._stream.close()
        self._sink.close()


def read_schema(source: IO[bytes]) -> pa.Schema:
    """A columns file's schema (only its first message is read)."""
    with pa.ipc.open_stream(source) as stream:
        return stream.schema


def read(source: IO[bytes]) -> Iterator[pa.RecordBatch]:
    """A columns file's batches, as written."""
    with pa.ipc.open_stream(source) as stream:
        yield from stream


def _source(path: str, head_bytes: int = -1) -> IO[bytes]:
    """A kept file to read: a local one directly; one on another file system (gs://)
    through TFX's fileio, as the checks list it, read whole (or its first ``head_bytes``)."""
    if "://" not in path:
        return pa.OSFile(path)
    from tfx.dsl.io import fileio

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
        for batch in read(source):
            if batch.num_rows == 0:
                continue
            batch = schema_batch(batch, schema)
            if batch_size is None:
                yield batch
            else:
                for start in range(0, batch.num_rows, batch_size):
                    yield batch.slice(start, batch_size)


def kept_columns_files(file_pattern: Any) -> list[str] | None:
    """The kept columns of every record file ``file_pattern`` (``<split dir>/*``, as TFX
    names a split's files) matches, or None unless every one has them."""
    from tfx.dsl.io import fileio

    if not isinstance(file_pattern, str) or not file_pattern.endswith("/*"):
        return None
    directory = columns_dir(file_pattern[:-2])
    if not fileio.isdir(directory):
        return None
    records = {posixpath.basename(path) for path in fileio.glob(file_pattern)}
    kept = {record_file_name(posixpath.basename(path)): path for path in fileio.glob(columns_file(directory, "*"))}
    if not records or records != set(kept):
        return None
    return [kept[name] for name in sorted(records)]


def _file_schema(path: str) -> pa.Schema:
    try:
        with _source(path, SCHEMA_BYTES) as source:
            return read_schema(source)
    except (pa.ArrowInvalid, EOFError):  # a schema longer than the head read (remote files)
        with _source(path) as source:
            return read_schema(source)


def decodes_to(files: Sequence[str], schema: pa.Schema) -> bool:
    """Whether every kept column the schema reads has the type the schema decodes it to
    (or never holds a value)."""
    for path in files:
        kept = _file_schema(path)
        for field in schema:
            index = kept.get_field_index(field.name)
            if index >= 0 and kept.field(index).type not in (field.type, pa.null()):
                return False
    return True
