"""The scaffold benchmark end to end on a few hundred generated rows: the table it prints
holds each size's and task's measured seconds and memory."""

from __future__ import annotations

from bench import scaffold
from bench.generate import SOURCE_CSV, rows_for_size


def test_it_prints_each_size_and_tasks_seconds_and_peak_memory(tmp_path, capsys):
    assert scaffold.main(["--sizes", "0.04", "--repeats", "2", "--tasks", "regression", "--work", str(tmp_path)]) == 0
    rows = rows_for_size(0.04, len(SOURCE_CSV.read_text().splitlines()) - 1)
    header, line = capsys.readouterr().out.strip().splitlines()[-2:]
    assert header.split()[:3] == ["rows", "task", "median"]
    count, task, median, span, rss, pss = line.split()
    low, high = map(float, span.split("-"))
    assert (int(count), task) == (rows, "regression")
    assert 0 < low <= float(median) <= high and float(rss) > 0 and float(pss) > 0
    assert len(list(tmp_path.glob("scaffold-regression-*.log"))) == 2
