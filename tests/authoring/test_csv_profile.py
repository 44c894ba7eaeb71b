"""Column profiles against pandas over the whole file, read in many small blocks, and what
changes past the counted values and the sample size."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

from authoring import csv_profile
from components import csv_encoding

ROWS = 3_000


@pytest.fixture(scope="module")
def mixed_csv(tmp_path_factory) -> str:
    """Columns of every kind the scaffold's rules tell apart, with empty cells."""
    random = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("profile") / "mixed.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["code", "row_id", "price", "ratio", "city", "reading", "note", "empty", "label"])
        for i in range(ROWS):
            writer.writerow(
                [
                    int(random.integers(0, 12)),
                    1_000 + i,
                    "" if i % 17 == 0 else f"{random.lognormal(2, 1):.2f}",
                    f"{random.normal(-1, 3):.4f}",
                    "" if i % 5 == 0 else random.choice(["Oslo", "Lima", "Pune", "Kyiv"]),
                    random.choice(["NA", "?"]) if i % 25 == 0 else f"{random.normal(50, 9):.1f}",
                    f"note {i} {random.integers(0, 10**6)}",
                    "",
                    random.choice(["a", "b", "c"]),
                ]
            )
    return str(path)


def _profile(path: str, **kwargs) -> dict[str, csv_profile.ColumnProfile]:
    types = {name: t.name for name, t in csv_encoding.infer_column_types([path]).items()}
    # Blocks of 8 KB: dozens of them, so every figure is merged across blocks.
    return csv_profile.profile(csv_encoding.read_blocks(path, block_bytes=1 << 13), types, **kwargs)


@pytest.fixture(scope="module")
def cells(mixed_csv) -> pd.DataFrame:
    return pd.read_csv(mixed_csv, dtype=str, keep_default_na=False).replace("", None)


def test_many_blocks_are_read(mixed_csv):
    assert len(list(csv_encoding.read_blocks(mixed_csv, block_bytes=1 << 13))) > 10


def test_each_figure_equals_pandas_over_the_whole_file(mixed_csv, cells):
    profiles = _profile(mixed_csv, exact=list(cells))  # every distinct value counted
    assert [p.type for p in profiles.values()] == [
        "INT",
        "INT",
        "FLOAT",
        "FLOAT",
        "STRING",
        "STRING",
        "STRING",
        "UNKNOWN",
        "STRING",
    ]
    for name, found in profiles.items():
        column = cells[name]
        present = column.dropna()
        assert (found.rows, found.present) == (ROWS, len(present)), name
        assert found.first == (present.iloc[0] if len(present) else None), name
        assert found.distinct == present.nunique(), name
        if found.counts is not None:
            assert found.counts == present.value_counts().to_dict(), name
        if found.numeric:
            numbers = present.astype(float)
            assert (found.low, found.high) == (numbers.min(), numbers.max()), name
            assert found.mean == pytest.approx(numbers.mean(), rel=1e-12), name
            assert found.std == pytest.approx(numbers.std(ddof=0), rel=1e-12), name
            assert found.median == numbers.median() and not found.sampled, name
            assert found.integral == bool((numbers == numbers.round()).all()), name
        if found.type == "STRING":
            is_number = present.map(csv_profile.is_number)
            assert found.numeric_cells == is_number.sum(), name
            tokens = present[~is_number].value_counts().to_dict()
            if len(tokens) <= csv_profile.COUNTED_VALUES:
                assert dict(found.tokens) == tokens, name
            else:  # the first COUNTED_VALUES tokens, each with all its rows
                assert len(found.tokens) == csv_profile.COUNTED_VALUES, name
                assert all(tokens[token] == count for token, count in found.tokens.items()), name
    assert profiles["row_id"].counts is None  # 3,000 distinct values: counted, not each
    assert profiles["reading"].tokens.keys() == {"NA", "?"}


def test_is_number_reads_cells_as_csv_example_gens_parser(mixed_csv):
    assert all(map(csv_profile.is_number, ["1", "-2.5", " 3 ", "1_000", "1e5", "inf", "NaN", ".5"]))
    assert not any(map(csv_profile.is_number, ["NA", "?", "1,5", "five", "", "٣"]))


def test_past_the_counted_values_only_what_a_rule_needs_stays_exact(mixed_csv, cells, monkeypatch):
    monkeypatch.setattr(csv_profile, "COUNTED_VALUES", 20)
    profiles = _profile(mixed_csv, exact=("ratio",))
    truth = {name: cells[name].dropna().nunique() for name in cells}
    assert profiles["row_id"].distinct == ROWS == truth["row_id"]  # an integer id: unique in every row
    assert profiles["note"].distinct == truth["note"]  # text: every distinct value counted
    assert profiles["ratio"].distinct == truth["ratio"]  # asked for (a label's count is shown)
    # Numbers with repeats (or fractions) past the counted values: a lower bound, which no rule needs.
    assert csv_profile.COUNTED_VALUES < profiles["price"].distinct <= truth["price"]
    assert profiles["code"].distinct == truth["code"] == 12 and profiles["code"].counts is not None
    assert all(profiles[name].counts is None for name in ("row_id", "note", "ratio", "price"))


def test_past_the_sample_size_the_median_is_a_seeded_random_samples(mixed_csv, cells, monkeypatch):
    monkeypatch.setattr(csv_profile, "SAMPLE_ROWS", 400)
    first, again = _profile(mixed_csv), _profile(mixed_csv)
    for name in ("ratio", "price", "code"):
        numbers = np.sort(cells[name].dropna().astype(float).to_numpy())
        found = first[name]
        assert found.sampled and len(found._sample) == 400
        assert found.median == again[name].median  # the same file, the same sample
        # Its rank among all the values: near the middle (a 400-row sample's spread is about 2.5%).
        low, high = np.searchsorted(numbers, found.median, "left"), np.searchsorted(numbers, found.median, "right")
        assert low - 0.1 * len(numbers) <= len(numbers) / 2 <= high + 0.1 * len(numbers), name
    other = _profile(mixed_csv, seed=1)
    assert any(other[name].median != first[name].median for name in ("ratio", "price"))


# ---------------------------------------------------------------- dates


def _dates_of(tmp_path, cells: list[str]) -> dict[str, int]:
    path = tmp_path / "dates.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["when", "label"])
        writer.writerows([cell, i % 2] for i, cell in enumerate(cells))
    (found,) = [p for name, p in _profile(str(path)).items() if name == "when"]
    return found.dates


def test_each_date_format_counts_the_cells_it_reads_across_blocks(tmp_path):
    iso = [f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(2_000)]
    assert _dates_of(tmp_path, iso) == {"%Y-%m-%d": 2_000}
    stamped = [f"{day} {i % 24:02d}:{i % 60:02d}:07" for i, day in enumerate(iso)]
    assert _dates_of(tmp_path, stamped) == {"%Y-%m-%d %H:%M:%S": 2_000}
    assert _dates_of(tmp_path, [f"{d}T{i % 24:02d}:30" for i, d in enumerate(iso)]) == {"%Y-%m-%dT%H:%M": 2_000}


def test_a_day_past_twelve_tells_day_from_month_and_none_leaves_both(tmp_path):
    american = [f"{1 + i % 12}/{1 + i % 28}/2023" for i in range(600)]  # days up to 28
    assert _dates_of(tmp_path, american) == {"%m/%d/%Y": 600, "%d/%m/%Y": sum(1 + i % 28 <= 12 for i in range(600))}
    european = [f"{1 + i % 28:02d}/{1 + i % 12:02d}/2023" for i in range(600)]
    assert next(iter(_dates_of(tmp_path, european))) == "%d/%m/%Y"
    ambiguous = [f"{1 + i % 12}/{1 + i % 12}/2023" for i in range(600)]
    assert _dates_of(tmp_path, ambiguous) == {"%m/%d/%Y": 600, "%d/%m/%Y": 600}


def test_text_that_is_no_date_stops_being_tried(tmp_path):
    versions = [f"1.{i % 9}.{i % 7}" for i in range(500)]
    assert _dates_of(tmp_path, versions) == {}
    impossible = [f"2024-{13 + i % 5}-{32 + i % 9}" for i in range(500)]  # month 13+, day 32+
    assert _dates_of(tmp_path, impossible) == {}
