"""The report of a real run, opened from disk in headless Chromium (Debian's package, which
`make test` installs): it loads without console errors, asks no other host for anything,
shows every plot, the metrics it shows are the Evaluator's, and its verdict is what the
first screen shows."""

from __future__ import annotations

import pytest

from pipeline.config import PipelineConfig
from report.write import report_path
from tests.support.browser import errors, open_page


@pytest.fixture(scope="module")
def opened(full_local_output, full_local_run, tmp_path_factory):
    path = report_path(PipelineConfig(output_root=full_local_output), full_local_run.run_id)
    return open_page(path, tmp_path_factory.mktemp("report") / "report.png")


@pytest.mark.slow
def test_the_report_loads_without_errors_or_any_other_request(opened):
    assert errors(opened) == []
    assert opened["requests"] == [f"file://{opened['path']}"]
    assert opened["sections"] == [
        "verdict",
        "run",
        "data",
        "transform",
        "training",
        "evaluation",
        "importance",
        "model",
        "history",
        "configuration",
    ]
    assert opened["screenshot"].stat().st_size > 50_000


def _verdict_on_the_first_screen(opened: dict) -> None:
    """The verdict is drawn above every other section, whole within the first screen."""
    boxes, height = opened["boxes"], opened["viewport"]["height"]
    _, bottom = boxes["verdict"]
    assert bottom <= height, (boxes["verdict"], height)
    assert all(bottom <= other_top for name, (other_top, _) in boxes.items() if name != "verdict"), boxes


@pytest.mark.slow
def test_the_verdict_is_at_the_top_of_the_page(opened, full_local_run):
    _verdict_on_the_first_screen(opened)
    assert opened["verdict"].startswith("BLESSED" if full_local_run.blessed else "NOT blessed")
    assert f"{full_local_run.metrics['auc']:.4f}" in opened["verdict"]
    assert full_local_run.pushed_to is None or full_local_run.pushed_to in opened["verdict"]


@pytest.mark.parametrize("failed", [None, "Transform"])
def test_a_hand_built_report_draws_its_verdict_at_the_top(failed, tmp_path):
    """Without a pipeline run: a blessed run's page and a failed one's, drawn by Chromium."""
    from report.page import render
    from report.read import Column, Report, SliceMetrics
    from report.run_summary import ComponentRun, RunSummary
    from report.write import settings
    from tests.support.problems import TAXI

    nodes = ["CsvExampleGen", "StatisticsGen", "ExampleValidator", "AnomalyGate", "DriftGate", "Transform"]
    nodes += [] if failed else ["Trainer", "Evaluator", "Pusher"]
    components = [
        ComponentRun(n, "FAILED" if n == failed else "complete", 1.0, 100.0 + i, 101.0 + i) for i, n in enumerate(nodes)
    ]
    metric = TAXI.blessing.metric
    summary = RunSummary("r", components, metrics={} if failed else {metric: 0.95}, blessed=None if failed else True)
    summary.pushed_to = None if failed else str(tmp_path / "serving")
    report = Report(summary, problem=TAXI, anomalies=[])
    report.columns = {"train": [Column("c", "number", 10, 0.0, quantiles=[(0.0, 1.0, 10.0)])]}
    report.slices = [] if failed else [SliceMetrics("Overall", {metric: 0.95})]
    report.failure, report.failure_log = ("KeyError: 'x'", str(tmp_path / "failure.txt")) if failed else (None, None)
    path = tmp_path / "index.html"
    path.write_text(render(report, settings(PipelineConfig())), encoding="utf-8")
    opened = open_page(str(path), tmp_path / "page.png")
    assert errors(opened) == []
    _verdict_on_the_first_screen(opened)
    assert opened["sections"][0] == "verdict" and opened["sections"][-1] == "configuration"
    if failed:
        assert opened["verdict"].startswith(f"The run FAILED at {failed}") and "failure.txt" in opened["verdict"]
    else:
        assert opened["verdict"].startswith("BLESSED") and summary.pushed_to in opened["verdict"]


@pytest.mark.slow
def test_every_plot_is_drawn(opened):
    names = [name for name, _, _, _ in opened["plots"]]
    assert {"timeline", "column:fare", "column:payment_type", "training:loss", "training:auc"} <= set(names)
    assert {"roc", "calibration", "confusion", "history"} <= set(names)
    assert all(complete and width > 100 and height > 100 for _, complete, width, height in opened["plots"])


@pytest.mark.slow
def test_the_metrics_shown_are_the_evaluators(opened, full_local_run):
    overall = {metric: float(value) for slice_, metric, value, _ in opened["cells"] if slice_ == "Overall"}
    assert overall == pytest.approx(full_local_run.metrics)
    slices = {slice_ for slice_, _, _, _ in opened["cells"]}
    assert any(s.startswith("payment_type = ") for s in slices) and any(
        s.startswith("trip_start_hour = ") for s in slices
    )
    shown = {metric: text for slice_, metric, _, text in opened["cells"] if slice_ == "Overall"}
    assert shown["auc"] == f"{full_local_run.metrics['auc']:.4f}"
