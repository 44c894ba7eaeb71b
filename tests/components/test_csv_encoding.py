"""Reading CSV blocks: a reader the caller leaves early must not hang the process; a problem's
header names read as its feature names."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
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
