"""The report of a real run, opened from disk in headless Chromium (Debian's package, which
`make test` installs): it loads without console errors, asks no other host for anything,
shows every plot, and the metrics it shows are the Evaluator's."""

from __future__ import annotations

import os
import shutil

import pytest

from pipeline.config import PipelineConfig
from pipeline.report.write import report_path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As root, in a sandbox whose network is closed: no sandbox, no GPU, no background traffic.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def opened(full_local_output, full_local_run, tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (make test installs it with apt-get where it can)")
    from playwright.sync_api import sync_playwright

    path = report_path(PipelineConfig(output_root=full_local_output), full_local_run.run_id)
    console, requests = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda message: console.append((message.type, message.text)))
        page.on("pageerror", lambda error: console.append(("pageerror", str(error))))
        page.on("request", lambda request: requests.append(request.url))
        page.goto(f"file://{path}", wait_until="load")
        screenshot = tmp_path_factory.mktemp("report") / "report.png"
        page.screenshot(path=str(screenshot), full_page=True)
        plots = page.eval_on_selector_all(
            "img.plot", "els => els.map(e => [e.dataset.plot, e.complete, e.naturalWidth, e.naturalHeight])"
        )
        cells = page.eval_on_selector_all(
            "tr[data-slice] td[data-metric]",
            "els => els.map(e => [e.closest('tr').dataset.slice, e.dataset.metric, e.dataset.value, e.textContent])",
        )
        sections = page.eval_on_selector_all("section", "els => els.map(e => e.id)")
        browser.close()
    return {
        "path": path,
        "console": console,
        "requests": requests,
        "plots": plots,
        "cells": cells,
        "sections": sections,
        "screenshot": screenshot,
    }


@pytest.mark.slow
def test_the_report_loads_without_errors_or_any_other_request(opened):
    assert [entry for entry in opened["console"] if entry[0] in ("error", "pageerror")] == []
    assert opened["requests"] == [f"file://{opened['path']}"]
    assert opened["sections"] == ["run", "data", "transform", "training", "evaluation", "model"]
    assert opened["screenshot"].stat().st_size > 50_000


@pytest.mark.slow
def test_every_plot_is_drawn(opened):
    names = [name for name, _, _, _ in opened["plots"]]
    assert {"timeline", "column:fare", "column:payment_type", "training:loss", "training:auc"} <= set(names)
    assert {"roc", "calibration", "confusion"} <= set(names)
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
