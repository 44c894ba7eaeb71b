"""Reading CSV blocks: a reader the caller leaves early must not hang the process."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyarrow import csv as pa_csv

from components import csv_encoding

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
