"""The data contract shipped with the embedded data, and drafting one for new data: bad
inputs break it with one line each, as AnomalyGate prints them."""

from __future__ import annotations

import csv
import os

import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2

from components.anomaly_gate import MISSING_TAG, describe_anomalies, describe_missing
from pipeline import contract
from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR
from tests.support.sample_data import EMBEDDED_ROWS, SAMPLE_ROWS, write_sample

SHIPPED = os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE)


@pytest.fixture(scope="module")
def shipped() -> schema_pb2.Schema:
    return tfdv.load_schema_text(SHIPPED)


def _lines(data_dir, schema) -> list[str]:
    """What AnomalyGate would print for this data against ``schema``."""
    statistics = contract.csv_statistics([str(data_dir / "data.csv")])
    anomalies = describe_anomalies({"train": tfdv.validate_statistics(statistics, schema)})
    return anomalies + describe_missing({"train": statistics}, schema)


def _planted(tmp_path, edit, drop: str | None = None, add: str | None = None):
    """The sample with ``edit`` applied to each row, a column dropped or a column added."""
    target = write_sample(tmp_path / "planted", SAMPLE_ROWS, every=EMBEDDED_ROWS // SAMPLE_ROWS, edit=edit)
    if drop or add:
        with open(target / "data.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        names = [n for n in rows[0] if n != drop] + ([add] if add else [])
        with open(target / "data.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=names, extrasaction="ignore")
            writer.writeheader()
            writer.writerows({**row, **({add: "1"} if add else {})} for row in rows)
    return target


def test_the_embedded_data_meets_its_contract(shipped):
    statistics = contract.csv_statistics([os.path.join(DEFAULT_PROBLEM_DIR, "taxi.csv")])
    assert describe_anomalies({"all": tfdv.validate_statistics(statistics, shipped)}) == []
    assert describe_missing({"all": statistics}, shipped) == []


def test_the_contract_requires_what_the_model_relies_on(shipped):
    required = {f.name for f in shipped.feature if f.HasField("shape")}
    assert {"fare", "tips", "payment_type", "trip_start_hour"} <= required
    assert "company" not in required  # often empty, imputed by preprocessing_fn
    assert tfdv.get_feature(shipped, "fare").float_domain.min == 0
    assert tfdv.get_feature(shipped, "fare").float_domain.disallow_nan


def test_bad_cells_and_columns_each_break_it_with_their_own_line(tmp_path, shipped):
    def plant(row, i):
        row = dict(row)
        if i % 20 == 0:
            row["fare"] = "twelve dollars"  # 5% text in a number column
        if i % 10 == 1:
            row["payment_type"] = "Bitcoin"  # outside a closed domain
        if i % 10 == 2:
            row["trip_start_hour"] = "25"  # outside a physical range
        return row

    # The label's source missing, and a column the contract does not know.
    lines = "\n".join(_lines(_planted(tmp_path, plant, drop="tips", add="surcharge"), shipped))
    assert "feature 'fare'" in lines and "Expected data of type: FLOAT but got STRING" in lines
    assert "feature 'payment_type'" in lines and "Bitcoin" in lines
    assert "feature 'trip_start_hour'" in lines and "Out-of-range" in lines
    assert "feature 'tips'" in lines and "Column dropped" in lines
    assert "feature 'surcharge'" in lines and "New column" in lines


def test_a_hugely_negative_fare_breaks_it(tmp_path, shipped):
    """It used to be trained on, blessed and pushed."""
    lines = _lines(_planted(tmp_path, lambda row, i: {**row, "fare": "-1000000000"} if i % 10 == 0 else row), shipped)
    assert len(lines) == 1 and "feature 'fare'" in lines[0] and "Out-of-range" in lines[0]


@pytest.mark.parametrize(("cell", "reason"), [("nan", "NaN"), ("inf", "Inf"), ("-inf", "Inf")])
def test_nan_and_infinity_in_a_number_column_break_it(tmp_path, shipped, cell, reason):
    lines = _lines(_planted(tmp_path, lambda row, i: {**row, "trip_miles": cell} if i % 50 == 0 else row), shipped)
    assert len(lines) == 1 and "feature 'trip_miles'" in lines[0] and reason in lines[0], lines


def test_a_column_missing_more_values_than_it_tolerates_breaks_it(tmp_path, shipped):
    def empty_companies(row, i):
        return {**row, "company": ""} if i % 5 else row  # 80% empty; the contract allows 50%

    (line,) = _lines(_planted(tmp_path, empty_companies), shipped)
    assert line.startswith("[train] feature 'company': ")
    assert "of rows have no value; the contract allows 50% (max_missing_fraction=0.5)" in line
    share = float(line.split(": ")[1].split("%")[0])
    assert 80.0 <= share <= 90.0  # 80% emptied, plus the sample's own empty cells


def test_too_few_rows_break_it(tmp_path, shipped):
    few = write_sample(tmp_path / "few", 20, every=EMBEDDED_ROWS // 20)
    # (20 rows also miss values more often than the contract tolerates: lines of their own.)
    (line,) = [line for line in _lines(few, shipped) if "whole dataset" in line]
    assert "whole dataset" in line and "has 20 examples, which is fewer than expected" in line


def test_a_draft_for_new_data_has_types_required_columns_and_observed_ranges(tmp_path, sample_dir):
    assert contract.main(["--data-root", str(sample_dir), "--output", str(tmp_path / "draft.pbtxt")]) == 0
    text = (tmp_path / "draft.pbtxt").read_text()
    assert text.startswith("# DRAFT data contract")
    draft = tfdv.load_schema_text(str(tmp_path / "draft.pbtxt"))
    hour = tfdv.get_feature(draft, "trip_start_hour")
    assert hour.type == schema_pb2.INT and 0 <= hour.int_domain.min <= hour.int_domain.max <= 23
    assert tfdv.get_feature(draft, "fare").HasField("shape")
    assert not tfdv.get_feature(draft, "company").HasField("shape")
    assert tfdv.get_feature(draft, "company").drift_comparator.infinity_norm.threshold == contract.DRAFT_TEXT_DRIFT
    company_tags = list(tfdv.get_feature(draft, "company").annotation.tag)
    assert len(company_tags) == 1 and company_tags[0].startswith(MISSING_TAG)
    assert not tfdv.get_feature(draft, "fare").annotation.tag  # required: no tolerance needed
    fare_drift = tfdv.get_feature(draft, "fare").drift_comparator.jensen_shannon_divergence.threshold
    assert fare_drift == contract.DRAFT_NUMBER_DRIFT
    assert _lines(sample_dir, draft) == []  # the data it was drafted from meets it


def test_drafting_without_data_says_where_it_looked(tmp_path, capsys):
    assert contract.main(["--data-root", str(tmp_path)]) == 2
    assert f"No file matches *.csv in {tmp_path}" in capsys.readouterr().err
