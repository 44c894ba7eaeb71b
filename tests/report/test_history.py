"""The run history: entries from run summaries, the champion after each run, the table."""

from __future__ import annotations

import pytest

from report import history
from report.run_summary import ComponentRun, RunSummary


def _summary(run_id: str, auc: float | None, blessed: bool | None, **more) -> RunSummary:
    return RunSummary(
        run_id=run_id,
        components=[ComponentRun("CsvExampleGen", "complete", 1.5), ComponentRun("Trainer", "complete", 2.0)],
        metrics={} if auc is None else {"auc": auc},
        blessed=blessed,
        pushed_to="/serving/1" if blessed else None,
        **more,
    )


def test_an_entry_says_what_the_run_did():
    drift = {"baseline": "b", "accepted": True, "drift": [{"feature": "x", "breached": True}]}
    entry = history.entry_from_summary(
        _summary("r1", 0.93, True, span=5, window="2-5", drift=drift, warm_start="warm-started 9 of 9 layers"), "auc"
    )
    assert (entry.outcome, entry.value, entry.span, entry.window, entry.pushed) == ("blessed", 0.93, 5, "2-5", True)
    assert entry.drift == "accepted: x"
    assert entry.seconds == 3.5
    assert entry.warm_start == "warm-started 9 of 9 layers"


@pytest.mark.parametrize(
    "drift, shown",
    [
        (None, "-"),
        ({"baseline": None, "drift": []}, "no baseline"),
        ({"baseline": "b", "drift": [{"feature": "x", "breached": False}]}, "within"),
    ],
)
def test_the_drift_column(drift, shown):
    assert history.entry_from_summary(_summary("r", 0.9, True, drift=drift), "auc").drift == shown


def test_a_failed_run_names_where_it_stopped():
    entry = history.entry_from_summary(_summary("r", None, None), "auc", failed_component="DriftGate")
    assert entry.outcome == "failed: DriftGate" and entry.drift.startswith("breached")
    assert not entry.blessed


def test_entries_round_trip_and_the_champion_stays_unless_beaten(tmp_path):
    path = history.history_path(str(tmp_path), "p")
    assert history.read(path) == []
    runs = [("r1", 0.90, True), ("r2", 0.89, False), ("r3", 0.92, True), ("r4", 0.91, False)]
    for run_id, auc, blessed in runs:
        history.append(path, history.entry_from_summary(_summary(run_id, auc, blessed), "auc"))
    entries = history.read(path)
    assert [e.run_id for e in entries] == ["r1", "r2", "r3", "r4"]
    assert history.champions(entries) == ["r1", "r1", "r3", "r3"]
    table = history.format_recent(entries, shown=3).splitlines()
    assert table[0] == "History: the last 3 of 4 run(s)"
    assert table[1].split() == ["run", "span", "window", "auc", "outcome", "champion", "pushed", "drift", "seconds"]
    assert [line.split()[0] for line in table[2:]] == ["r2", "r3", "r4"]
    assert "this run" in table[3] and "kept" in table[4]


def test_no_history_yet():
    assert "first recorded run" in history.format_recent([])
