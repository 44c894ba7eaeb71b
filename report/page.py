"""The report as one self-contained HTML page: inline style, plots as data URIs, no script
and no request to any other host, so it opens from disk in any browser."""

from __future__ import annotations

import enum
import html
import math
from collections.abc import Mapping

from models.budget import data_seen
from report import plots
from report.importance import MIN_SLICE_ROWS
from report.read import AT_LEAST, AT_MOST, CHANGE, Report, describe_metric
from report.run_summary import format_drift

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: .2em .7em; border-bottom: 1px solid #eee;
text-align: left; vertical-align: top; } th { background: #f6f6f6; } .num { text-align: right; }
.verdict { font-size: 1.2em; font-weight: bold; } .bad { color: #b00020; } .good { color: #1b7a1b; }
.grid { display: flex; flex-wrap: wrap; gap: 1em; } figure { margin: 0; } figcaption { font-size: .85em; color: #555; }
code { background: #f3f3f3; padding: 0 .25em; }
#verdict { border: 1px solid #ddd; border-radius: 4px; padding: .2em 1em .5em; margin: 1em 0 2em; }
#verdict-facts th { background: none; white-space: nowrap; } #verdict-facts code { overflow-wrap: anywhere; }
#settings tr.group td { font-weight: bold; color: #444; }
.bar { display: inline-block; height: .8em; background: #4a78b5; vertical-align: middle; }
"""
# Component states (report/run_summary.py): the one that stopped the run, those that let it go on.
FAILED = "FAILED"
PASSED = ("complete", "cached")
# The data checks the verdict reports, by the pipeline's component ids (pipeline/pipeline.py).
EXAMPLE_VALIDATOR, ANOMALY_GATE, DRIFT_GATE = "ExampleValidator", "AnomalyGate", "DriftGate"
# Where the page shows what each component produced: a failed one's pointer (else the run's table).
SECTION_OF = {
    "CsvExampleGen": "data",
    "ServingExampleGen": "data",
    "StatisticsGen": "data",
    "ServingStatisticsGen": "data",
    "ImportSchemaGen": "data",
    "SchemaGen": "data",
    EXAMPLE_VALIDATOR: "anomalies",
    ANOMALY_GATE: "anomalies",
    DRIFT_GATE: "drift",
    "Transform": "transform",
    "Tuner": "training",
    "Trainer": "training",
    "Champion": "evaluation",
    "Evaluator": "evaluation",
    "Pusher": "model",
}
SECTION_TITLES = {
    "run": "The run",
    "data": "The data",
    "anomalies": "The data: anomalies",
    "drift": "The data: drift",
    "transform": "Transform",
    "training": "Training",
    "evaluation": "Evaluation",
    "model": "The model",
}


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


def _run(report: Report) -> str:
    s = report.summary
    rows = "".join(
        f"<tr data-component='{_e(c.node_id)}'><td>{_e(c.node_id)}</td>"
        f"<td class='{'bad' if c.state == FAILED else ''}'>{_e(c.state)}</td><td class='num'>{c.seconds:.1f}</td></tr>"
        for c in s.components
    )
    parts = [
        "<section id='run'><h2>The run</h2>",
        f"<table><tr><th>component</th><th>status</th><th>seconds</th></tr>{rows}</table>",
    ]
    if any(c.started for c in s.components):
        parts.append(_figure("timeline", plots.timeline(s.components), "when each component ran"))
    return "".join(parts) + "</section>"


def _configuration(config: dict) -> str:
    """Every setting the run ran with, one row each; nested settings (the problem spec, the
    hyperparameters) as indented rows under their key, so nothing is shown as a Python repr."""
    if not config:
        return (
            "<section id='configuration'><h2>Configuration</h2><p>Not recorded with this run "
            "(the report was written afterwards).</p></section>"
        )
    rows = "".join(row for key, value in sorted(config.items()) for row in _setting_rows(key, value, key, 0))
    return (
        "<section id='configuration'><h2>Configuration</h2>"
        f"<table id='settings'><tr><th>setting</th><th>value</th></tr>{rows}</table></section>"
    )


def _nested(value) -> bool:
    """Whether a setting opens rows of its own: a non-empty mapping, or a list holding mappings or lists."""
    if isinstance(value, Mapping):
        return bool(value)
    return isinstance(value, (list, tuple)) and any(isinstance(v, (Mapping, list, tuple)) for v in value)


def _setting_rows(key: str, value, path: str, depth: int) -> list[str]:
    """A setting's row, and below it, one level deeper, a row per entry of a nested one (a
    list's entries numbered from 1)."""
    indent = f" style='padding-left: {0.7 + 1.5 * depth:g}em'"
    attributes = f"data-setting='{_e(path)}' data-depth='{depth}'"
    if not _nested(value):
        return [f"<tr {attributes}><td{indent}>{_e(key)}</td><td><code>{_e(_setting_text(value))}</code></td></tr>"]
    entries = value.items() if isinstance(value, Mapping) else enumerate(value, 1)
    rows = [f"<tr class='group' {attributes}><td{indent}>{_e(key)}</td><td></td></tr>"]
    for name, entry in entries:
        rows += _setting_rows(str(name), entry, f"{path}.{name}", depth + 1)
    return rows


def _setting_text(value) -> str:
    """A setting's value as a person writes it: "true", "not set", "a, b", "none" for an empty list."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return _setting_text(value.value)
    if isinstance(value, (list, tuple, set, frozenset, Mapping)):
        return ", ".join(_setting_text(v) for v in value) if value else "none"
    return str(value)


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
        f"<h3 id='anomalies'>Anomalies</h3>{anomalies}"
        f"<h3 id='drift'>Drift</h3>{drift or '<p>Not checked in this run.</p>'}"
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


def _choice(t: dict) -> str:
    """How the Trainer chose the family (models/choice.py), when it chose."""
    from models.choice import Choice

    if not t.get("choice"):
        return ""
    said = Choice.from_record(t["choice"]).describe()
    return f"<p class='choice'>Family: {_e(said[0].upper() + said[1:])}.</p>"


def _trees_training(t: dict) -> str:
    """The trees family's training (models/trees.py): no epochs, a forest grown once."""
    held_out = "; ".join(f"{describe_metric(k)} {v:.4f}" for k, v in t.get("training_logs", {}).items())
    return (
        f"<section id='training'><h2>Training</h2>{_choice(t)}<p>Gradient-boosted trees (YDF): "
        f"{t['trees']} trees over {t['features']} features, grown in {t['trained_seconds']} s ({_e(t['reason'])})"
        + (f"; on the tenth of the training split held out for early stopping: {_e(held_out)}" if held_out else "")
        + ".</p></section>"
    )


def _training(report: Report) -> str:
    t = report.training
    if t.get("family") == "trees":
        return _trees_training(t)
    if not report.curves:
        return ""
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
        + (f"<p class='seen'>{_e(seen[0].upper() + seen[1:])}.</p>" if (seen := data_seen(t)) else "")
        if t
        else ""
    )
    watched = (
        f"<p>The schedule watched the {_e(describe_metric(monitored))} of {_e(_label(report))}.</p>"
        if monitored
        else ""
    )
    return (
        f"<section id='training'><h2>Training</h2>{_choice(t)}{ran}{watched}{_schedule(t)}"
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


def _verdict(report: Report, body: str) -> str:
    """The page's first section: the outcome and why, so nobody has to scroll for it. Blessed
    or not, the blessing metric against its threshold and against the champion, where the
    model went, the data checks, and what to read first when something failed (links into
    ``body``, the sections below)."""
    s = report.summary
    failed = [c.node_id for c in s.components if c.state == FAILED]
    if s.blessed is None:
        blessing = "Not evaluated in this run"
    elif s.blessed:
        blessing = "BLESSED"
    else:
        blessing = "NOT blessed: " + ("; ".join(s.validation_failures) or "thresholds not met")
    good = bool(s.blessed) and not failed
    headline = blessing
    if failed:  # a failure after the Evaluator (the Pusher's) leaves a verdict to say too
        headline = f"The run FAILED at {', '.join(failed)}" + (f"; {blessing}" if s.blessed is not None else "")
    metric = _blessing_metric(report)
    facts = [
        ("metric", "blessing metric", _against_threshold(report, metric)),
        ("champion", "against the champion", _against_champion(report, metric)),
        ("pushed", "pushed", _pushed(report)),
        *_data_checks(report),
    ]
    look = _look_at(report, failed, body)
    if look:
        facts.append(("look", "look at", (look, "bad")))
    rows = "".join(
        f"<tr data-fact='{key}'><th>{_e(name)}</th><td class='{kind}'>{text}</td></tr>"
        for key, name, (text, kind) in facts
    )
    return (
        f"<section id='verdict'><p class='verdict {'good' if good else 'bad'}'>{_e(headline)}</p>"
        f"<table id='verdict-facts'>{rows}</table></section>"
    )


def _blessing_metric(report: Report) -> str | None:
    """The metric that blesses a model: the problem's, else the one the evaluation bounds."""
    if report.problem is not None:
        return report.problem.blessing.metric
    bounded = [name for name, bounds in report.bounds.items() if {AT_LEAST, AT_MOST} & set(bounds)]
    return bounded[0] if len(bounded) == 1 else None


def _against_threshold(report: Report, metric: str | None) -> tuple[str, str]:
    """The candidate's blessing metric against its floor or ceiling (the evaluation's own, else
    the problem's), as HTML and a class ("good", "bad" or "")."""
    if metric is None:
        return "not known (no problem spec and no single bounded metric)", ""
    words = describe_metric(metric)
    bounds = _bounds(report, metric)
    required = " and ".join(f"{side} {value:g}" for side, value in sorted(bounds.items()) if side != CHANGE)
    value = report.summary.metrics.get(metric)
    if value is None:
        when = f"its {words} is {required}" if required else "its thresholds are met"
        return _e(f"{words}: not evaluated in this run (a model is blessed when {when})"), ""
    met = all(value >= v if side == AT_LEAST else value <= v for side, v in bounds.items() if side != CHANGE)
    said = f"{words} <b data-value='{value!r}'>{value:.4f}</b>"
    if not required:
        return said, ""
    return f"{said}, required {_e(required)}: {'met' if met else 'missed'}", "good" if met else "bad"


def _bounds(report: Report, metric: str) -> dict[str, float]:
    """``metric``'s floor or ceiling (and change allowed) as the run's evaluation was configured
    (a --blessing-threshold included), else as the problem's spec sets them."""
    bounds = dict(report.bounds.get(metric, {}))
    if not {AT_LEAST, AT_MOST} & set(bounds) and report.problem is not None:
        side = AT_LEAST if report.problem.higher_is_better else AT_MOST
        bounds[side] = report.problem.blessing.threshold
    return bounds


def _against_champion(report: Report, metric: str | None) -> tuple[str, str]:
    """The candidate against the champion (the Evaluator's baseline)."""
    s = report.summary
    if s.blessed is None:
        return "not compared (not evaluated in this run)", ""
    if s.baseline_is_candidate:
        return "the champion itself (a cached rerun): evaluated once", ""
    if s.ignored_baseline:
        return _e(f"none of this pipeline's (another pipeline's model was ignored: {s.ignored_baseline})"), ""
    if not s.had_baseline:
        return "none yet: the first model is judged against the threshold alone", ""
    compared = report.baseline.get(metric or "", {})
    if "baseline" not in compared:
        return "compared (see <a href='#evaluation'>Evaluation</a>)", ""
    words = describe_metric(metric)
    change = compared.get("change", math.nan)
    said = f"champion's {_e(words)} {compared['baseline']:.4f}, this model <span data-change>{change:+.4f}</span>"
    allowed = report.bounds.get(metric, {}).get(CHANGE)
    if allowed is not None:
        said += f" (allowed to be worse by {allowed:.4g})"
    return said, ""


def _pushed(report: Report) -> tuple[str, str]:
    s = report.summary
    if s.pushed_to:
        return f"<code>{_e(s.pushed_to)}</code>", "good"
    why = " (the model was not blessed)" if s.blessed is False else ""
    return f"nothing pushed in this run{why}", ""


def _data_checks(report: Report) -> list[tuple[str, str, tuple[str, str]]]:
    """What the three data checks found: ExampleValidator's anomalies against the contract,
    AnomalyGate's verdict on them, DriftGate's against the champion's data."""
    s = report.summary
    anomalies = report.anomalies
    validator = s.component(EXAMPLE_VALIDATOR)
    if anomalies is not None:
        found = ("no anomaly: the data meets its contract", "good")
        if anomalies:
            count = f"{len(anomalies)} {'anomaly' if len(anomalies) == 1 else 'anomalies'}"
            found = (f"{count} (see <a href='#anomalies'>the data's anomalies</a>)", "bad")
    else:
        found = _state(validator)
    gate = s.component(ANOMALY_GATE)
    if gate is not None and gate.state == FAILED:
        gated = ("stopped the run: the data breaks its contract (see <a href='#anomalies'>anomalies</a>)", "bad")
    else:
        gated = _state(gate)
    drift = s.component(DRIFT_GATE)
    if drift is not None and drift.state == FAILED:
        drifted = ("stopped the run (see <a href='#drift'>drift</a>)", "bad")
    elif s.drift is not None:
        line = format_drift(s.drift).removeprefix("Drift: ")
        drifted = (_e(line), "bad" if line.startswith("ACCEPTED") else "good" if line.startswith("within") else "")
    else:
        drifted = _state(drift)
    return [
        ("validator", f"data checks: {EXAMPLE_VALIDATOR}", found),
        ("anomaly-gate", f"data checks: {ANOMALY_GATE}", gated),
        ("drift-gate", f"data checks: {DRIFT_GATE}", drifted),
    ]


def _state(component) -> tuple[str, str]:
    """A component's state in words, when nothing more specific is known."""
    if component is None:
        return "did not run", ""
    if component.state in PASSED:
        return f"passed ({_e(component.state)})", "good"
    return _e(component.state), "bad" if component.state == FAILED else ""


def _look_at(report: Report, failed: list[str], body: str) -> str:
    """Where to read first: each failed component's section (its row in the run's table when
    the run stopped before that section had anything to show), the error and its log."""
    said = []
    for node_id in failed:
        target = SECTION_OF.get(node_id, "run")
        if f"id='{target}'" not in body:
            target = "run"
        said.append(f"{_e(node_id)}: <a href='#{target}'>{_e(SECTION_TITLES[target])}</a>")
    if report.failure:
        said.append(f"the error: <code>{_e(report.failure)}</code>")
    if report.failure_log:
        said.append(f"its whole log: <code>{_e(report.failure_log)}</code>")
    if not failed and report.summary.blessed is False:
        said.append("why it was not blessed: <a href='#evaluation'>Evaluation</a>")
    return "; ".join(said)


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
        f"<section id='evaluation'><h2>Evaluation</h2>{_gate(report)}{against}"
        f"{_metrics_table(report)}{plotted}</section>"
    )


def _looks_at(report: Report) -> str:
    """Permutation importance per input column, and the slices where the model does worst."""
    found = report.importance
    title = "<section id='importance'><h2>What the model looks at</h2>"
    if found is None:
        if "importance" not in report.unavailable:
            return ""
        return f"{title}<p class='bad'>Not measured: {_e(report.unavailable['importance'])}</p></section>"
    metric = found.metric.upper() if len(found.metric) <= 4 else found.metric
    worse = "lower" if found.higher_is_better else "higher"
    said = (
        f"<p>{metric} of the model at <code>{_e(found.model_dir)}</code> on {found.rows} examples of the eval split: "
        f"<span data-importance='baseline'>{found.baseline:.4f}</span>. Each input column's values were shuffled "
        f"across those rows {found.repeats} times; the drop is how much {worse} {metric} got on average (a column "
        "the model ignores drops nothing), the spread its standard deviation over the shuffles.</p>"
    )
    widest = max((c.drop for c in found.columns), default=0.0) or 1.0
    rows = "".join(
        f"<tr data-column='{_e(c.column)}'><td>{_e(_column(report, c.column))}</td>"
        f"<td class='num'>{c.drop:+.4g}</td><td class='num'>{c.spread:.2g}</td>"
        f"<td><span class='bar' style='width:{max(0.0, c.drop) / widest * 200:.0f}px'></span></td></tr>"
        for c in found.columns
    )
    table = f"<table id='importance-table'><tr><th>column</th><th>drop</th><th>spread</th><th></th></tr>{rows}</table>"
    if found.slices:
        slices = "".join(
            f"<tr><td>{_e(_column(report, s.column))}</td><td>{_e(s.value)}</td><td class='num'>{s.rows}</td>"
            f"<td class='num'>{s.metric:.4f}</td></tr>"
            for s in found.slices
        )
        worst = (
            f"<h3>Where it does worst</h3><p>Groups of at least {MIN_SLICE_ROWS} of those rows by one column's value "
            f"(a number's by its quartiles), whose {metric} is furthest from {found.baseline:.4f}:</p>"
            f"<table id='worst-slices'><tr><th>column</th><th>value</th><th>rows</th><th>{metric}</th></tr>"
            f"{slices}</table>"
        )
    else:
        worst = f"<p>No group of at least {MIN_SLICE_ROWS} rows by one column's value does worse than the whole.</p>"
    return f"{title}{said}{table}{worst}</section>"


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
    """The metric over runs and the last runs' table (report/history.py)."""
    from report.history import champions

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
        bounds = _bounds(report, report.problem.blessing.metric)
        threshold = bounds.get(AT_LEAST, bounds.get(AT_MOST))
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
    """The whole page: the verdict first, then each stage in the order it ran, the
    configuration last (reference, not news)."""
    title = f"Run {report.summary.run_id}"
    body = "".join(
        (
            _run(report),
            _data(report),
            _transform(report),
            _training(report),
            _evaluation(report),
            _looks_at(report),
            _model(report),
            _history(report),
            _configuration(config or {}),
        )
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{_e(title)}</h1>{_verdict(report, body)}{body}</body></html>"
    )
