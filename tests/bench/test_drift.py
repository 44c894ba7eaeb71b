"""The drift evidence script keeps running: every case measured on every compared column,
and the planted changes it exists to show stop a run."""

from __future__ import annotations

import os

from bench import drift
from pipeline.config import CONTRACT_FILE, DEFAULT_DATA_ROOT


def test_the_table_has_every_case_and_column_and_marks_the_planted_breaks(sample_dir, capsys):
    contract = os.path.join(DEFAULT_DATA_ROOT, CONTRACT_FILE)
    assert drift.main(["--data-root", str(sample_dir), "--contract", contract]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    header, body = rows[0], {row[0].lstrip("| ").split(" (")[0]: row[1:] for row in rows[2:]}
    assert header[1:] == [*list(drift.CASES)[:-1], list(drift.CASES)[-1] + " |"]
    assert "fare" in body and "payment_type" in body and "trip_start_timestamp" not in body
    cases = list(drift.CASES)
    assert body["fare"][cases.index("fares in cents")].endswith("*")
    assert body["payment_type"][cases.index("no cash")].rstrip(" |").endswith("*")
    assert not any(cell.rstrip(" |").endswith("*") for cell in body["fare"][: cases.index("fare +20%")])
