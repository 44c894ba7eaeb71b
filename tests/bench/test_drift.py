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
