"""The benchmark's data: the embedded ``data/taxi/taxi.csv`` resampled and perturbed to any size.

Resampled and perturbed rather than copied, so Beam and tf.Transform see realistic
variety rather than identical blocks; deterministic for a seed, and cached by size and
seed so repeats and later sessions measure the same data.
"""

from __future__ import annotations

import csv
import datetime
import os
import time
from pathlib import Path

import numpy as np

from pipeline.config import DEFAULT_PROBLEM_DIR

SOURCE_CSV = Path(DEFAULT_PROBLEM_DIR) / "taxi.csv"
CHUNK_ROWS = 20_000

# Generator perturbations. One factor per row scales fare, miles, seconds and tips alike,
# so tips/fare (and so the label) is kept exactly and trip speeds stay plausible.
SCALE_LOW, SCALE_HIGH = 0.9, 1.1
SCALED_COLUMNS = ("fare", "trip_miles", "trip_seconds", "tips")
COORDINATE_COLUMNS = ("pickup_latitude", "pickup_longitude", "dropoff_latitude", "dropoff_longitude")
COORDINATE_JITTER_DEG = 0.002  # standard deviation, about 200 m
# Timestamps move by a whole number of 15-minute steps (the source's granularity), up to 14 days.
TIME_STEP_SECONDS = 900
MAX_SHIFT_STEPS = 14 * 24 * 4
# The source stores Chicago local wall-clock time as if it were UTC: its hour/day/month
# columns agree with the timestamp read with offset 0 in every row (and with -5 h or -6 h
# in none). So the recomputed columns use the same convention (offset 0), which keeps the
# generated data consistent with the source rather than shifting every hour by 6.
LOCAL_OFFSET_SECONDS = 0


def rows_for_size(size: float, source_rows: int) -> int:
    """Rows of a dataset ``size`` times the source (fractions allowed, for tests)."""
    return max(1, round(size * source_rows))


def read_source(path: Path = SOURCE_CSV) -> tuple[list[str], list[list[str]]]:
    """The (small) source CSV in memory: header and rows."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        return header, list(reader)


def _scale(value: str, factor: float, integer: bool) -> str:
    if value == "":
        return value
    scaled = float(value) * factor
    return str(int(round(scaled))) if integer else f"{scaled:.2f}"


def _day_of_week(days_since_epoch: int) -> int:
    """1 = Sunday ... 7 = Saturday, the source's convention (1970-01-01 was a Thursday)."""
    return (days_since_epoch + 4) % 7 + 1


def _calendar(timestamp: int) -> tuple[int, int, int]:
    """(hour, day of week, month) of ``timestamp`` in the data's local-time convention."""
    local = timestamp + LOCAL_OFFSET_SECONDS
    moment = datetime.datetime.fromtimestamp(local, datetime.UTC)
    return moment.hour, _day_of_week(local // 86400), moment.month


def generate_dataset(output: Path, rows: int, seed: int, source: Path = SOURCE_CSV) -> Path:
    """Writes ``rows`` resampled, perturbed rows of ``source`` to ``output``, streaming.

    Deterministic for a seed. Only the source is held in memory; rows are drawn with
    replacement and written in chunks of ``CHUNK_ROWS``. Empty cells stay empty. Written
    to a temporary name and renamed, so an interrupted run never leaves a partial file
    that a later run would reuse.
    """
    header, source_rows = read_source(source)
    col = {name: i for i, name in enumerate(header)}
    scaled = [(col[c], c == "trip_seconds") for c in SCALED_COLUMNS if c in col]
    coords = [col[c] for c in COORDINATE_COLUMNS if c in col]
    ts, hour, day, month = (
        col.get(c) for c in ("trip_start_timestamp", "trip_start_hour", "trip_start_day", "trip_start_month")
    )
    rng = np.random.default_rng(seed)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    with open(partial, "w", newline="") as sink:
        writer = csv.writer(sink)
        writer.writerow(header)
        done = 0
        while done < rows:
            n = min(CHUNK_ROWS, rows - done)
            picks = rng.integers(0, len(source_rows), n)
            factors = rng.uniform(SCALE_LOW, SCALE_HIGH, n)
            jitter = rng.normal(0.0, COORDINATE_JITTER_DEG, (n, len(coords)))
            shifts = rng.integers(-MAX_SHIFT_STEPS, MAX_SHIFT_STEPS + 1, n) * TIME_STEP_SECONDS
            chunk = []
            for i in range(n):
                row = list(source_rows[picks[i]])
                for index, integer in scaled:
                    row[index] = _scale(row[index], factors[i], integer)
                for j, index in enumerate(coords):
                    if row[index] != "":
                        row[index] = f"{float(row[index]) + jitter[i, j]:.9f}"
                if ts is not None and row[ts] != "":
                    new_ts = int(row[ts]) + int(shifts[i])
                    row[ts] = str(new_ts)
                    h, d, m = _calendar(new_ts)
                    for index, value in ((hour, h), (day, d), (month, m)):
                        if index is not None:
                            row[index] = str(value)
                chunk.append(row)
            writer.writerows(chunk)
            done += n
    os.replace(partial, output)
    return output


def cached_dataset(output_dir: Path, size: float, seed: int) -> tuple[Path, int]:
    """The data directory for (size, seed), generated on first use and reused after."""
    rows = rows_for_size(size, len(read_source()[1]))
    data_dir = output_dir / "data" / f"rows-{rows}-seed-{seed}"
    target = data_dir / "data.csv"
    if not target.exists():
        start = time.monotonic()
        generate_dataset(target, rows, seed)
        print(f"  generated {rows} rows in {time.monotonic() - start:.1f} s: {target}", flush=True)
    else:
        print(f"  reusing {target}", flush=True)
    return data_dir, rows
