"""bench/generate.py: the data generator's guarantees.

No timing assertions: these keep the benchmark working, they do not judge performance.
"""

from __future__ import annotations

import csv
import datetime
from pathlib import Path

import pytest

from bench import generate
from tests.support.sample_data import EMBEDDED_ROWS, write_sample

SOURCE_ROWS = 300


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _label_rate(rows: list[dict[str, str]]) -> float:
    big = sum(1 for r in rows if r["fare"] and float(r["fare"]) > 0 and float(r["tips"] or 0) > 0.2 * float(r["fare"]))
    return big / len(rows)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """Every 50th row of the embedded data (all months, hours, and some empty cells)."""
    return write_sample(tmp_path_factory.mktemp("source"), SOURCE_ROWS, every=50) / "data.csv"


@pytest.fixture(scope="module")
def generated(source, tmp_path_factory) -> Path:
    return generate.generate_dataset(tmp_path_factory.mktemp("gen") / "out.csv", 2000, seed=7, source=source)


def test_row_count_and_header(source, generated):
    source_header, _ = _read(source)
    header, rows = _read(generated)
    assert header == source_header
    assert len(rows) == 2000
    assert not Path(str(generated) + ".partial").exists()


def test_deterministic_for_a_seed_different_for_another(source, generated, tmp_path):
    again = generate.generate_dataset(tmp_path / "again.csv", 2000, seed=7, source=source)
    other = generate.generate_dataset(tmp_path / "other.csv", 2000, seed=8, source=source)
    assert again.read_bytes() == generated.read_bytes()
    assert other.read_bytes() != generated.read_bytes()


def test_rows_are_perturbed_not_copied(source, generated):
    _, source_rows = _read(source)
    _, rows = _read(generated)
    originals = {tuple(r.values()) for r in source_rows}
    assert sum(tuple(r.values()) in originals for r in rows) < len(rows) * 0.05


def test_empty_cells_stay_empty(source, generated):
    _, source_rows = _read(source)
    _, rows = _read(generated)
    # Every generated row comes from a source row with the same company/payment and the
    # same pattern of empty cells (the perturbation never fills or empties a cell).
    patterns = {(r["company"], r["payment_type"], tuple(v == "" for v in r.values())) for r in source_rows}
    assert all((r["company"], r["payment_type"], tuple(v == "" for v in r.values())) in patterns for r in rows)
    assert any(r["dropoff_latitude"] == "" for r in rows)


def test_calendar_columns_follow_the_timestamp(generated):
    _, rows = _read(generated)
    for r in rows:
        moment = datetime.datetime.fromtimestamp(int(r["trip_start_timestamp"]), datetime.UTC)
        assert int(r["trip_start_hour"]) == moment.hour
        assert int(r["trip_start_month"]) == moment.month
        assert int(r["trip_start_day"]) == moment.isoweekday() % 7 + 1  # 1 = Sunday


def test_the_source_uses_the_same_calendar_convention():
    """The embedded data's own hour/day/month agree with the offset the generator uses."""
    _, rows = _read(generate.SOURCE_CSV)
    for r in rows[:500]:
        assert generate._calendar(int(r["trip_start_timestamp"])) == (
            int(r["trip_start_hour"]),
            int(r["trip_start_day"]),
            int(r["trip_start_month"]),
        )


def test_label_rate_stays_realistic(generated):
    _, source_rows = _read(generate.SOURCE_CSV)
    _, rows = _read(generated)
    assert 0.20 < _label_rate(source_rows) < 0.25  # 22.5% in the embedded data
    assert 0.15 < _label_rate(rows) < 0.30


def test_dataset_cache_is_reused(tmp_path):
    first, rows = generate.cached_dataset(tmp_path, 0.01, seed=3)
    stamp = (first / "data.csv").stat().st_mtime_ns
    again, _ = generate.cached_dataset(tmp_path, 0.01, seed=3)
    assert again == first and (again / "data.csv").stat().st_mtime_ns == stamp
    assert rows == round(0.01 * EMBEDDED_ROWS)
