"""The replay's cutting of a CSV into spans by its time column (the runs: tests/problems)."""

from __future__ import annotations

import csv
import datetime
import re
from pathlib import Path

import pytest

from authoring import replay
from components import spans
from models import problem as problem_lib
from report import history


def _write(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["when", "x"])
        writer.writerows(rows)
    return str(path)


def _seconds(year: int, month: int) -> str:
    return str(int(datetime.datetime(year, month, 15, tzinfo=datetime.UTC).timestamp()))


def test_rows_are_cut_into_periods_oldest_first_cells_unchanged(tmp_path):
    rows = [[_seconds(2014, 5), "b"], [_seconds(2013, 2), "a"], [_seconds(2014, 6), ""], [_seconds(2015, 1), "c"]]
    cut = replay.cut_into_spans([_write(tmp_path / "in.csv", rows)], "when", 3, str(tmp_path / "spans"))
    assert cut == [(1, "2013-01", 1), (2, "2014-04", 2), (3, "2015-01", 1)]
    with open(tmp_path / "spans" / "span-2" / "data.csv", newline="") as f:
        assert list(csv.reader(f)) == [["when", "x"], rows[0], rows[2]]
    # The folders are spans as TFX's ExampleGen finds them.
    assert [s.number for s in spans.list_spans(str(tmp_path / "spans"), replay.SPAN_PATTERN)] == [1, 2, 3]


def test_iso_dates_work_too(tmp_path):
    rows = [["2016-01-03", "a"], ["2016-02-10T08:00:00", "b"], ["2016-03-01", "c"]]
    cut = replay.cut_into_spans([_write(tmp_path / "in.csv", rows)], "when", 1, str(tmp_path / "spans"))
    assert [(label, count) for _, label, count in cut] == [("2016-01", 1), ("2016-02", 1), ("2016-03", 1)]


@pytest.mark.parametrize(
    "rows, message",
    [([["", "a"]], "is empty"), ([["next tuesday", "a"]], "neither seconds since 1970 nor an ISO date")],
)
def test_a_row_without_a_usable_time_is_named(tmp_path, rows, message):
    with pytest.raises(ValueError, match=message) as error:
        replay.cut_into_spans([_write(tmp_path / "in.csv", rows)], "when", 3, str(tmp_path / "spans"))
    assert "in.csv:2" in str(error.value)


def test_a_missing_time_column_is_named(tmp_path):
    with pytest.raises(ValueError, match="no column 'time'"):
        replay.cut_into_spans([_write(tmp_path / "in.csv", [["1", "a"]])], "time", 3, str(tmp_path / "spans"))


def test_a_problem_without_a_time_column_is_refused(tmp_path, capsys):
    from tests.support.problems import SHIPPED, SHIPPED_DIRS

    without = next(SHIPPED_DIRS[name] for name, problem in SHIPPED.items() if problem.time_column is None)
    assert replay.main(["--problem", str(without), "--output-root", str(tmp_path)]) == 2
    assert "names no time_column" in capsys.readouterr().err


def test_a_time_column_under_a_spreadsheet_header_cuts_the_spans(tmp_path, capsys):
    folder = tmp_path / "problem"
    folder.mkdir()
    header = ["Created At", "Amount ($)", "Churned?"]
    when, amount, churned = (problem_lib.feature_names(header)[h] for h in header)
    rows = [[f"2024-{1 + i % 6:02d}-01", str(i), "yes" if i % 3 else "no"] for i in range(60)]
    (folder / "data.csv").write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    (folder / "problem.toml").write_text(
        f"""name = "churn"
task = "binary"
time_column = "{when}"
[columns]
{when} = "Created At"
{amount} = "Amount ($)"
{churned} = "Churned?"
[label]
column = "{churned}"
positive = "yes"
[features]
numeric = ["{amount}"]
[features.unused]
{when} = "the time"
[evaluation]
metric = "auc"
threshold = 0.6
"""
    )
    runs = []
    args = ["--problem", str(folder), "--output-root", str(tmp_path / "out"), "--months-per-span", "3"]
    assert replay.main(args, run=lambda flags: runs.append(flags) or 0) == 0
    assert len(runs) == 2 and "2 spans of 3 month(s) by" in capsys.readouterr().out
    assert (tmp_path / "out" / "spans" / "span-1" / "data.csv").read_text().splitlines()[0] == ",".join(header)


# Replayed runs with a window of two spans, pruned to the last two runs after each: the
# second is the first whose window and kept runs are full; two more after it, each pruning an
# older run. (The shipped window of four, keeping four runs, would need six runs for the same.)
WINDOW = 2
RUNS_WINDOW_FULL, RUNS = WINDOW, WINDOW + 2
# What the policy keeps for every push (runs/prune.py): the model, its blessing, the copy pushed.
PUSHED = ("Trainer/model", "Evaluator/blessing", "Pusher")


def _bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


@pytest.mark.slow
def test_replayed_runs_keep_disk_use_bounded_and_a_cached_rerun_works(tmp_path, capsys):
    """Four two-month spans of the taxi data, one run each, pruned to the last 2 runs after
    each: from the second run on (the window holds two spans, the root two runs) the pipeline
    root stops growing but for what every push keeps; then a rerun on the same data reuses the
    cached components of the pruned store."""
    from local_runner import main as run_locally
    from tests.support.problems import SHIPPED_DIRS

    taxi, out = str(SHIPPED_DIRS["taxi"]), tmp_path / "replay"
    root = out / "pipelines" / "taxi-big-tipper"
    # Short and cheap runs: what is tested is what they leave behind.
    quick = ["--train-steps", "10", "--transform-tf1-graph", "--no-report", "--accept-drift"]
    quick += ["--window-spans", str(WINDOW)]
    runner_flags = ["--keep-runs", "2", "--enable-cache", *quick]
    runner_flags += ["--blessing-threshold", "0.5"]  # blessed and pushed whenever no worse than the champion

    def replay_until(runs: int) -> int:
        args = ["--problem", taxi, "--output-root", str(out), "--months-per-span", "2", "--runs", str(runs)]
        # In this process: the runs without an interpreter's start-up each.
        args += [*(["--keep"] if runs > RUNS_WINDOW_FULL else []), "--", *runner_flags]
        assert replay.main(args, run=run_locally) == 0
        return _bytes(root) - sum(_bytes(root / kept) for kept in PUSHED)

    after_full = replay_until(RUNS_WINDOW_FULL)
    after_all = replay_until(RUNS)
    entries = history.read(history.history_path(str(out), "taxi-big-tipper"))
    assert [entry.span for entry in entries] == list(range(1, RUNS + 1))
    assert entries[-1].window == f"{RUNS - WINDOW + 1}-{RUNS}"
    assert any("warm-started" in (entry.warm_start or "") for entry in entries)
    # Bounded: the last two runs' artifacts take no more room than the first two's did, give
    # or take the spans' sizes (spans 1-2 hold 1,239 rows, spans 3-4 1,465); unpruned, the four
    # runs' would take about twice the room ...
    assert after_all < 1.5 * after_full, (after_full, after_all)
    # ... but for what every push keeps: one model per push, and the last 2 runs' models.
    # (How many runs beat their champion is the short trainings' noise: one, or several.)
    pushes = sum(entry.pushed for entry in entries)
    models = len(list((root / "Trainer" / "model").iterdir()))
    assert pushes <= models <= pushes + 2, (pushes, models)

    capsys.readouterr()
    rerun = [
        "--problem", taxi, "--data-root", str(out / "data"), "--data-pattern", replay.SPAN_PATTERN,
        "--output-root", str(out), "--enable-cache", *quick, "--train-steps", "11",
    ]  # fmt: skip
    assert run_locally(rerun) == 0
    printed = capsys.readouterr().out
    assert re.search(r"CsvExampleGen\s+cached", printed), printed
    assert re.search(r"Trainer\s+complete", printed), printed
