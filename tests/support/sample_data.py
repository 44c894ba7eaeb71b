"""Samples of the embedded CSV, for tests that need real rows but not all of them."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable
from pathlib import Path

from pipeline.config import DEFAULT_PROBLEM_DIR

EMBEDDED_CSV = Path(DEFAULT_PROBLEM_DIR) / "taxi.csv"
# The component tests' sample: few enough to run fast, spread so all months and hours appear.
SAMPLE_ROWS = 600
EMBEDDED_ROWS = 15002


def write_sample(target_dir: Path, rows: int, every: int = 1, edit: Callable[[dict, int], dict] | None = None) -> Path:
    """Writes every ``every``-th row of the embedded CSV, at most ``rows`` of them, to
    ``target_dir/data.csv``, optionally passing each row dict (and its index among the
    written rows) through ``edit``; returns ``target_dir``."""
    target_dir.mkdir(parents=True, exist_ok=True)
    with open(EMBEDDED_CSV, newline="") as source, open(target_dir / "data.csv", "w", newline="") as sink:
        reader = csv.DictReader(source)
        writer = csv.DictWriter(sink, fieldnames=reader.fieldnames)
        writer.writeheader()
        written = 0
        for index, row in enumerate(reader):
            if index % every or written >= rows:
                continue
            writer.writerow(edit(row, written) if edit else row)
            written += 1
    return target_dir


def embedded_rows(count: int) -> list[dict]:
    """The first ``count`` rows of the embedded CSV, as ``csv.DictReader`` reads them."""
    with open(EMBEDDED_CSV, newline="") as f:
        return list(itertools.islice(csv.DictReader(f), count))
