"""A short account of one pipeline run, read back from ML Metadata.

Works for any run recorded in MLMD (finished, cached or failed): each component's state
and duration, the Evaluator's metrics and verdict, where the model was pushed and where
TensorBoard logs are.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

_STATES = {
    metadata_store_pb2.Execution.NEW: "new",
    metadata_store_pb2.Execution.RUNNING: "running",
    metadata_store_pb2.Execution.COMPLETE: "complete",
    metadata_store_pb2.Execution.FAILED: "FAILED",
    metadata_store_pb2.Execution.CACHED: "cached",
    metadata_store_pb2.Execution.CANCELED: "canceled",
}
_OUTPUT_EVENTS = (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)


@dataclasses.dataclass
class ComponentRun:
    node_id: str
    state: str
    seconds: float
    # When ML Metadata recorded the execution's creation and last update (epoch seconds).
    started: float = 0.0
    finished: float = 0.0


@dataclasses.dataclass
class RunSummary:
    run_id: str
    components: list[ComponentRun]
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    blessed: bool | None = None
    had_baseline: bool = False
    # The champion's model the candidate was compared with (components/evaluator.py).
    baseline: str | None = None
    # Another pipeline's model named as the baseline, which the Evaluator ignored.
    ignored_baseline: str | None = None
    # The baseline was the candidate itself (a cached rerun): evaluated once (components/evaluator.py).
    baseline_is_candidate: bool = False
    # The Evaluator copied an identical earlier evaluation (same model, examples, config).
    evaluation_reused_from: str | None = None
    validation_failures: list[str] = dataclasses.field(default_factory=list)
    pushed_to: str | None = None
    tensorboard_dir: str | None = None
    anomalies_blessed: dict[str, bool] = dataclasses.field(default_factory=dict)
    # DriftGate's report (components/drift_gate.py): baseline, accepted, measurements.
    drift: dict | None = None
    # Every output artifact's URI, by "<component>.<output key>" (the run report reads them).
    outputs: dict[str, str] = dataclasses.field(default_factory=dict)
    # With data in spans: the span ingested and the window the Trainer learnt from ("13-16").
    span: int | None = None
    window: str | None = None
    # What the Trainer started from (models/warm_start.py's description), when it trained.
    warm_start: str | None = None
    # How much of the training data the model saw (models/budget.py's data_seen), when it trained.
    data_seen: str | None = None
    # Which model family trained and why (models/choice.py's description), when the Trainer chose.
    family: str | None = None

    def component(self, node_id: str) -> ComponentRun | None:
        return next((c for c in self.components if c.node_id == node_id), None)


def _latest_run(store: metadata_store.MetadataStore, pipeline_name: str) -> metadata_store_pb2.Context:
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:
        raise LookupError(f"No pipeline named {pipeline_name!r} in this metadata store")
    runs = [c for c in store.get_children_contexts_by_context(pipeline.id) if c.type == "pipeline_run"]
    if not runs:
        runs = store.get_contexts_by_type("pipeline_run")
    if not runs:
        raise LookupError(f"No runs of {pipeline_name!r} recorded yet")
    return max(runs, key=lambda c: (c.create_time_since_epoch, c.id))


def _outputs(store, execution_ids: list[int]) -> dict[int, list]:
    """execution id -> [(output key, artifact)]"""
    events = [e for e in store.get_events_by_execution_ids(execution_ids) if e.type in _OUTPUT_EVENTS]
    artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
    found: dict[int, list] = {}
    for event in events:
        key = event.path.steps[0].key if event.path.steps else ""
        found.setdefault(event.execution_id, []).append((key, artifacts[event.artifact_id]))
    return found


def read_evaluation(summary: RunSummary, evaluation_uri: str) -> None:
    """The candidate's overall metrics and any failed thresholds, from an evaluation artifact."""
    import tensorflow_model_analysis as tfma

    from models.evaluation import overall_metrics

    summary.metrics.update(overall_metrics(evaluation_uri))
    result = tfma.load_validation_result(evaluation_uri)
    for per_slice in result.metric_validations_per_slice:
        summary.validation_failures.extend(describe_failure(failure) for failure in per_slice.failures)


def describe_failure(failure: Any) -> str:
    """One TFMA validation failure as a person reads it: the metric, its value and the
    threshold it missed ("auc 0.8512, under its floor 0.9"; for a change threshold, the
    change against the champion and the change allowed)."""
    from tensorflow_model_analysis.proto import config_pb2

    name = failure.metric_key.name
    value = failure.metric_value.double_value.value if failure.metric_value.HasField("double_value") else None
    threshold = failure.metric_threshold
    if value is not None and threshold.HasField("value_threshold"):
        bounds = threshold.value_threshold
        if bounds.HasField("lower_bound") and value < bounds.lower_bound.value:
            return f"{name} {value:.4f}, under its floor {bounds.lower_bound.value:g}"
        if bounds.HasField("upper_bound") and value > bounds.upper_bound.value:
            return f"{name} {value:.4f}, over its ceiling {bounds.upper_bound.value:g}"
    if value is not None and threshold.HasField("change_threshold"):
        change = threshold.change_threshold
        higher_is_better = change.direction == config_pb2.MetricDirection.HIGHER_IS_BETTER
        kind, allowed = (
            ("change", change.absolute) if change.HasField("absolute") else ("relative change", change.relative)
        )
        side = "under" if higher_is_better else "over"
        return f"{name} {kind} {value:+.4f} against the champion, {side} the allowed {allowed.value:+g}"
    diff = " (change vs baseline)" if failure.metric_key.is_diff else ""
    return f"{name}{diff}: {failure.message or 'threshold not met'}"


def _plain(value: metadata_store_pb2.Value) -> Any:
    """An ML Metadata property as a plain value (a struct as a dict)."""
    kind = value.WhichOneof("value")
    if kind == "struct_value":
        return json_format.MessageToDict(value.struct_value)
    return getattr(value, kind) if kind else None


def record_output(
    summary: RunSummary,
    node_id: str,
    key: str,
    uri: str,
    properties: Mapping[str, Any],
    inputs_by_key: Mapping[str, set],
) -> None:
    """What one output artifact of a run tells the summary, from its URI and (custom)
    properties as plain values; ``inputs_by_key`` identifies the producer's input artifacts.
    Shared by ML Metadata runs and Vertex rehearsals."""
    from components.csv_example_gen import WINDOW_PROPERTY  # imports TFX: only when reading a run
    from components.evaluator import BASELINE_IS_CANDIDATE, BASELINE_URI, REUSED_FROM

    summary.outputs[f"{node_id}.{key}"] = uri
    if key == "blessing":
        summary.blessed = bool(properties["blessed"]) if "blessed" in properties else None
        summary.ignored_baseline = properties.get("ignored_baseline") or None
        summary.baseline = (properties.get(BASELINE_URI) or None) if not summary.ignored_baseline else None
        summary.had_baseline = bool(summary.baseline)
        summary.baseline_is_candidate = bool(properties.get(BASELINE_IS_CANDIDATE))
    elif key == "evaluation":
        read_evaluation(summary, uri)
        summary.evaluation_reused_from = properties.get(REUSED_FROM) or None
    elif key == "pushed_model" and properties.get("pushed"):
        summary.pushed_to = properties["pushed_destination"]
    elif key == "model_run" and node_id == "Trainer":
        from models.budget import data_seen
        from models.trainer import read_training_record

        record = read_training_record(uri)
        # Trees write no TensorBoard logs: no epochs to plot (models/trees.py).
        summary.tensorboard_dir = None if record.get("family") == "trees" else uri
        summary.warm_start = _warm_start(record)
        summary.data_seen = data_seen(record)
        summary.family = _family(record)
    elif key == "examples" and WINDOW_PROPERTY in properties:
        # The window ends with the span ingested ("13-16", "2, 4-5"): on Vertex the driver's
        # span reaches the executor's output as a custom property, locally as a property.
        summary.window = properties[WINDOW_PROPERTY]
        summary.span = int(summary.window.replace(",", "-").split("-")[-1])
    elif key == "drift_report" and properties.get("drift_report"):
        summary.drift = json.loads(properties["drift_report"])
    elif key == "anomalies" and "blessed" in properties:
        summary.anomalies_blessed = {split: bool(v) for split, v in properties["blessed"].items()}


def _family(training_record: dict) -> str | None:
    """The Trainer's choice of family, said in a line (None when the spec named the family)."""
    from models.choice import Choice

    record = training_record.get("choice")
    return None if record is None else Choice.from_record(record).describe()


def _warm_start(training_record: dict) -> str | None:
    """The Trainer's record of what it started from (None when it did not record one)."""
    from models.warm_start import WarmStart

    record = training_record.get("warm_start")
    return None if record is None else WarmStart.from_record(record).describe()


def summarize_run(
    connection_config: metadata_store_pb2.ConnectionConfig, pipeline_name: str, run_id: str | None = None
) -> RunSummary:
    """Reads one run (the latest by default) back from ML Metadata."""
    store = metadata_store.MetadataStore(connection_config)
    run = store.get_context_by_type_and_name("pipeline_run", run_id) if run_id else _latest_run(store, pipeline_name)
    if run is None:
        raise LookupError(f"No run {run_id!r} in this metadata store")
    executions = sorted(store.get_executions_by_context(run.id), key=lambda e: (e.create_time_since_epoch, e.id))
    prefix = f"{pipeline_name}."
    summary = RunSummary(run_id=run.name, components=[])
    node_of: dict[int, str] = {}
    for execution in executions:
        nodes = [c.name for c in store.get_contexts_by_execution(execution.id) if c.type == "node"]
        node_id = nodes[0][len(prefix) :] if nodes and nodes[0].startswith(prefix) else (nodes or ["?"])[0]
        node_of[execution.id] = node_id
        started, finished = execution.create_time_since_epoch / 1000, execution.last_update_time_since_epoch / 1000
        state = _STATES.get(execution.last_known_state, "unknown")
        summary.components.append(ComponentRun(node_id, state, max(0.0, finished - started), started, finished))

    inputs = [e for e in store.get_events_by_execution_ids(list(node_of)) if e.type == metadata_store_pb2.Event.INPUT]
    for execution_id, outputs in _outputs(store, list(node_of)).items():
        # One event can carry several input keys (the baseline may be the candidate itself).
        inputs_by_key: dict[str, set] = {}
        for event in inputs:
            if event.execution_id == execution_id:
                for step in event.path.steps:
                    if step.HasField("key"):
                        inputs_by_key.setdefault(step.key, set()).add(event.artifact_id)
        for key, artifact in outputs:
            props = {k: _plain(v) for k, v in artifact.custom_properties.items()}
            record_output(summary, node_of[execution_id], key, artifact.uri, props, inputs_by_key)
    return summary


def format_drift(drift: dict) -> str:
    """One line: whether drift and skew were checked, against what, and what was accepted."""
    against = [
        name for key, name in (("baseline", "the champion's data"), ("serving", "the serving data")) if drift.get(key)
    ]
    if not against:
        return "Drift: not checked (no champion with kept statistics yet, or no thresholds in the contract)"
    breaches = [d for d in drift["drift"] if d["breached"]]
    if drift.get("accepted"):
        shown = "; ".join(
            f"[{d['split']}] {d['feature']} {d['measure']} {d['value']:.4f} > {d['threshold']:g}" for d in breaches
        )
        return f"Drift: ACCEPTED with --accept-drift: {shown}"
    if not drift["drift"]:
        return f"Drift: nothing to compare with {' and '.join(against)} (no split or threshold in common)"
    top = max(drift["drift"], key=lambda d: d["value"] / d["threshold"] if d["threshold"] else 0.0)
    return (
        f"Drift: within the contract against {' and '.join(against)} (closest: [{top['split']}] "
        f"{top['feature']} {top['measure']} {top['value']:.4f} of {top['threshold']:g})"
    )


NO_CONTRACT = "none: the schema was inferred from the data itself (--infer-schema), which catches little"


def format_summary(summary: RunSummary, blessing=None, contract: str | None = None) -> str:
    """A plain-text table and verdict for the terminal; ``blessing`` (``problem.Blessing``)
    names the metric and threshold a blessed model cleared; ``contract``, the data contract
    the data was checked against (``NO_CONTRACT`` when none was)."""
    lines = _components_table(summary)
    if summary.metrics:
        shown = ", ".join(
            f"{k} {v:.4f}" if k != "example_count" else f"{k} {int(v)}" for k, v in sorted(summary.metrics.items())
        )
        lines.append(f"Eval metrics: {shown}")
    if contract is not None:
        lines.append(f"Data contract: {contract}")
    if summary.span is not None:
        lines.append(f"Data: span {summary.span}; the Trainer learnt from spans {summary.window}")
    if summary.family:
        lines.append(f"Family: {summary.family}")
    if summary.warm_start:
        lines.append(f"Training: {summary.warm_start}")
    if summary.data_seen:
        lines.append(f"Data seen: {summary.data_seen}")
    if summary.drift is not None:
        lines.append(format_drift(summary.drift))
    lines.append(_model_verdict(summary, blessing))
    if summary.pushed_to:
        lines.append(f"Pushed to: {summary.pushed_to}")
    elif summary.blessed is not None:
        lines.append("Pushed to: nothing pushed (the model was not blessed)")
    if summary.tensorboard_dir:
        lines.append(f"TensorBoard: tensorboard --logdir {summary.tensorboard_dir}")
    return "\n".join(lines)


def _components_table(summary: RunSummary) -> list[str]:
    """The run's heading, then each component's status and seconds, and the total."""
    width = max([len(c.node_id) for c in summary.components] + [9])
    lines = [f"Run {summary.run_id}", f"  {'component':<{width}}  {'status':<9}  {'seconds':>8}"]
    for c in summary.components:
        lines.append(f"  {c.node_id:<{width}}  {c.state:<9}  {c.seconds:>8.1f}")
    lines.append(f"  {'total':<{width}}  {'':<9}  {sum(c.seconds for c in summary.components):>8.1f}")
    return lines


def _model_verdict(summary: RunSummary, blessing) -> str:
    """The ``Model:`` line: not evaluated, NOT blessed and why, or BLESSED with the metric,
    the threshold it cleared and what it was compared with."""
    if summary.blessed is None:
        return "Model: not evaluated in this run"
    if not summary.blessed:
        return "Model: NOT blessed: " + ("; ".join(summary.validation_failures) or "thresholds not met")
    metric = blessing.metric if blessing is not None else "auc"
    if blessing is None:
        floor = ""
    elif metric in ("rmse", "mae"):
        floor = f" <= ceiling {blessing.threshold:g}"
    else:
        floor = f" >= floor {blessing.threshold:g}"
    value = summary.metrics.get(metric, float("nan"))
    return f"Model: BLESSED: {metric.upper() if len(metric) <= 4 else metric} {value:.4f}{floor} {_baseline(summary)}"


def _baseline(summary: RunSummary) -> str:
    """What a blessed model was compared with."""
    if summary.baseline_is_candidate:
        if summary.evaluation_reused_from:
            return (
                "(the champion itself, reused from the cache: its evaluation too, "
                f"from {summary.evaluation_reused_from})"
            )
        return "(the champion itself, reused from the cache: evaluated once)"
    if summary.had_baseline:
        return "and no worse than the champion"
    if summary.ignored_baseline:
        return f"(no baseline of this pipeline: another pipeline's model was ignored, {summary.ignored_baseline})"
    return "(first blessed model: no baseline to compare against)"
