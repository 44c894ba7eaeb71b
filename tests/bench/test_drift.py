"""The drift evidence script keeps running: every case asked for measured on every compared
column, and the planted changes it exists to show stop a run."""

from __future__ import annotations

import os

from bench import drift
from pipeline.config import CONTRACT_FILE, DEFAULT_PROBLEM_DIR

CASES = ["random halves", "fares in cents", "no cash"]


def test_the_table_has_each_case_and_column_and_marks_the_planted_breaks(sample_dir, capsys):
    contract = os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE)
    assert drift.main(["--data-root", str(sample_dir), "--contract", contract, "--cases", *CASES]) == 0
    rows = [line.strip("| ").split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[0] == ["column (threshold)", *CASES]
    body = {row[0].split(" (")[0]: dict(zip(CASES, row[1:], strict=True)) for row in rows[2:]}
    assert "fare" in body and "payment_type" in body and "trip_start_timestamp" not in body
    assert body["fare"]["fares in cents"].endswith("*") and body["payment_type"]["no cash"].endswith("*")
    assert not any(cell.endswith("*") for case, cell in body["fare"].items() if case != "fares in cents")
    assert not any(row["random halves"].endswith("*") for row in body.values())


def test_the_statistics_in_memory_are_those_of_the_csv_file(sample_dir, tmp_path):
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx.utils import io_utils

    from authoring.contract import csv_statistics

    schema = io_utils.parse_pbtxt_file(os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE), schema_pb2.Schema())
    rows = drift.read_rows(str(sample_dir))
    baseline, new = rows.iloc[:400], rows.iloc[400:]
    measured = drift.measure_case(baseline, new, schema, str(tmp_path))
    from_files = []
    for name, frame in (("new", new), ("baseline", baseline)):
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        from_files.append(csv_statistics([str(tmp_path / f"{name}.csv")]))
    assert drift._distances(*from_files, schema) == measured
    assert "dropoff_census_tract" in measured  # an 11-digit integer: read back as it was written


def test_span_sizes_measure_noise_quarters_and_the_planted_faults(sample_dir, capsys):
    contract = os.path.join(DEFAULT_PROBLEM_DIR, CONTRACT_FILE)
    argv = ["--data-root", str(sample_dir), "--contract", contract, "--sizes", "60", "--baseline-sizes", "200"]
    assert drift.main([*argv, "--repeats", "2", "--fault-repeats", "1", "--quarter-repeats", "1"]) == 0
    out = capsys.readouterr().out
    summary = out.split("\n\n")[1].splitlines()  # the first table: the summary
    assert summary[0] == "| column (threshold) | noise, 60 rows | quarter to quarter | fares in cents | no cash |"
    body = {row.strip("| ").split(" | ")[0].split(" (")[0]: row.strip("| ").split(" | ")[1:] for row in summary[2:]}
    assert body["fare"][2].endswith("*") and body["payment_type"][3].endswith("*")
    assert body["runs stopped"][2:] == ["100.0%", "100.0%"]
    assert "60 vs 200" in out and "2013-04 (" in out and "Planted fault 'no cash'" in out
