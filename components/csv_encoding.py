"""CSV -> gzipped tf.Example TFRecords, as TFX's CsvExampleGen writes them, at C++ speed: the
project's encoder behind the fast path of ``components.csv_example_gen`` (speedups on).

Free of TensorFlow, TFX and Beam, because it also runs as worker processes
(``python -m components.csv_encoding job.json``). The CsvExampleGen rules it keeps (types
by tfx_bsl's rule, empty cells, the split by SHA-256 of the deterministic bytes) are
compared record by record in the tests; what it mirrors of TFX and tfx_bsl is listed in
``runtime/speedups`` ("fast-csv-example-gen").
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import enum
import hashlib
import io
import json
import os
import pickle
import struct
import sys
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyarrow import csv as pa_csv
from tfx_bsl.coders import example_coder

from models.problem import is_feature_name
from runtime import decoded_columns

# CSV bytes pyarrow parses at a time: bounds memory whatever the file size, and is the
# unit of work shared out between worker processes, so small enough that a file of a few
# blocks still gives each worker a near-equal share (the workers finish together).
BLOCK_BYTES = 4 << 20
# Same name as TFX's write_split.DEFAULT_FILE_NAME: data_tfrecord-00000-of-00002.gz
FILE_PREFIX = "data_tfrecord"
# zlib level 1: several times faster than the default 6, files about 20% larger.
GZIP_LEVEL = 1
_INT64 = np.iinfo(np.int64)
_INTEGER_PATTERN = r"^[+-]?[0-9]+$"


class ColumnType(enum.IntEnum):
    """tfx_bsl's ``csv_decoder.ColumnType``: a column takes the widest type of its cells."""

    UNKNOWN = -1
    INT = 0
    FLOAT = 1
    STRING = 2


# ---------------------------------------------------------------- files


class _Readable(io.RawIOBase):
    """A file object of another file system (gs:// via TFX fileio) as pyarrow reads it."""

    def __init__(self, source: Any) -> None:
        self._source = source

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._source.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._source.close()
        super().close()


class _Writable(io.RawIOBase):
    """A file object of another file system (gs:// via TFX fileio) as pyarrow writes it
    (TensorFlow's GFile has no ``closed``, which pyarrow reads)."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sink.write(bytes(data))
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._sink.close()
        super().close()


def _is_local(path: str) -> bool:
    """A path on this machine's file system, not one with a scheme (gs://)."""
    return "://" not in path


def _open(path: str, mode: str) -> Any:
    """Local files directly; anything with a scheme (gs://) through TFX's fileio."""
    if _is_local(path):
        return open(path, mode)
    from tfx.dsl.io import fileio

    source = fileio.open(path, mode)
    return _Readable(source) if "r" in mode else _Writable(source)


class CsvFileError(ValueError):
    """A data file that cannot be read as CSV; the message names the file and the fix."""


def _not_text(path: str, where: str, detail: str) -> CsvFileError:
    return CsvFileError(
        f"{path} is not UTF-8 text ({detail} in its {where}): CSV files are read as UTF-8. Re-save it as "
        "UTF-8 (e.g. iconv -f latin1 -t utf-8), or move it out of the data directory or narrow --data-pattern."
    )


# Other separators a spreadsheet or database export may use, as named to the user.
OTHER_SEPARATORS = ((";", "semicolons"), ("\t", "tabs"), ("|", "vertical bars"))


def column_names(path: str) -> list[str]:
    """The header as CsvExampleGen reads it (``tfx.utils.io_utils.load_csv_column_names``),
    without the byte-order mark a spreadsheet saving "CSV UTF-8" puts before it (the rows
    after the header are read without it anyway; line ends may be CRLF)."""
    with _open(path, "rb") as source:
        header = source.readline()
        start = header + source.read(8192)
    if not start.strip():
        raise CsvFileError(
            f"{path} is empty: a CSV file needs a header line naming its columns, then its rows. "
            "Fill it, or move it out of the data directory or narrow --data-pattern."
        )
    if b"\0" in start:
        raise CsvFileError(
            f"{path} is a binary file, not CSV: move it out of the data directory or narrow --data-pattern."
        )
    if header.startswith(codecs.BOM_UTF8):
        header = header[len(codecs.BOM_UTF8) :]
    try:
        text = header.decode("utf-8").strip()
    except UnicodeDecodeError as error:
        raise _not_text(path, "header", f"byte 0x{header[error.start]:02x} at offset {error.start}") from None
    names = text.split(",")
    for separator, called in OTHER_SEPARATORS if len(names) == 1 else ():
        if separator in text:
            raise CsvFileError(
                f"{path} is split by {called}, not commas (its header: {text[:100]!r}): CSV files are read "
                "comma-separated. Save it again as comma-separated CSV (a spreadsheet's \"CSV UTF-8 (Comma "
                "delimited)\"), or convert it, e.g. with Python's csv module."
            )
    return names


def feature_names(path: str, headers: Mapping[str, str] | None = None) -> list[str]:
    """The header's names as the features' names: a header the problem maps (``headers``:
    feature name -> header name, ``models.problem.Problem.header_names``) takes its feature
    name, any other stays (a file whose header already has the feature names reads the
    same). Without ``headers``, the header as it is. A header no feature can be named
    after, or two that become one feature, is named with the fix."""
    names = column_names(path)
    if not headers:
        return names
    renames = {header: feature for feature, header in headers.items()}
    features = [renames.get(name, name) for name in names]
    for feature in dict.fromkeys(f for f in features if features.count(f) > 1):
        both = [name for name, f in zip(names, features, strict=True) if f == feature]
        raise CsvFileError(
            f"{path}: its header has {' and '.join(repr(n) for n in both)}, which the problem reads as one column, "
            f"the feature {feature}: remove one of them from the file."
        )
    if unknown := [name for name in names if name not in renames and not is_feature_name(name)]:
        missing = [f for f in headers if f not in features]
        feature = missing[0] if len(missing) == 1 and len(unknown) == 1 else "<feature>"
        back = f" rename it back to {headers[feature]!r} in the header line, or" if feature in headers else ""
        raise CsvFileError(
            f"{path}: column(s) {', '.join(repr(n) for n in unknown)} of its header are not in the problem's "
            "[columns] table (problem.toml), and cannot name a feature as they are"
            + (
                f"; the problem's column(s) {', '.join(repr(headers[f]) for f in missing)} are not in it"
                if missing
                else ""
            )
            + f". If a column was renamed in the file,{back} map its new name to the feature in problem.toml: "
            f"[columns] {feature} = {unknown[0]!r}."
        )
    return features


def _repeated_header(path: str, block: pa.RecordBatch, names: Sequence[str], rows_before: int) -> None:
    """Stops at a row that repeats the header (two exports pasted into one file), naming it."""
    candidates = pc.equal(block.column(0), names[0])
    if not pc.any(candidates).as_py():
        return
    for index in np.flatnonzero(candidates.to_numpy(zero_copy_only=False)):
        if all(block.column(i)[int(index)].as_py() == name for i, name in enumerate(names)):
            raise CsvFileError(
                f"{path}: data row {rows_before + int(index) + 1} repeats the header line (two exports pasted "
                "into one file?). Remove the repeated header line(s), or keep each export in a file of its own."
            )


def read_blocks(
    path: str, block_bytes: int = BLOCK_BYTES, headers: Mapping[str, str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The CSV at ``path`` as record batches of text columns (null = empty), streamed;
    columns named by ``feature_names(path, headers)``."""
    header = column_names(path)
    names = feature_names(path, headers)
    read = pa_csv.ReadOptions(column_names=names, skip_rows=1, block_size=block_bytes)
    # Quoted cells may span lines, as CsvExampleGen allows.
    parse = pa_csv.ParseOptions(newlines_in_values=True)
    # Every cell as text and only an empty cell missing: types are decided by tfx_bsl's
    # rule below, not by pyarrow's guesses (which would also read "NA" as missing).
    convert = pa_csv.ConvertOptions(
        column_types={n: pa.string() for n in names},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
    )
    # Arrow reads ahead on a thread of its own, and a reader released before its end (the
    # caller stopped early, or failed) waits for that thread while Python holds the GIL. A
    # local file is read by Arrow itself, which needs no GIL; a Python file object (gs://
    # through TFX fileio) needs the GIL for every read, so a reader left early on one
    # would wait forever: it is read to its end first.
    native = _is_local(path)
    rows_before = 0
    with pa.OSFile(path, "rb") if native else _open(path, "rb") as source:
        try:
            reader = pa_csv.open_csv(source, read_options=read, parse_options=parse, convert_options=convert)
            finished = False
            try:
                for block in reader:
                    if block.num_rows:
                        _repeated_header(path, block, header, rows_before)
                        rows_before += block.num_rows
                        yield block
                finished = True
            finally:
                if not finished and not native:
                    with contextlib.suppress(pa.ArrowInvalid):  # the caller's own error stands
                        for _ in reader:
                            pass
        except pa.ArrowInvalid as error:
            if "UTF8" in str(error):
                raise _not_text(path, "rows", "invalid UTF-8 bytes") from error
            raise CsvFileError(
                f"{path} is not a well-formed CSV file ({error}). Every row needs the header's "
                f"{len(names)} columns and quotes must be balanced."
            ) from error


# ---------------------------------------------------------------- type inference


def _python_type(cell: str) -> ColumnType:
    """tfx_bsl's rule for one cell (``csv_decoder._InferValueType``), which parses bytes:
    ``int(b"\xc2\xa05")`` fails where ``int("\xa05")`` would not."""
    raw = cell.encode()
    try:
        return ColumnType.INT if _INT64.min <= int(raw) <= _INT64.max else ColumnType.STRING
    except ValueError:
        try:
            float(raw)
        except ValueError:
            return ColumnType.STRING
        return ColumnType.FLOAT


def _python_max_type(cells: pa.Array) -> ColumnType:
    widest = ColumnType.UNKNOWN
    for cell in cells.to_pylist():
        widest = max(widest, _python_type(cell))
        if widest == ColumnType.STRING:
            break
    return widest


def _casts(cells: pa.Array, arrow_type: pa.DataType) -> bool:
    try:
        pc.cast(cells, arrow_type)
        return True
    except pa.ArrowInvalid:
        return False


def block_column_type(cells: pa.Array) -> ColumnType:
    """The type tfx_bsl infers for these cells (text, null for empty).

    pyarrow's casts settle the usual cases at C++ speed. They are stricter than Python's
    ``int()``/``float()`` (no spaces, no ``1_000``) and refuse integers beyond int64, so
    whatever they refuse is judged cell by cell with tfx_bsl's own rule.
    """
    present = cells.drop_null()
    if len(present) == 0:
        return ColumnType.UNKNOWN
    integers = pc.match_substring_regex(present, _INTEGER_PATTERN)
    if not _casts(pc.filter(present, integers), pa.int64()):
        return _python_max_type(pc.unique(present))
    others = pc.filter(present, pc.invert(integers))
    if len(others) == 0:
        return ColumnType.INT
    if not _casts(others, pa.float64()):
        return _python_max_type(pc.unique(others))
    return ColumnType.FLOAT


def infer_column_types(paths: Sequence[str], headers: Mapping[str, str] | None = None) -> dict[str, ColumnType]:
    """Column types over every row of every file, as CsvExampleGen infers them, by feature
    name (``feature_names``)."""
    names = feature_names(paths[0], headers)
    types = {name: ColumnType.UNKNOWN for name in names}
    for path in paths:
        for block in read_blocks(path, headers=headers):
            for name in names:
                if types[name] != ColumnType.STRING:
                    types[name] = max(types[name], block_column_type(block.column(name)))
    return types


# ---------------------------------------------------------------- encoding


def parse_numbers(cells: pa.Array, column_type: ColumnType = ColumnType.FLOAT) -> pa.Array:
    """Text cells of an INT or FLOAT column as int64 or float64 (nulls stay null), parsed
    as tfx_bsl parses them: Arrow's cast, and Python's ``int()``/``float()`` for the cells
    only Python's parser accepts (" 5", "1_000")."""
    arrow_type, parse = (pa.int64(), int) if column_type == ColumnType.INT else (pa.float64(), float)
    try:
        return pc.cast(cells, arrow_type)
    except pa.ArrowInvalid:
        return pa.array([None if cell is None else parse(cell.encode()) for cell in cells.to_pylist()], arrow_type)


def _typed_values(present: pa.Array, column_type: ColumnType) -> pa.Array:
    if column_type == ColumnType.STRING:
        return present.cast(pa.large_binary())
    values = parse_numbers(present, column_type)
    # tf.train.FloatList holds float32: parse as double, then round, as Python's float() does.
    return values.cast(pa.float32()) if column_type == ColumnType.FLOAT else values


def to_feature_column(cells: pa.Array, column_type: ColumnType) -> pa.Array:
    """One CSV column as the list column tfx_bsl encodes; an empty cell is an empty list."""
    if column_type == ColumnType.UNKNOWN:
        # Null lists: features without a kind, CsvExampleGen's tf.train.Feature().
        return pa.nulls(len(cells), pa.large_list(pa.int64()))
    present = cells.is_valid().to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(cells) + 1, dtype=np.int64)
    np.cumsum(present, out=offsets[1:])
    return pa.LargeListArray.from_arrays(pa.array(offsets), _typed_values(cells.drop_null(), column_type))


def _canonical_example_class() -> type:
    """A message with tf.Example's wire format down to ``Features.feature``, whose values
    stay opaque bytes: parsing and re-serialising it deterministically sorts the features
    by name and keeps each value's bytes, which is ``tf.train.Example``'s deterministic
    serialisation without importing TensorFlow (or parsing the values)."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="csv_encoding/example.proto", package="csv_encoding", syntax="proto3"
    )
    features = proto.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=field.TYPE_BYTES, label=field.LABEL_OPTIONAL)
    features.field.add(
        name="feature",
        number=1,
        type=field.TYPE_MESSAGE,
        label=field.LABEL_REPEATED,
        type_name=".csv_encoding.Features.FeatureEntry",
    )
    example = proto.message_type.add(name="Example")
    example.field.add(
        name="features",
        number=1,
        type=field.TYPE_MESSAGE,
        label=field.LABEL_OPTIONAL,
        type_name=".csv_encoding.Features",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName("csv_encoding.Example")
    return message_factory.GetMessageClass(descriptor)


_CanonicalExample = _canonical_example_class()


def encode_block(block: pa.RecordBatch, types: dict[str, ColumnType]) -> list[bytes]:
    """Serialized tf.Examples of a block, as ``SerializeToString(deterministic=True)``
    writes them: the bytes TFX hashes to choose a row's split.

    The executor checks the first rows against TensorFlow's own serialisation on every
    run; the tests check every row, and the wire format's edge values.
    """
    return encode_features(feature_batch(block, types))


def feature_batch(block: pa.RecordBatch, types: dict[str, ColumnType]) -> pa.RecordBatch:
    """A block's columns as tfx_bsl encodes them and its decoder reads them back (list
    columns, features sorted by name): what TFDV's statistics generators take."""
    names = sorted(types)
    return pa.RecordBatch.from_arrays([to_feature_column(block.column(n), types[n]) for n in names], names)


def encode_features(batch: pa.RecordBatch) -> list[bytes]:
    """``encode_block``'s records from its ``feature_batch`` (or rows taken from one)."""
    return encode_array(batch).to_pylist()


def encode_array(batch: pa.RecordBatch) -> pa.LargeBinaryArray:
    """``encode_features``' records as one Arrow array.

    A CSV cell is at most one value, so every feature is an empty list, one value, or no
    kind at all, and the canonical bytes are written column by column with Arrow and numpy
    (``_wire_examples``). A batch with longer lists goes through tfx_bsl's encoder, each
    record re-serialised in canonical order."""
    records = _wire_examples(batch)
    if records is not None:
        return records
    parse = _CanonicalExample.FromString
    return pa.array(
        [
            parse(record).SerializeToString(deterministic=True)
            for record in example_coder.RecordBatchToExamplesEncoder().encode(batch)
        ],
        pa.large_binary(),
    )


# tf.Example's wire format, the parts used here (field number << 3 | 2, length-delimited):
# Example.features = 1, Features.feature (map entry) = 1, entry key = 1, entry value = 2,
# Feature.bytes_list = 1, float_list = 2, int64_list = 3, and each list's packed value = 1.
_FIELD_1, _FIELD_2, _FIELD_3 = b"\x0a", b"\x12", b"\x1a"
_EMPTY_LIST = {"int": _FIELD_3 + b"\x00", "float": _FIELD_2 + b"\x00", "bytes": _FIELD_1 + b"\x00"}


def _binary_array(offsets: np.ndarray, data: np.ndarray | pa.Buffer | None) -> pa.LargeBinaryArray:
    """Binary values from their offsets and their bytes (None: an array without any)."""
    data = data if isinstance(data, pa.Buffer) else pa.py_buffer(b"" if data is None else data)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), data])


def _varints(values: np.ndarray) -> pa.LargeBinaryArray:
    """Each value's protobuf varint (int64 as its two's complement, as protobuf does)."""
    unsigned = np.ascontiguousarray(values).view(np.uint64) if values.dtype == np.int64 else values.astype(np.uint64)
    lengths = np.ones(len(unsigned), np.int64)
    for k in range(1, 10):
        lengths += unsigned >= np.uint64(1 << (7 * k))
    offsets = np.zeros(len(unsigned) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.empty(offsets[-1], np.uint8)
    for k in range(10):
        rows = np.flatnonzero(lengths > k)
        if not len(rows):
            break
        low_bits = ((unsigned[rows] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        data[offsets[rows] + k] = low_bits | np.where(lengths[rows] > k + 1, np.uint8(0x80), np.uint8(0))
    return _binary_array(offsets, data)


def _varint(value: int) -> bytes:
    """One non-negative integer's protobuf varint."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _joined(*parts: pa.Array | bytes) -> pa.Array:
    """Row by row, the parts' bytes one after the other (bytes: the same in every row)."""
    arrays = [pa.scalar(part, pa.large_binary()) if isinstance(part, bytes) else part for part in parts]
    return pc.binary_join_element_wise(*arrays, pa.scalar(b"", pa.large_binary()))


def _offsets(array: pa.Array) -> np.ndarray:
    """A (large) binary array's offsets, as numpy (where it starts in its buffers included)."""
    return np.frombuffer(array.buffers()[1], np.int64, len(array) + 1, array.offset * 8)


class _LongerLists(ValueError):
    """A list of more than one value: not a CSV cell's."""


class _Entry:
    """One feature's map entry in each row's record: a header (from a few distinct ones:
    the entry's tag and length, its key, the Feature's and its list's tags and lengths)
    followed by the value's payload bytes (none for an empty list)."""

    def __init__(self, headers: pa.Array | pa.Scalar, payload: pa.Array | None, lengths: np.ndarray) -> None:
        self.parts = [headers] if payload is None else [headers, payload]
        self.lengths = lengths  # bytes per row, header and payload


def _entry_header(key: bytes, feature_header: bytes, feature_length: int) -> bytes:
    """A map entry's bytes up to its value's payload: the entry's tag and length, the key
    field, the value field's tag and length (a Feature of ``feature_length`` bytes), then
    the Feature's own ``feature_header``."""
    inner = len(key) + len(_FIELD_2) + len(_varint(feature_length)) + feature_length
    return _FIELD_1 + _varint(inner) + key + _FIELD_2 + _varint(feature_length) + feature_header


def _feature_header(kind: str, payload_length: int) -> bytes:
    """A Feature's bytes before its one value's payload of ``payload_length`` bytes: the
    list's field (bytes_list 1, float_list 2, int64_list 3) and length, then the packed
    value's (or the one bytes value's) field 1 and length."""
    inner = _FIELD_1 + _varint(payload_length)
    field = {"bytes": _FIELD_1, "float": _FIELD_2, "int": _FIELD_3}[kind]
    return field + _varint(len(inner) + payload_length) + inner


def _wire_entry(name: str, column: pa.Array) -> _Entry:
    """Each row's map entry for the feature ``name``: a ``tf.train.Feature`` of its one value,
    an empty list of its kind, or no kind at all for a column without values (``Feature()``)."""
    rows = len(column)
    key = _FIELD_1 + _varint(len(name.encode())) + name.encode()
    if column.null_count == rows:
        no_kind = _entry_header(key, b"", 0)
        return _Entry(pa.scalar(no_kind, pa.large_binary()), None, np.full(rows, len(no_kind), np.int64))
    counts = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    if rows and np.nanmax(counts) > 1:
        raise _LongerLists
    present = counts == 1
    values = pc.list_flatten(column)
    if pa.types.is_int64(values.type):
        kind, payload = "int", _varints(values.to_numpy())
    elif pa.types.is_floating(values.type):
        kind = "float"
        little_endian = np.ascontiguousarray(values.to_numpy(zero_copy_only=False), dtype="<f4").view(np.uint8)
        payload = _binary_array(np.arange(0, 4 * len(values) + 1, 4, dtype=np.int64), little_endian)
    else:
        kind, payload = "bytes", values.cast(pa.large_binary())
    offsets = _offsets(payload)
    payload_lengths = np.zeros(rows, np.int64)
    payload_lengths[present] = np.diff(offsets)
    distinct, inverse = np.unique(payload_lengths[present], return_inverse=True)
    feature_headers = [_feature_header(kind, int(n)) for n in distinct]
    headers = [_entry_header(key, h, len(h) + int(n)) for h, n in zip(feature_headers, distinct, strict=True)]
    headers.append(_entry_header(key, _EMPTY_LIST[kind], len(_EMPTY_LIST[kind])))
    which = np.full(rows, len(distinct), np.int64)
    which[present] = inverse
    full_offsets = np.empty(rows + 1, np.int64)
    full_offsets[0] = offsets[0]
    np.cumsum(payload_lengths, out=full_offsets[1:])
    full_offsets[1:] += offsets[0]
    return _Entry(
        pa.array(headers, pa.large_binary()).take(pa.array(which)),
        _binary_array(full_offsets, payload.buffers()[2]),
        np.array([len(h) for h in headers], np.int64)[which] + payload_lengths,
    )


def _map_order(named: tuple[str, pa.Array]) -> bytes:
    """protobuf's deterministic order of map keys (upb's, which Python's protobuf runs): by
    their UTF-8 bytes, except that a key comes after the longer keys it begins (``never``,
    then ``n``). No UTF-8 byte is 0xFF, so it stands for the key's end."""
    return named[0].encode() + b"\xff"


def _wire_examples(batch: pa.RecordBatch) -> pa.Array | None:
    """Each row's ``tf.train.Example`` as ``SerializeToString(deterministic=True)`` writes it:
    features in protobuf's map order (``_map_order``), each a map entry of key and value;
    None when a list holds more than one value. Every length is computed first, so each
    record's bytes are joined once, from its entries' headers and payloads."""
    try:
        entries = [
            _wire_entry(name, column)
            for name, column in sorted(zip(batch.schema.names, batch.columns, strict=True), key=_map_order)
        ]
    except _LongerLists:
        return None
    lengths = sum((entry.lengths for entry in entries), np.zeros(batch.num_rows, np.int64))
    return _joined(_FIELD_1, _varints(lengths), *(part for entry in entries for part in entry.parts))


def split_index(record: bytes, buckets: Sequence[int]) -> int:
    """TFX's partition function (``base_example_gen_executor._PartitionFn``)."""
    return bisect.bisect(buckets, int.from_bytes(hashlib.sha256(record).digest(), "big") % buckets[-1])


def split_indices(records: Sequence[bytes], buckets: Sequence[int]) -> np.ndarray:
    """``split_index`` of every record: the hashes one by one, the rest for all at once (the
    256-bit hash modulo the buckets' total, folded a byte at a time)."""
    total = int(buckets[-1])
    if total >= 1 << 55:  # the fold below would overflow 64 bits
        return np.array([split_index(record, buckets) for record in records], np.int64)
    digests = np.frombuffer(b"".join([hashlib.sha256(record).digest() for record in records]), np.uint8)
    digests = digests.reshape(len(records), 32).astype(np.uint64)
    remainder = np.zeros(len(records), np.uint64)
    for byte in range(32):
        remainder = (remainder * np.uint64(256) + digests[:, byte]) % np.uint64(total)
    return np.searchsorted(np.asarray(buckets, np.uint64), remainder, side="right").astype(np.int64)


# ---------------------------------------------------------------- writing


def _masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _masked(crcs: np.ndarray) -> np.ndarray:
    """``_masked_crc`` of CRC-32Cs already computed (64 bits hold the rotation's carry)."""
    crcs = crcs.astype(np.uint64)
    rotated = (crcs >> np.uint64(15)) | (crcs << np.uint64(17))
    return ((rotated + np.uint64(0xA282EAD8)) & np.uint64(0xFFFFFFFF)).astype("<u4")


def record_crcs(records: Sequence[bytes]) -> np.ndarray:
    """Each record's CRC-32C (unmasked), for ``tfrecord_frames``."""
    return np.fromiter(map(google_crc32c.value, records), np.uint32, len(records))


def _fixed_binary(values: np.ndarray, width: int) -> pa.Array:
    little_endian = np.ascontiguousarray(values).view(np.uint8)
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(values), [None, pa.py_buffer(little_endian)])
    return fixed.cast(pa.large_binary())


def tfrecord_frames(records: pa.LargeBinaryArray, crcs: np.ndarray) -> pa.Buffer:
    """``records`` (their CRC-32Cs ``crcs``, from ``record_crcs``) in TFRecord framing, one
    after the other: length, its masked CRC-32C, data, its masked CRC-32C. Built for all
    records at once with Arrow and numpy; a length's CRC is computed once per distinct
    length."""
    lengths = pc.binary_length(records).to_numpy(zero_copy_only=False).astype("<u8")
    distinct, inverse = np.unique(lengths, return_inverse=True)
    length_crcs = np.array([_masked_crc(struct.pack("<Q", int(n))) for n in distinct], "<u4")[inverse]
    framed = _joined(_fixed_binary(lengths, 8), _fixed_binary(length_crcs, 4), records, _fixed_binary(_masked(crcs), 4))
    offsets = np.frombuffer(framed.buffers()[1], np.int64, len(framed) + 1, framed.offset * 8)
    return framed.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


class GzipTFRecordWriter:
    """Writes one gzip-compressed TFRecord file (what tf.io.TFRecordWriter(GZIP) writes)."""

    def __init__(self, path: str) -> None:
        self._file = _open(path, "wb")
        self._zlib = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: gzip container

    def write(self, records: pa.LargeBinaryArray, crcs: np.ndarray) -> None:
        """Appends ``records`` (their CRC-32Cs ``crcs``, ``record_crcs``)."""
        if len(records):
            self._file.write(self._zlib.compress(tfrecord_frames(records, crcs)))

    def close(self) -> None:
        self._file.write(self._zlib.flush())
        self._file.close()


def shard_path(split_dir: str, shard: int, shards: int, prefix: str = FILE_PREFIX) -> str:
    return os.path.join(split_dir, f"{prefix}-{shard:05d}-of-{shards:05d}.gz")


class _ShardOutputs:
    """One shard's outputs per split: its record file (None for a dropped split), the file
    of its columns kept for Transform (None without), and its rows."""

    def __init__(
        self,
        split_dirs: Sequence[str | None],
        shard: int,
        shards: int,
        prefix: str,
        types: dict[str, ColumnType],
        columns_dirs: Sequence[str | None] | None,
    ) -> None:
        paths = [None if d is None else shard_path(d, shard, shards, prefix) for d in split_dirs]
        self.writers = [None if p is None else GzipTFRecordWriter(p) for p in paths]
        self.kept = [None] * len(split_dirs)
        if columns_dirs is not None:
            self.kept = [
                None if c is None or p is None else _columns_writer(c, os.path.basename(p), types)
                for c, p in zip(columns_dirs, paths, strict=True)
            ]
        self.counts = [0] * len(split_dirs)
        self.types = types

    def write(self, batch: pa.RecordBatch, buckets: Sequence[int] | None, seed: int, statistics: Any) -> None:
        """A block's rows (``feature_batch``), each into its split's file, shuffled."""
        records = encode_array(batch)
        values = records.to_pylist()
        splits = np.zeros(len(values), np.int64) if buckets is None else split_indices(values, buckets)
        crcs = record_crcs(values)
        # TFX's WriteSplit reshuffles before writing; a seeded shuffle per block keeps a
        # sorted CSV (say, by time) from reaching the Trainer in that order.
        order = np.random.default_rng(seed).permutation(len(values))
        for i, writer in enumerate(self.writers):
            rows = order[splits[order] == i]
            if writer is not None:
                taken = pa.array(rows, pa.int64())
                writer.write(records.take(taken), crcs[rows])
                if statistics is not None and statistics[i] is not None:
                    statistics[i].add(batch.filter(pa.array(splits == i)))
                if self.kept[i] is not None and len(rows):
                    self.kept[i].write(_kept_columns(batch.take(taken), self.types))
            self.counts[i] += len(rows)

    def close(self) -> None:
        for writer in [*self.writers, *self.kept]:
            if writer is not None:
                writer.close()


def _shard_blocks(
    paths: Sequence[str], shard: int, shards: int, block_bytes: int, headers: Mapping[str, str] | None
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Every ``shards``-th block of the files from block ``shard`` on, with its number (from 1)."""
    block_index = 0
    for path in paths:
        for block in read_blocks(path, block_bytes, headers):
            block_index += 1
            if (block_index - 1) % shards == shard:
                yield block_index, block


def write_shard(
    paths: Sequence[str],
    types: dict[str, ColumnType],
    split_dirs: Sequence[str | None],
    buckets: Sequence[int] | None,
    shard: int = 0,
    shards: int = 1,
    block_bytes: int = BLOCK_BYTES,
    prefix: str = FILE_PREFIX,
    headers: Mapping[str, str] | None = None,
    statistics: Sequence[Any] | None = None,
    columns_dirs: Sequence[str | None] | None = None,
) -> list[int]:
    """Encodes every ``shards``-th block of the files, from block ``shard`` on, into this
    shard's file of each split; returns rows per split (written or, where the split's
    directory is None, dropped: older spans of a window keep their training rows only).

    ``buckets``: cumulative hash buckets of the output splits; None writes everything to
    the one split (input-defined splits). ``prefix`` names the files (several conversions
    may write into one split directory). ``headers``: the problem's header names by feature
    name (``feature_names``), None when the header names the features. ``statistics``: one
    ``csv_statistics.SplitStatistics`` per split (None for a dropped split), fed each
    written row's columns. ``columns_dirs``: per split, where to keep the columns of each
    file written (``runtime.decoded_columns``), or None.
    """
    outputs = _ShardOutputs(split_dirs, shard, shards, prefix, types, columns_dirs)
    try:
        for seed, block in _shard_blocks(paths, shard, shards, block_bytes, headers):
            outputs.write(feature_batch(block, types), buckets, seed, statistics)
    finally:
        outputs.close()
    return outputs.counts


def _kept_columns(batch: pa.RecordBatch, types: Mapping[str, ColumnType]) -> pa.RecordBatch:
    """``feature_batch`` columns as kept for Transform: a column that never holds a value
    (features without a kind) has Arrow's null type, as tfx_bsl's decoder reads it."""
    columns = [
        pa.nulls(batch.num_rows, pa.null()) if types[name] == ColumnType.UNKNOWN else column
        for name, column in zip(batch.schema.names, batch.columns, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, batch.schema.names)


def _columns_writer(columns_dir: str, record_file_name: str, types: Mapping[str, ColumnType]) -> Any:
    """A ``decoded_columns.Writer`` for one record file's columns."""
    empty = {name: pa.array([], pa.string()) for name in types}
    schema = _kept_columns(feature_batch(pa.RecordBatch.from_pydict(empty), dict(types)), types).schema
    path = decoded_columns.columns_file(columns_dir, record_file_name)
    return decoded_columns.Writer(_open(path, "wb"), schema)


def run_job(job: dict[str, Any]) -> list[int]:
    """One worker's job (``write_shard``'s arguments, as JSON gives them) done in this
    process; rows per split. With a ``statistics_path``, each split's statistics are
    pickled there (``csv_statistics``, which imports TFDV)."""
    job = {**job, "types": {name: ColumnType[value] for name, value in job["types"].items()}}
    statistics_path = job.pop("statistics_path", None)
    statistics = None
    if statistics_path:
        from components import csv_statistics

        statistics = [None if d is None else csv_statistics.SplitStatistics() for d in job["split_dirs"]]
    counts = write_shard(**job, statistics=statistics)
    if statistics_path:
        with open(statistics_path, "wb") as out:
            pickle.dump(statistics, out, protocol=pickle.HIGHEST_PROTOCOL)
    return counts


def main(argv: Sequence[str]) -> int:
    """Worker entry point: a JSON file holding one job (``run_job``'s) in, rows per split
    out (a file, not the JSON itself: thousands of input paths would exceed the size limit
    of one argument)."""
    with open(argv[1]) as job_file:
        job = json.load(job_file)
    print(json.dumps(run_job(job)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
