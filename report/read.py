"""What the run report shows, read from one run's artifacts (their URIs come from the run
summary: ML Metadata for local runs, the rehearsal's store for Vertex rehearsals)."""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import re
import time
from collections.abc import Sequence
from typing import Any

from report.run_summary import RunSummary

STATISTICS = "StatisticsGen.statistics"
ANOMALIES = "ExampleValidator.anomalies"
TRANSFORM_GRAPH = "Transform.transform_graph"
MODEL_RUN = "Trainer.model_run"
TRAINER_MODEL = "Trainer.model"
EVALUATION = "Evaluator.evaluation"
# ExampleGen's output ("CsvExampleGen.examples"): raw tf.Examples, one folder per split,
# named as TFX names them ("Split-<name>"; the pipeline's eval split is pipeline.pipeline.EVAL_SPLIT).
EXAMPLES = "ExampleGen.examples"
EVAL_SPLIT_DIR = "Split-eval"
# The residual plots read at most this many examples of the eval split.
RESIDUAL_ROWS = 2000
# TFMA's class id for "no class's probability was over the threshold"
# (tfma.metrics.NO_PREDICTED_CLASS_ID, without importing TFMA for a constant).
NO_PREDICTED_CLASS_ID = -1
# Metric names as a sentence writes them; any other name reads with spaces for underscores.
METRIC_WORDS = {"auc": "AUC", "rmse": "RMSE", "mae": "MAE"}


def describe_metric(name: str) -> str:
    """A metric's Keras/TFMA name in words: "auc" -> "AUC", "val_accuracy" -> "validation
    accuracy", "binary_accuracy" -> "binary accuracy"."""
    if name.startswith("val_"):
        return "validation " + describe_metric(name[len("val_") :])
    return METRIC_WORDS.get(name, name.replace("_", " "))


@dataclasses.dataclass
class Column:
    """One column of one split, as the report shows it."""

    name: str
    kind: str  # "number" or "text"
    rows: int
    missing: float  # share of rows without a value
    # Numbers: TFDV's quantile buckets (low, high, count); text: (value, count), most frequent
    # first. (TFDV's equal-width histograms span each split's own extremes: two splits'
    # buckets would not line up; see components/drift.py.)
    quantiles: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)
    top_values: list[tuple[str, float]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class SliceMetrics:
    """The Evaluator's metrics for one slice ("Overall", or "<column> = <value>")."""

    name: str
    metrics: dict[str, float]


@dataclasses.dataclass
class Signature:
    name: str
    inputs: dict[str, str]  # name -> "dtype shape"
    outputs: dict[str, str]


@dataclasses.dataclass
class ClassConfusion:
    """A multi-class model's confusion matrix on the eval split (overall): ``counts[i][j]``
    examples of class ``actual[i]`` were predicted as ``predicted[j]``. The classes are the
    problem's ``label.classes`` in class-id order (the label's index, and the position in
    the model's probabilities); ``predicted`` ends with "no prediction" when TFMA counted
    examples whose top probability was not over the threshold."""

    actual: list[str]
    predicted: list[str]
    counts: list[list[float]]
    threshold: float = 0.0

    @property
    def total(self) -> float:
        return sum(map(sum, self.counts))

    def precision(self, index: int) -> float:
        """Of the examples predicted as class ``index``, the share that are it (NaN if none)."""
        predicted = sum(row[index] for row in self.counts)
        return self.counts[index][index] / predicted if predicted else math.nan

    def recall(self, index: int) -> float:
        """Of the examples of class ``index``, the share predicted as it (NaN if none)."""
        actual = sum(self.counts[index])
        return self.counts[index][index] / actual if actual else math.nan


@dataclasses.dataclass
class Residuals:
    """A regression model's predictions against the actual values, example by example, on
    (the first ``rows_read`` examples of) the eval split."""

    label: str
    actual: list[float]
    predicted: list[float]
    rows_read: int
    # True when the split holds more examples than were read.
    capped: bool
    model_dir: str
    seconds: float = 0.0

    @property
    def residuals(self) -> list[float]:
        """Actual minus predicted, per example."""
        return [a - p for a, p in zip(self.actual, self.predicted, strict=True)]

    @property
    def rmse(self) -> float:
        values = self.residuals
        return math.sqrt(sum(r * r for r in values) / len(values)) if values else math.nan

    @property
    def mean(self) -> float:
        values = self.residuals
        return sum(values) / len(values) if values else math.nan


def data_columns(statistics_uri: str) -> dict[str, list[Column]]:
    """Per split, every column with its type, missing share and distribution."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    from components.anomaly_gate import missing_share
    from components.drift import read_statistics_dir

    quantile_type = statistics_pb2.Histogram.QUANTILES
    found = {}
    for split, statistics in read_statistics_dir(statistics_uri).items():
        dataset = statistics.datasets[0]
        columns = []
        for feature in dataset.features:
            name = ".".join(feature.path.step) or feature.name
            rows = dataset.num_examples
            if feature.HasField("num_stats"):
                stats = feature.num_stats
                histogram = next((h for h in stats.histograms if h.type == quantile_type), None)
                buckets = [(b.low_value, b.high_value, b.sample_count) for b in histogram.buckets] if histogram else []
                column = Column(name, "number", rows, missing_share(feature, rows), quantiles=buckets)
            else:
                stats = feature.string_stats
                top = [(v.value, v.frequency) for v in stats.top_values]
                column = Column(name, "text", rows, missing_share(feature, rows), top_values=top)
            columns.append(column)
        found[split] = sorted(columns, key=lambda c: c.name)
    return found


def anomaly_lines(anomalies_uri: str) -> list[str]:
    """ExampleValidator's anomalies, one line each, as AnomalyGate prints them."""
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    from components.anomaly_gate import ANOMALIES_FILE, describe_anomalies
    from components.drift import read_splits

    return describe_anomalies(read_splits(anomalies_uri, ANOMALIES_FILE, anomalies_pb2.Anomalies))


def vocabularies(transform_graph_uri: str) -> dict[str, int]:
    """Each vocabulary Transform computed, and its size (its asset file's lines)."""
    sizes = {}
    for path in sorted(glob.glob(os.path.join(transform_graph_uri, "transform_fn", "assets", "*"))):
        with open(path, "rb") as f:
            sizes[os.path.basename(path)] = sum(1 for _ in f)
    return sizes


def bucket_boundaries(transform_graph_uri: str, problem) -> dict[str, list[float]]:
    """The quantile boundaries Transform computed for each bucketized column of ``problem``.

    TFT's API does not expose an analyzer's result; the graph holds it as a constant. One
    quantiles analyzer computes every bucketized column's boundaries at once
    (``models.preprocessing.quantile_buckets``), so they are the one float constant shaped
    (columns, buckets - 1), its rows in the spec's ``features.bucketized`` order."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    bucketized, num_buckets = problem.features.bucketized, problem.features.num_buckets
    if not bucketized:
        return {}
    with open(os.path.join(transform_graph_uri, "transform_fn", "saved_model.pb"), "rb") as f:
        graph = saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0].graph_def
    shape = (len(bucketized), num_buckets - 1)
    nodes = [*graph.node, *(node for function in graph.library.function for node in function.node_def)]
    found = [
        value
        for node in nodes
        if node.op == "Const" and node.attr["dtype"].type in (tf.float32.as_datatype_enum, tf.float64.as_datatype_enum)
        for value in [tf.make_ndarray(node.attr["value"].tensor)]
        if value.shape == shape
    ]
    if len(found) != 1:
        return {}  # preprocessing changed: nothing shown rather than the wrong numbers
    return {name: [float(b) for b in row] for name, row in zip(bucketized, found[0], strict=True)}


def training_curves(model_run_uri: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """metric -> {"train"/"validation": [(epoch, value)]}, from the TensorBoard event files
    Keras wrote (``epoch_<metric>`` scalars)."""
    import tensorflow as tf

    curves: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for phase in ("train", "validation"):
        for path in sorted(glob.glob(os.path.join(model_run_uri, phase, "events.out.tfevents.*"))):
            for event in tf.compat.v1.train.summary_iterator(path):
                for value in event.summary.value:
                    if not value.tag.startswith("epoch_"):
                        continue
                    number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else value.simple_value
                    curves.setdefault(value.tag[len("epoch_") :], {}).setdefault(phase, []).append(
                        (int(event.step), number)
                    )
    return {
        metric: {phase: sorted(points) for phase, points in by_phase.items()} for metric, by_phase in curves.items()
    }


def training_record(model_run_uri: str) -> dict:
    """The strategy, replicas, batch and epochs the Trainer ran with (its run_fn records them)."""
    from models.trainer import read_training_record

    return read_training_record(model_run_uri)


def _slice_name(slice_key) -> str:
    return " & ".join(f"{k} = {v.decode() if isinstance(v, bytes) else v}" for k, v in slice_key) or "Overall"


def evaluation_slices(evaluation_uri: str) -> list[SliceMetrics]:
    """The candidate's metrics per slice the Evaluator was configured with, overall first."""
    import tensorflow_model_analysis as tfma

    found = []
    for slice_metrics in tfma.load_metrics(evaluation_uri):
        key = tfma.slicer.deserialize_slice_key(slice_metrics.slice_key)
        values = {
            item.key.name: item.value.double_value.value
            for item in slice_metrics.metric_keys_and_values
            if not item.key.is_diff and item.key.model_name in ("", "candidate") and item.value.HasField("double_value")
        }
        found.append(SliceMetrics(_slice_name(key), values))
    return sorted(found, key=_slice_order)


def _slice_order(slice_: SliceMetrics) -> tuple:
    """Overall first, then by feature, values in numeric order where they are numbers."""
    if slice_.name == "Overall":
        return (0, "", 0.0, "")
    feature, _, value = slice_.name.partition(" = ")
    try:
        return (1, feature, float(value), "")
    except ValueError:
        return (1, feature, float("inf"), value)


def baseline_comparison(evaluation_uri: str) -> dict[str, dict[str, float]]:
    """Overall: metric -> {"baseline": value, "change": candidate minus baseline}, when the
    Evaluator compared the candidate with a blessed baseline (else empty)."""
    import tensorflow_model_analysis as tfma

    found: dict[str, dict[str, float]] = {}
    for slice_metrics in tfma.load_metrics(evaluation_uri):
        if slice_metrics.slice_key.single_slice_keys:
            continue
        for item in slice_metrics.metric_keys_and_values:
            if not item.value.HasField("double_value"):
                continue
            if item.key.is_diff:
                found.setdefault(item.key.name, {})["change"] = item.value.double_value.value
            elif item.key.model_name == "baseline":
                found.setdefault(item.key.name, {})["baseline"] = item.value.double_value.value
    return found


def evaluation_plots(evaluation_uri: str, classes: Sequence[str] = ()) -> dict[str, Any]:
    """The overall slice's plots as TFMA computed them: for a binary model, the ROC points
    (false and true positive rates over thresholds), the calibration buckets and the
    confusion matrix at the 0.5 threshold; for a multi-class one, the confusion matrix
    between the classes ("classes": a ``ClassConfusion``, named by ``classes``)."""
    import tensorflow_model_analysis as tfma

    plots: dict[str, Any] = {}
    for plot in tfma.load_plots(evaluation_uri):
        if plot.slice_key.single_slice_keys:
            continue
        for item in plot.plot_keys_and_values:
            if item.key.model_name not in ("", "candidate"):
                continue
            value = item.value
            if value.HasField("confusion_matrix_at_thresholds"):
                matrices = value.confusion_matrix_at_thresholds.matrices
                plots["roc"] = [(m.false_positive_rate, m.recall) for m in matrices]
                middle = min(matrices, key=lambda m: abs(m.threshold - 0.5))
                plots["confusion"] = {
                    "threshold": middle.threshold,
                    "tp": middle.true_positives,
                    "fp": middle.false_positives,
                    "tn": middle.true_negatives,
                    "fn": middle.false_negatives,
                }
            if value.HasField("calibration_histogram_buckets"):
                # (mean prediction, share of positives, examples) per non-empty bucket.
                plots["calibration"] = [
                    (
                        b.total_weighted_refined_prediction.value / b.num_weighted_examples.value,
                        b.total_weighted_label.value / b.num_weighted_examples.value,
                        b.num_weighted_examples.value,
                    )
                    for b in value.calibration_histogram_buckets.buckets
                    if b.num_weighted_examples.value > 0
                ]
            if value.HasField("multi_class_confusion_matrix_at_thresholds"):
                matrices = value.multi_class_confusion_matrix_at_thresholds.matrices
                if matrices:
                    plots["classes"] = class_confusion(min(matrices, key=lambda m: abs(m.threshold)), classes)
    return plots


def class_confusion(matrix, classes: Sequence[str]) -> ClassConfusion:
    """One of TFMA's ``MultiClassConfusionMatrixAtThresholds.matrices`` as a table.

    TFMA keys its entries by class id: the label's integer value and the index of the
    largest probability (``MultiClassConfusionMatrixPlot``; the plot's default threshold,
    0.0, gives every example its top class). Both are positions in ``label.classes``
    (``preprocessing.label``, ``signatures``), so id ``i`` is ``classes[i]``. An id the
    spec does not list (none should reach the Evaluator) is shown as "class <id>"."""
    entries = list(matrix.entries)
    ids = sorted(
        set(range(len(classes)))
        | {e.actual_class_id for e in entries}
        | {e.predicted_class_id for e in entries if e.predicted_class_id != NO_PREDICTED_CLASS_ID}
    )

    def name(class_id: int) -> str:
        return classes[class_id] if 0 <= class_id < len(classes) else f"class {class_id}"

    columns = list(ids)
    if any(e.predicted_class_id == NO_PREDICTED_CLASS_ID for e in entries):
        columns.append(NO_PREDICTED_CLASS_ID)
    counts = [[0.0] * len(columns) for _ in ids]
    for entry in entries:
        row, column = ids.index(entry.actual_class_id), columns.index(entry.predicted_class_id)
        counts[row][column] += entry.num_weighted_examples
    return ClassConfusion(
        actual=[name(i) for i in ids],
        predicted=[name(i) if i != NO_PREDICTED_CLASS_ID else "no prediction" for i in columns],
        counts=counts,
        threshold=matrix.threshold,
    )


def metric_name(metric) -> str:
    """The name TFMA reports a ``MetricConfig``'s value under: the ``name`` in its config,
    else its class's default (TFMA's snake case of the class name: AUC -> auc)."""
    config = metric.config.strip()
    if config:
        settings = json.loads(config if config.startswith("{") else "{" + config + "}")
        if isinstance(settings, dict) and settings.get("name"):
            return str(settings["name"])
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", metric.class_name).lower()


# A threshold's side: a floor, a ceiling, or the change allowed against the baseline model.
AT_LEAST, AT_MOST, CHANGE = "at least", "at most", "change"


@dataclasses.dataclass(frozen=True)
class Threshold:
    """One of the blessing's thresholds: ``metric`` (under its reported name) ``side``
    ``value``; for ``CHANGE``, no worse than the baseline model's by more than ``value``
    (``relative``: a share of its value)."""

    metric: str
    side: str
    value: float
    relative: bool = False

    def words(self) -> str:
        """In words: "AUC at least 0.9", "RMSE no worse than the baseline model's by more than 5"."""
        name = describe_metric(self.metric)
        if self.side == CHANGE:
            allowed = f"{self.value:.4g}" + (" of its value" if self.relative else "")
            return f"{name} no worse than the baseline model's by more than {allowed}"
        return f"{name} {self.side} {self.value:g}"


def read_thresholds(evaluation_uri: str) -> list[Threshold]:
    """The blessing's thresholds, from the evaluation's own configuration (what the run was
    judged by, whatever flags it ran with): each gated metric under its reported name."""
    import tensorflow_model_analysis as tfma

    from models import batched_metrics

    config = tfma.load_eval_result(evaluation_uri).config
    found = []
    for spec in config.metrics_specs:
        for metric in spec.metrics:
            if batched_metrics.is_batched(metric):  # named as TFMA names it (AUC, not BatchedAUC)
                metric = batched_metrics.tfma_metric_config(metric)
            name = metric_name(metric)
            given = [metric.threshold] if metric.HasField("threshold") else []
            given += [t.threshold for t in metric.per_slice_thresholds]
            for threshold in given:
                if threshold.HasField("value_threshold"):
                    bounds = threshold.value_threshold
                    if bounds.HasField("lower_bound"):
                        found.append(Threshold(name, AT_LEAST, bounds.lower_bound.value))
                    if bounds.HasField("upper_bound"):
                        found.append(Threshold(name, AT_MOST, bounds.upper_bound.value))
                if threshold.HasField("change_threshold"):
                    change = threshold.change_threshold
                    if change.HasField("absolute"):
                        found.append(Threshold(name, CHANGE, abs(change.absolute.value)))
                    elif change.HasField("relative"):
                        found.append(Threshold(name, CHANGE, abs(change.relative.value), relative=True))
    return found


def thresholds(evaluation_uri: str) -> list[str]:
    """The blessing's thresholds in words ("AUC at least 0.9", "RMSE at most 450")."""
    return [threshold.words() for threshold in read_thresholds(evaluation_uri)]


def bounds_by_metric(found: Sequence[Threshold]) -> dict[str, dict[str, float]]:
    """metric -> {side: value}: its floor, ceiling and the absolute change allowed."""
    bounds: dict[str, dict[str, float]] = {}
    for threshold in found:
        if not threshold.relative:
            bounds.setdefault(threshold.metric, {})[threshold.side] = threshold.value
    return bounds


def signatures(saved_model_dir: str) -> list[Signature]:
    """The pushed model's signatures, read from saved_model.pb without loading the model."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import saved_model_pb2

    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        model = saved_model_pb2.SavedModel.FromString(f.read())

    def described(tensors) -> dict[str, str]:
        out = {}
        for name, info in sorted(tensors.items()):
            dims = [d.size for d in info.tensor_shape.dim]
            shape = "[" + ", ".join("?" if d < 0 else str(d) for d in dims) + "]"
            out[name] = f"{types_pb2.DataType.Name(info.dtype)[3:].lower()} {shape}"
        return out

    found = []
    for name, signature in sorted(model.meta_graphs[0].signature_def.items()):
        if name.startswith("__"):
            continue  # TensorFlow's own (__saved_model_init_op)
        found.append(Signature(name, described(signature.inputs), described(signature.outputs)))
    return found


def model_dir(summary: RunSummary) -> str | None:
    """The run's serving model: the pushed SavedModel, else the Trainer's model (its
    Format-Serving folder: the candidate the Evaluator judged), else None."""
    import tensorflow as tf
    from tfx.utils import path_utils

    if summary.pushed_to and tf.io.gfile.exists(os.path.join(summary.pushed_to, "saved_model.pb")):
        return summary.pushed_to
    if TRAINER_MODEL in summary.outputs:
        serving = path_utils.serving_model_path(summary.outputs[TRAINER_MODEL])
        if tf.io.gfile.exists(os.path.join(serving, "saved_model.pb")):
            return serving
    return None


def eval_examples(summary: RunSummary, limit: int):
    """The run's serving model, the first ``limit`` raw examples of the eval split (the
    examples the Evaluator scored, serialized) and whether there were more; raises
    ``LookupError`` naming what the run lacks."""
    import tensorflow as tf

    examples = next((uri for key, uri in sorted(summary.outputs.items()) if key.endswith(EXAMPLES)), None)
    if examples is None:
        raise LookupError("the run has no ExampleGen examples to predict")
    files = sorted(tf.io.gfile.glob(os.path.join(examples, EVAL_SPLIT_DIR, "*")))
    if not files:
        raise LookupError(f"no eval split under {examples} (no {EVAL_SPLIT_DIR} folder or no file in it)")
    saved_model = model_dir(summary)
    if saved_model is None:
        raise LookupError("the run has no serving model (nothing pushed, and no Trainer model with saved_model.pb)")
    compression = "GZIP" if all(f.endswith(".gz") for f in files) else ""
    batch = tf.data.TFRecordDataset(files, compression_type=compression).take(limit + 1).batch(limit + 1)
    serialized = next(iter(batch), None)
    if serialized is None or not len(serialized):
        raise LookupError(f"the eval split under {examples} holds no examples")
    return saved_model, serialized[:limit], len(serialized) > limit


def importance(summary: RunSummary, problem):
    """What the model looks at (``report.importance``), on the first
    ``IMPORTANCE_ROWS`` examples of the eval split."""
    from report.importance import IMPORTANCE_ROWS, permutation_importance

    saved_model, serialized, _ = eval_examples(summary, IMPORTANCE_ROWS)
    return permutation_importance(saved_model, serialized.numpy().tolist(), problem)


def residuals(summary: RunSummary, problem, limit: int = RESIDUAL_ROWS) -> Residuals:
    """A regression model's prediction against the actual value for each of the first
    ``limit`` examples of the eval split; raises ``LookupError`` naming what the run lacks.

    Why this source: TFMA computes no residuals. Its regression metrics (rmse, mae, the mean
    label and prediction) are one number per slice; its plots are classification plots (the
    calibration plot's buckets span a prediction range fixed when the pipeline is built and
    hold only means); and the Evaluator keeps no per-example predictions. So the report
    reads the raw tf.Examples ExampleGen wrote for the eval split (the examples the
    Evaluator scored) and asks the run's model the two questions the Evaluator asked it:
    its ``label`` signature for the actual value and ``serving_default`` for the prediction
    (``pipeline.pipeline.eval_config``). At most ``limit`` examples in one batch: on small
    data well under two seconds, most of it loading the SavedModel."""
    import tensorflow as tf

    from models import signatures

    started = time.monotonic()
    saved_model, serialized, capped = eval_examples(summary, limit)
    model = tf.saved_model.load(saved_model)
    actual = model.signatures[signatures.LABEL_SIGNATURE](examples=serialized)[problem.label_key]
    predicted = model.signatures[signatures.SERVING_SIGNATURE](examples=serialized)[signatures.prediction_key(problem)]
    actual, predicted = (tf.reshape(tf.cast(t, tf.float64), [-1]).numpy().tolist() for t in (actual, predicted))
    if len(actual) != len(serialized) or len(predicted) != len(serialized):
        raise ValueError(
            f"{len(serialized)} examples gave {len(actual)} labels and {len(predicted)} predictions: "
            "not one value per example"
        )
    return Residuals(
        label=problem.label.name,
        actual=actual,
        predicted=predicted,
        rows_read=len(serialized),
        capped=capped,
        model_dir=saved_model,
        seconds=time.monotonic() - started,
    )


def _reason(err: Exception) -> str:
    """Why a reader failed, in one line: a ``LookupError``'s message (what the run lacks), or
    the error's type and message without TensorFlow's op decorations."""
    if isinstance(err, LookupError):
        return str(err)
    text = getattr(err, "message", None) or str(err)
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:\w+\].*$", "", text, flags=re.DOTALL)
    return f"{type(err).__name__}: {text.strip()}"


@dataclasses.dataclass
class Report:
    """Everything the report shows for one run."""

    summary: RunSummary
    # The problem the run solved (``models.problem.Problem``): its task, label and blessing
    # metric word the page; None for a report put together without one.
    problem: Any = None
    columns: dict[str, list[Column]] = dataclasses.field(default_factory=dict)
    anomalies: list[str] | None = None
    vocabularies: dict[str, int] = dataclasses.field(default_factory=dict)
    boundaries: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    curves: dict = dataclasses.field(default_factory=dict)
    training: dict = dataclasses.field(default_factory=dict)
    slices: list[SliceMetrics] = dataclasses.field(default_factory=list)
    baseline: dict = dataclasses.field(default_factory=dict)
    plots: dict = dataclasses.field(default_factory=dict)
    thresholds: list[str] = dataclasses.field(default_factory=list)
    # The same thresholds by metric: {"auc": {"at least": 0.9, "change": 0.002}} (``bounds_by_metric``).
    bounds: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    signatures: list[Signature] = dataclasses.field(default_factory=list)
    residuals: Residuals | None = None
    # What the model looks at (``report.importance.Importance``).
    importance: Any = None
    # What could not be read, and why: plot name -> reason (the page says it in their place).
    unavailable: dict[str, str] = dataclasses.field(default_factory=dict)
    # The pipeline's runs up to this one (``report.history.Entry``, oldest first).
    history: list = dataclasses.field(default_factory=list)
    # Why the run stopped, when it failed (``runs.failures.describe``), and where its
    # whole log or traceback is kept: the verdict points there.
    failure: str | None = None
    failure_log: str | None = None


def read_report(summary: RunSummary, problem) -> Report:
    """Reads every artifact the run produced (a stopped run: what it got to), for
    ``problem`` (``models.problem.Problem``: the task, which columns were bucketized, the
    class names, the label)."""
    from models.problem import Task

    out = summary.outputs
    report = Report(summary, problem=problem)
    if STATISTICS in out:
        report.columns = data_columns(out[STATISTICS])
    if ANOMALIES in out:
        report.anomalies = anomaly_lines(out[ANOMALIES])
    if TRANSFORM_GRAPH in out:
        report.vocabularies = vocabularies(out[TRANSFORM_GRAPH])
        report.boundaries = bucket_boundaries(out[TRANSFORM_GRAPH], problem)
    if MODEL_RUN in out:
        report.curves = training_curves(out[MODEL_RUN])
        report.training = training_record(out[MODEL_RUN])
    if EVALUATION in out:
        report.slices = evaluation_slices(out[EVALUATION])
        report.plots = evaluation_plots(out[EVALUATION], problem.label.classes)
        report.baseline = baseline_comparison(out[EVALUATION])
        found = read_thresholds(out[EVALUATION])
        report.thresholds = [threshold.words() for threshold in found]
        report.bounds = bounds_by_metric(found)
        if problem.task == Task.REGRESSION:
            try:
                report.residuals = residuals(summary, problem)
            except Exception as err:  # noqa: BLE001 - a plot the report cannot draw must not stop the report
                report.unavailable["residuals"] = _reason(err)
        try:
            report.importance = importance(summary, problem)
        except Exception as err:  # noqa: BLE001 - as the residuals
            report.unavailable["importance"] = _reason(err)
    if summary.pushed_to and os.path.exists(os.path.join(summary.pushed_to, "saved_model.pb")):
        report.signatures = signatures(summary.pushed_to)
    return report
