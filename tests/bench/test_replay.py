"""The replay benchmark's figures from a history (the replays themselves: tests/authoring/test_replay.py)."""

from __future__ import annotations

from bench import replay
from report.history import Entry


def _entries(seconds: list[float], values: list[float | None]) -> list[Entry]:
    started = ["trained from scratch"] + ["warm-started 3 of 4"] * (len(seconds) - 1)
    return [
        Entry(f"r{i}", "t", "blessed" if v else "failed: DriftGate", "auc", v, span=i, seconds=s, warm_start=w)
        for i, (s, v, w) in enumerate(zip(seconds, values, started, strict=True))
    ]


def test_figures_split_the_runs_after_the_window_fills_in_halves(tmp_path):
    entries = _entries([5, 6, 7, 8, 10, 11, 20, 21], [0.8, 0.81, 0.82, 0.83, 0.9, None, 0.92, 0.94])
    figures = replay.figures(entries, tmp_path)
    assert (figures["seconds_early_median"], figures["seconds_late_median"]) == (10.5, 20.5)
    assert figures["metric_from_run5_mean"] == (0.9 + 0.92 + 0.94) / 3
    assert (figures["runs"], figures["blessed"], figures["warm_started"]) == (8, 7, 7)
    table = replay.markdown({"window4": figures})
    assert "| window4 | `--window-spans 4` | 8 | 10.5 | 20.5 | 0.9200 | 7 | 7 |" in table
