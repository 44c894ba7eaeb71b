"""Writing a run's report where the runners and the command put it."""

from __future__ import annotations

import dataclasses
import os

from pipeline.config import PipelineConfig

REPORT_DIR = "report"


def report_path(config: PipelineConfig, run_id: str, root: str | None = None) -> str:
    """Where a run's report goes: <output root>/report/<pipeline>/<run>/index.html (a
    rehearsal's: under the rehearsal root, as its output root is a gs:// path)."""
    return os.path.join(root or config.output_root, REPORT_DIR, config.pipeline_name, run_id, "index.html")


def settings(config: PipelineConfig) -> dict:
    """The configuration the report shows: every setting of the run's PipelineConfig."""
    shown = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name == "problem":
            value = value.to_dict()
        shown[field.name] = dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return shown


def write_report(
    summary,
    config: PipelineConfig,
    with_settings: bool = True,
    root: str | None = None,
    history: list = (),
    failure: str | None = None,
    failure_log: str | None = None,
) -> str:
    """Reads the run's artifacts, renders the page, writes it; returns its path. The
    configuration is shown only when ``config`` is the one the run ran with; ``history``:
    the pipeline's runs up to this one (``report.history``), shown with the metric over runs;
    ``failure`` and ``failure_log``: why a failed run stopped and where its log is, which
    only the runner knows (the page's verdict points there)."""
    from report.page import render
    from report.read import read_report

    path = report_path(config, summary.run_id, root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    report = read_report(summary, config.problem)
    report.history = list(history)
    report.failure, report.failure_log = failure, failure_log
    page = render(report, settings(config) if with_settings else None)
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
