"""Each split's columns as TFX's decoder reads its tf.Examples back, kept beside the
examples by the fast ExampleGen (which holds them anyway: it encodes the examples from
them), so that Transform can read them instead of decoding every record again
(``runtime.speedups.transform_columns``).

The layout and the file format, shared by the writer and the reader (pyarrow only): under
the examples' URI, ``_decoded_columns/Split-<name>/<record file's name>.arrow`` for each
record file of the split, an Arrow IPC stream (lz4) of that file's rows in its order. A
column that never holds a value (a feature without a kind) has Arrow's null type: its
feature decodes to nulls of whatever type the schema gives it. A reader uses the files
only when every record file of the split has one, so files written by anything else
(TFX's own ExampleGen, or with the speedups off) are never mixed in.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from typing import IO

import pyarrow as pa

COLUMNS_DIR = "_decoded_columns"
SUFFIX = ".arrow"
_WRITE_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


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
