"""The report as one self-contained HTML page: inline style, plots as data URIs, no script
and no request to any other host, so it opens from disk in any browser."""

from __future__ import annotations

import html
import math

from pipeline.report import plots
from pipeline.report.read import Report, describe_metric
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


def _column(report: Report, name: str) -> str:
    """A column as the person knows it: its CSV header's name too where the problem renamed it."""
    return report.problem.shown(name) if report.problem is not None else name


def _slice(report: Report, name: str) -> str:
    """A slice ("<column> = <value> & ...") with each column named as ``_column`` does."""
    parts = (part.partition(" = ") for part in name.split(" & "))
    return " & ".join(f"{_column(report, column)}{equals}{value}" for column, equals, value in parts)


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
        f"<tr><td>{_e(_column(report, name))}</td><td>{_e(next(iter(cols.values())).kind)}</td>"
        + "".join(f"<td class='num'>{cols[s].missing:.1%}</td>" if s in cols else "<td></td>" for s in splits)
        + "</tr>"
        for name, cols in sorted(by_name.items())
    )
    figures = "".join(
        _figure(
            f"column:{name}", plots.distribution(cols), f"{_column(report, name)}: {' against '.join(sorted(cols))}"
        )
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
        f"<tr><td>{_e(d['split'])}</td><td>{_e(_column(report, d['feature']))}</td><td>{_e(d['measure'])}</td>"
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
        f"<tr><td>{_e(_column(report, k))}</td><td>{_e(', '.join(f'{b:.5f}' for b in v))}</td></tr>"
        for k, v in sorted(report.boundaries.items())
    )
    if bounds:
        bounds = f"<h3>Bucket boundaries</h3><table><tr><th>column</th><th>boundaries</th></tr>{bounds}</table>"
    return (
        "<section id='transform'><h2>Transform</h2><h3>Vocabularies</h3>"
        f"<table><tr><th>column</th><th>entries</th></tr>{rows}</table>{bounds}</section>"
    )


def _task(report: Report) -> str | None:
    """The task ("binary", "multiclass", "regression"): the problem's, else the training
    record's, else what the evaluation's plots show; None when nothing says."""
    if report.problem is not None:
        return report.problem.task.value
    if report.training.get("task"):
        return report.training["task"]
    if "classes" in report.plots:
        return "multiclass"
    if {"roc", "calibration", "confusion"} & set(report.plots):
        return "binary"
    return "regression" if report.residuals is not None else None


def _label(report: Report) -> str:
    return report.problem.label.name if report.problem is not None else "the label"


def _monitored(t: dict) -> str | None:
    """The validation metric the training schedule watched ("val_auc"), as the record says."""
    return t.get("monitored") or next((key[len("best_") :] for key in t if key.startswith("best_val_")), None)


def _training(report: Report) -> str:
    if not report.curves:
        return ""
    t = report.training
    monitored = _monitored(t)
    if monitored:
        shown = {"loss", monitored.removeprefix("val_")}
    else:  # no record of what was watched: every metric but the learning rate
        shown = set(report.curves) - {"lr", "learning_rate"}
    figures = "".join(
        _figure(
            f"training:{metric}",
            plots.curve(describe_metric(metric), by_phase),
            f"{describe_metric(metric)} per epoch",
        )
        for metric, by_phase in sorted(report.curves.items())
        if metric in shown
    )
    ran = (
        f"<p>{_e(t['strategy'])} ({_e(t['reason'])}): {t['replicas']} replica(s) on {t['workers']} worker(s), "
        f"global batch {t['global_batch']}, {t['epochs']} epoch(s) of {t['steps_per_epoch']} steps"
        + (f": {_e(t['budget']['reason'])}" if t.get("budget", {}).get("reason") else "")
        + ".</p>"
        if t
        else ""
    )
    watched = (
        f"<p>The schedule watched the {_e(describe_metric(monitored))} of {_e(_label(report))}.</p>"
        if monitored
        else ""
    )
    return (
        f"<section id='training'><h2>Training</h2>{ran}{watched}{_schedule(t)}"
        f"<div class='grid'>{figures}</div></section>"
    )


def _schedule(t: dict) -> str:
    """What the epoch-end schedule decided (models/callbacks.py), when the record says."""
    said = []
    if t.get("stopped_early_at_epoch") is not None:
        said.append(f"stopped early after epoch {t['stopped_early_at_epoch'] + 1}")
    monitored = _monitored(t)
    if t.get("best_epoch") is not None and t["best_epoch"] != t.get("last_epoch") and monitored:
        best = t.get("best_" + monitored)
        value = f" {best:.4f}" if isinstance(best, (int, float)) else ""
        said.append(f"ended with epoch {t['best_epoch'] + 1}'s weights ({describe_metric(monitored)}{value})")
    if t.get("final_learning_rate") is not None:
        said.append(f"final learning rate {t['final_learning_rate']:.2g}")
    return f"<p>Schedule: {_e('; '.join(said))}.</p>" if said else ""


def _metrics_table(report: Report) -> str:
    names = sorted({name for slice_ in report.slices for name in slice_.metrics})
    header = "".join(f"<th>{_e(n)}</th>" for n in names)
    rows = "".join(
        f"<tr data-slice='{_e(slice_.name)}'><td>{_e(_slice(report, slice_.name))}</td>"
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
    return f"<table id='metrics'><tr><th>slice</th>{header}</tr>{rows}</table>"


def _verdict(report: Report) -> str:
    s = report.summary
    if s.blessed is None:
        return "<p class='verdict'>Not evaluated in this run.</p>"
    if s.blessed:
        against = "and no worse than the last blessed model" if s.had_baseline else "(no blessed baseline yet)"
        if s.ignored_baseline:
            against = f"(no baseline of this pipeline: another pipeline's model was ignored, {s.ignored_baseline})"
        return f"<p class='verdict good'>BLESSED {_e(against)}</p>"
    return (
        "<p class='verdict bad'>NOT blessed: " + _e("; ".join(s.validation_failures) or "thresholds not met") + "</p>"
    )


def _gate(report: Report) -> str:
    """What the model predicts, the metric that blesses it, and the thresholds it had to meet."""
    said = ""
    if report.problem is not None:
        blessing = report.problem.blessing
        headers = [report.problem.shown(c) for c in report.problem.label.sources if report.problem.header_of(c) != c]
        from_headers = f", from the CSV's {', '.join(headers)}" if headers else ""
        said = (
            f"<p>The model predicts {_e(report.problem.label.describe() + from_headers)}. It is blessed on its "
            f"{_e(describe_metric(blessing.metric))} over the whole eval split:</p>"
        )
    thresholds = "".join(f"<li>{_e(t)}</li>" for t in report.thresholds)
    return f"{said}<ul id='thresholds'>{thresholds}</ul>"


def _binary_figures(report: Report) -> list[str]:
    figures = []
    if "roc" in report.plots:
        figures.append(_figure("roc", plots.roc(report.plots["roc"]), f"ROC curve of {_label(report)} (overall)"))
    if "calibration" in report.plots:
        figures.append(
            _figure(
                "calibration",
                plots.calibration(report.plots["calibration"], _label(report)),
                f"calibration of {_label(report)} (overall)",
            )
        )
    if "confusion" in report.plots:
        figures.append(
            _figure(
                "confusion",
                plots.confusion(report.plots["confusion"]),
                f"confusion matrix of {_label(report)} (overall)",
            )
        )
    return figures


def _classes(report: Report) -> str:
    """The confusion matrix between the classes, and each class's precision and recall."""
    matrix = report.plots.get("classes")
    if matrix is None:
        return (
            "<h3>Confusion matrix</h3><p class='bad'>Not drawn: the evaluation holds no multi-class "
            "confusion matrix (the Evaluator's MultiClassConfusionMatrixPlot).</p>"
        )
    figure = _figure(
        "class_confusion",
        plots.class_confusion(matrix),
        f"{_label(report)}: actual against predicted class, {matrix.total:.0f} eval examples (overall)",
    )
    lines = "".join(
        f"<li data-class='{_e(name)}' data-precision='{matrix.precision(i)!r}' data-recall='{matrix.recall(i)!r}'>"
        f"{_e(name)}: precision {_share(matrix.precision(i))} ({matrix.counts[i][i]:.0f} of the "
        f"{sum(row[i] for row in matrix.counts):.0f} predicted {_e(name)}), recall {_share(matrix.recall(i))} "
        f"({matrix.counts[i][i]:.0f} of the {sum(matrix.counts[i]):.0f} that are)</li>"
        for i, name in enumerate(matrix.actual)
    )
    return (
        f"<h3>Confusion matrix between the classes of {_e(_label(report))}</h3>"
        f"<div class='grid'>{figure}</div><h3>Per class</h3><ul id='per-class'>{lines}</ul>"
    )


def _share(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}"  # NaN: no example to divide by


def _residuals(report: Report) -> str:
    """Predicted against actual, and the residuals' histogram, or why they are not drawn."""
    found = report.residuals
    label = _label(report)
    if found is None:
        why = report.unavailable.get("residuals", "the run's examples and model were not read")
        return f"<h3>Residuals</h3><p class='bad'>Not drawn: {_e(why)}</p>"
    read = (
        f"the first {found.rows_read} examples of the eval split"
        if found.capped
        else f"all {found.rows_read} examples of the eval split"
    )
    said = (
        f"<p>On {read}, predicted by the model at <code>{_e(found.model_dir)}</code> (its <code>label</code> and "
        f"<code>serving_default</code> signatures, as the Evaluator asks them): residual (actual minus predicted "
        f"{_e(label)}) mean <span data-residual='mean'>{found.mean:.4g}</span>, root mean square "
        f"<span data-residual='rmse'>{found.rmse:.4g}</span>.</p>"
    )
    pairs = [(a, p) for a, p in zip(found.actual, found.predicted, strict=True) if math.isfinite(a - p)]
    if len(pairs) < len(found.actual):
        said += (
            f"<p class='bad'>{len(found.actual) - len(pairs)} of them have an actual or predicted value that is "
            "not a finite number (NaN or infinite): left out of the plots.</p>"
        )
    if not pairs:
        return f"<h3>Residuals</h3>{said}<p class='bad'>Not drawn: no example to draw.</p>"
    actual, predicted = (list(values) for values in zip(*pairs, strict=True))
    try:
        figures = [
            _figure(
                "predicted_against_actual",
                plots.predicted_against_actual(actual, predicted, label),
                f"predicted against actual {label} ({len(pairs)} eval examples)",
            ),
            _figure(
                "residuals",
                plots.residual_histogram([a - p for a, p in pairs], label),
                f"residuals: actual minus predicted {label} ({len(pairs)} eval examples)",
            ),
        ]
    except Exception as err:  # noqa: BLE001 - a plot that cannot be drawn must not stop the report
        return f"<h3>Residuals</h3>{said}<p class='bad'>Not drawn: {_e(type(err).__name__)}: {_e(err)}</p>"
    return f"<h3>Residuals</h3>{said}<div class='grid'>{''.join(figures)}</div>"


def _evaluation(report: Report) -> str:
    s = report.summary
    if not report.slices and s.blessed is None:
        return ""
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
    task = _task(report)
    if task == "multiclass":
        plotted = _classes(report)
    elif task == "regression":
        plotted = _residuals(report) if report.slices else ""
    else:
        plotted = f"<div class='grid'>{''.join(_binary_figures(report))}</div>"
    return (
        f"<section id='evaluation'><h2>Evaluation</h2>{_verdict(report)}{_gate(report)}{against}"
        f"{_metrics_table(report)}{plotted}</section>"
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


def _history(report: Report) -> str:
    """The metric over runs and the last runs' table (pipeline/history.py)."""
    from pipeline.history import champions

    entries = report.history
    if not entries:
        return ""
    metric = entries[-1].metric
    by_id = {entry.run_id: entry.value for entry in entries}
    champion_ids = champions(entries)
    parts = ["<section id='history'><h2>History</h2>"]
    if any(entry.value is not None for entry in entries) and report.problem is not None:
        values = [entry.value for entry in entries]
        champion = [by_id.get(run_id) for run_id in champion_ids]
        threshold = report.problem.blessing.threshold
        caption = f"{metric} of each run's candidate, of the champion after each run, and the blessing threshold"
        parts.append(_figure("history", plots.over_runs(values, champion, metric, threshold), caption))
    head = "".join(f"<th>{_e(h)}</th>" for h in ("run", "span", "window", metric, "outcome", "champion", "drift"))
    rows = []
    for entry, champion_id in list(zip(entries, champion_ids, strict=True))[-20:]:
        value = "-" if entry.value is None else f"{entry.value:.4f}"
        cells = (
            entry.run_id,
            "-" if entry.span is None else entry.span,
            entry.window or "-",
            value,
            entry.outcome + (", pushed" if entry.pushed else ""),
            "this run" if champion_id == entry.run_id else ("kept" if champion_id else "-"),
            entry.drift,
        )
        rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    shown = f"the last {len(rows)} of {len(entries)} runs" if len(entries) > len(rows) else f"{len(entries)} run(s)"
    parts.append(f"<p>{_e(shown)}</p><table><tr>{head}</tr>{''.join(rows)}</table></section>")
    return "".join(parts)


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
            _history(report),
        )
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{_e(title)}</h1>{body}</body></html>"
    )
