"""The report of a real run, opened from disk in headless Chromium (Debian's package, which
`make test` installs): it loads without console errors, asks no other host for anything,
shows every plot, and the metrics it shows are the Evaluator's."""

from __future__ import annotations

import pytest

from pipeline.config import PipelineConfig
from pipeline.report.write import report_path
from tests.support.browser import errors, open_page


@pytest.fixture(scope="module")
def opened(full_local_output, full_local_run, tmp_path_factory):
    path = report_path(PipelineConfig(output_root=full_local_output), full_local_run.run_id)
    return open_page(path, tmp_path_factory.mktemp("report") / "report.png")


@pytest.mark.slow
def test_the_report_loads_without_errors_or_any_other_request(opened):
    assert errors(opened) == []
    assert opened["requests"] == [f"file://{opened['path']}"]
    assert opened["sections"] == ["run", "data", "transform", "training", "evaluation", "model", "history"]
    assert opened["screenshot"].stat().st_size > 50_000


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
