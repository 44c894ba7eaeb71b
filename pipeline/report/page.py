"""The report as one self-contained HTML page: inline style, plots as data URIs, no script
and no request to any other host, so it opens from disk in any browser."""

from __future__ import annotations

import html

from pipeline.report import plots
from pipeline.report.read import Report
from pipeline.run_summary import format_drift

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: .2em .7em; border-bottom: 1px solid #eee;
text-align: left; vertical-align: top; } th { background: #f6f6f6; } .num { text-align: right; }
.verdict { font-size: 1.2em; font-weight: bold; } .bad { color: #b00020; } .good { color: #1b7a1b; }
.grid { display: flex; flex-wrap: wrap; gap: 1em; } figure { margin: 0; } figcaption { font-size: .85em; color: #555; }
code { background: #f3f3f3; padding: 0 .25em; }
"""


def _e(value) -> str:
    return html.escape(str(value))


def _figure(name: str, uri: str, caption: str) -> str:
    image = f'<img class="plot" data-plot="{_e(name)}" src="{uri}" alt="{_e(caption)}">'
    return f"<figure>{image}<figcaption>{_e(caption)}</figcaption></figure>"


def _run(report: Report, config: dict) -> str:
    s = report.summary
    rows = "".join(
        f"<tr><td>{_e(c.node_id)}</td><td>{_e(c.state)}</td><td class='num'>{c.seconds:.1f}</td></tr>"
        for c in s.components
    )
    settings = "".join(f"<tr><td>{_e(k)}</td><td><code>{_e(v)}</code></td></tr>" for k, v in sorted(config.items()))
    parts = [
        "<section id='run'><h2>The run</h2>",
        f"<table><tr><th>component</th><th>status</th><th>seconds</th></tr>{rows}</table>",
    ]
    if any(c.started for c in s.components):
        parts.append(_figure("timeline", plots.timeline(s.components), "when each component ran"))
    if settings:
        parts.append(f"<h3>Configuration</h3><table>{settings}</table>")
    else:
        parts.append("<p>Configuration: not recorded with this run (the report was written afterwards).</p>")
    return "".join(parts) + "</section>"


def _data(report: Report) -> str:
    if not report.columns:
        return ""
    splits = sorted(report.columns)
    rows_line = ", ".join(
        f"{split}: {report.columns[split][0].rows if report.columns[split] else 0} rows" for split in splits
    )
    by_name: dict[str, dict] = {}
    for split in splits:
        for column in report.columns[split]:
            by_name.setdefault(column.name, {})[split] = column
    header = "".join(f"<th>missing ({_e(split)})</th>" for split in splits)
    table = "".join(
        f"<tr><td>{_e(name)}</td><td>{_e(next(iter(cols.values())).kind)}</td>"
        + "".join(f"<td class='num'>{cols[s].missing:.1%}</td>" if s in cols else "<td></td>" for s in splits)
        + "</tr>"
        for name, cols in sorted(by_name.items())
    )
    figures = "".join(
        _figure(f"column:{name}", plots.distribution(cols), f"{name}: {' against '.join(sorted(cols))}")
        for name, cols in sorted(by_name.items())
    )
    if report.anomalies is None:
        anomalies = ""
    elif report.anomalies:
        anomalies = "<ul class='bad'>" + "".join(f"<li>{_e(line)}</li>" for line in report.anomalies) + "</ul>"
    else:
        anomalies = "<p class='good'>No anomalies: the data meets its contract.</p>"
    drift = f"<p>{_e(format_drift(report.summary.drift))}</p>" if report.summary.drift is not None else ""
    drift_rows = "".join(
        f"<tr><td>{_e(d['split'])}</td><td>{_e(d['feature'])}</td><td>{_e(d['measure'])}</td>"
        f"<td class='num'>{d['value']:.4f}</td><td class='num'>{d['threshold']:g}</td>"
        f"<td class='{'bad' if d['breached'] else 'good'}'>{'over' if d['breached'] else 'within'}</td></tr>"
        for d in (report.summary.drift or {}).get("drift", [])
    )
    if drift_rows:
        drift += (
            "<table><tr><th>split</th><th>column</th><th>measure</th><th>distance</th><th>threshold</th><th></th></tr>"
            f"{drift_rows}</table>"
        )
    return (
        f"<section id='data'><h2>The data</h2><p>{_e(rows_line)}</p>"
        f"<h3>Anomalies</h3>{anomalies}<h3>Drift</h3>{drift or '<p>Not checked in this run.</p>'}"
        f"<h3>Columns</h3><table><tr><th>column</th><th>type</th>{header}</tr>{table}</table>"
        f"<div class='grid'>{figures}</div></section>"
    )


def _transform(report: Report) -> str:
    if not report.vocabularies:
        return ""
    rows = "".join(f"<tr><td>{_e(k)}</td><td class='num'>{v}</td></tr>" for k, v in sorted(report.vocabularies.items()))
    bounds = "".join(
        f"<tr><td>{_e(k)}</td><td>{_e(', '.join(f'{b:.5f}' for b in v))}</td></tr>"
        for k, v in sorted(report.boundaries.items())
    )
    if bounds:
        bounds = f"<h3>Bucket boundaries</h3><table><tr><th>column</th><th>boundaries</th></tr>{bounds}</table>"
    return (
        "<section id='transform'><h2>Transform</h2><h3>Vocabularies</h3>"
        f"<table><tr><th>column</th><th>entries</th></tr>{rows}</table>{bounds}</section>"
    )


def _training(report: Report) -> str:
    if not report.curves:
        return ""
    figures = "".join(
        _figure(f"training:{metric}", plots.curve(metric, by_phase), f"{metric} per epoch")
        for metric, by_phase in sorted(report.curves.items())
        if metric in ("loss", "auc")
    )
    t = report.training
    ran = (
        f"<p>{_e(t['strategy'])} ({_e(t['reason'])}): {t['replicas']} replica(s) on {t['workers']} worker(s), "
        f"global batch {t['global_batch']}, {t['epochs']} epoch(s) of {t['steps_per_epoch']} steps.</p>"
        if t
        else ""
    )
    return f"<section id='training'><h2>Training</h2>{ran}{_schedule(t)}<div class='grid'>{figures}</div></section>"


def _schedule(t: dict) -> str:
    """What the epoch-end schedule decided (models/callbacks.py), when the record says."""
    said = []
    if t.get("stopped_early_at_epoch") is not None:
        said.append(f"stopped early after epoch {t['stopped_early_at_epoch'] + 1}")
    if t.get("best_epoch") is not None and t["best_epoch"] != t.get("last_epoch"):
        monitored = t.get("monitored", "val_auc")
        said.append(f"ended with epoch {t['best_epoch'] + 1}'s weights ({monitored} {t['best_' + monitored]:.4f})")
    if t.get("final_learning_rate") is not None:
        said.append(f"final learning rate {t['final_learning_rate']:.2g}")
    return f"<p>Schedule: {_e('; '.join(said))}.</p>" if said else ""


def _evaluation(report: Report) -> str:
    s = report.summary
    if not report.slices and s.blessed is None:
        return ""
    names = sorted({name for slice_ in report.slices for name in slice_.metrics})
    header = "".join(f"<th>{_e(n)}</th>" for n in names)
    rows = "".join(
        f"<tr data-slice='{_e(slice_.name)}'><td>{_e(slice_.name)}</td>"
        + "".join(
            f"<td class='num' data-metric='{_e(n)}' data-value='{slice_.metrics[n]!r}'>"
            + (f"{int(slice_.metrics[n])}" if n == "example_count" else f"{slice_.metrics[n]:.4f}")
            + "</td>"
            if n in slice_.metrics
            else "<td></td>"
            for n in names
        )
        + "</tr>"
        for slice_ in report.slices
    )
    if s.blessed is None:
        verdict = "<p class='verdict'>Not evaluated in this run.</p>"
    elif s.blessed:
        against = "and no worse than the last blessed model" if s.had_baseline else "(no blessed baseline yet)"
        verdict = f"<p class='verdict good'>BLESSED {_e(against)}</p>"
    else:
        verdict = (
            "<p class='verdict bad'>NOT blessed: "
            + _e("; ".join(s.validation_failures) or "thresholds not met")
            + "</p>"
        )
    thresholds = "".join(f"<li>{_e(t)}</li>" for t in report.thresholds)
    against = "".join(
        f"<tr><td>{_e(name)}</td><td class='num'>{values.get('baseline', float('nan')):.4f}</td>"
        f"<td class='num' data-change='{_e(name)}'>{values.get('change', float('nan')):+.4f}</td></tr>"
        for name, values in sorted(report.baseline.items())
        if name != "example_count"
    )
    if against:
        against = (
            "<h3>Against the baseline model (overall)</h3><table id='baseline'><tr><th>metric</th>"
            f"<th>baseline</th><th>change</th></tr>{against}</table>"
        )
    figures = []
    if "roc" in report.plots:
        figures.append(_figure("roc", plots.roc(report.plots["roc"]), "ROC curve (overall)"))
    if "calibration" in report.plots:
        figures.append(_figure("calibration", plots.calibration(report.plots["calibration"]), "calibration (overall)"))
    if "confusion" in report.plots:
        figures.append(_figure("confusion", plots.confusion(report.plots["confusion"]), "confusion matrix (overall)"))
    return (
        f"<section id='evaluation'><h2>Evaluation</h2>{verdict}<ul>{thresholds}</ul>{against}"
        f"<table id='metrics'><tr><th>slice</th>{header}</tr>{rows}</table>"
        f"<div class='grid'>{''.join(figures)}</div></section>"
    )


def _model(report: Report) -> str:
    s = report.summary
    if not s.pushed_to:
        return "<section id='model'><h2>The model</h2><p>Nothing pushed in this run.</p></section>"
    parts = [f"<section id='model'><h2>The model</h2><p>Pushed to <code>{_e(s.pushed_to)}</code></p>"]
    for signature in report.signatures:
        inputs = ", ".join(f"{_e(k)} ({_e(v)})" for k, v in signature.inputs.items())
        outputs = ", ".join(f"{_e(k)} ({_e(v)})" for k, v in signature.outputs.items())
        parts.append(f"<h3>{_e(signature.name)}</h3><p>inputs: {inputs}</p><p>outputs: {outputs}</p>")
    return "".join(parts) + "</section>"


def render(report: Report, config: dict | None = None) -> str:
    """The whole page."""
    title = f"Run {report.summary.run_id}"
    body = "".join(
        (
            _run(report, config or {}),
            _data(report),
            _transform(report),
            _training(report),
            _evaluation(report),
            _model(report),
        )
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{_e(title)}</h1>{body}</body></html>"
    )
