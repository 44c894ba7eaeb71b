"""AnomalyGate, the project's own component: stops the run when the data breaks its contract.

It passes the schema on only when ExampleValidator found no anomalies, no column misses more
values than the contract tolerates (``MISSING_TAG``) and the label can be learned from
(``LABEL_BALANCE_TAG``); Transform and the Trainer read the schema from it (docs/pipeline.md).
"""

# No `from __future__ import annotations`: TFX reads the component's type hints at runtime.
import os
import re

from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import io_utils

from components.drift import read_splits, read_statistics_dir

ANOMALIES_FILE = "SchemaDiff.pb"
SCHEMA_FILE = "schema.pbtxt"
# A column's missing-value tolerance in the contract: `annotation { tag: "max_missing_fraction=0.3" }`.
# TFDV's schema has no field for it: an empty CSV cell is a feature present with no value, so
# `presence` never sees it, and `value_count` or `shape` can only forbid it outright.
MISSING_TAG = "max_missing_fraction="
# The label's minimum class share, schema-level: `annotation { tag: "min_label_class_fraction=0.01" }`.
LABEL_BALANCE_TAG = "min_label_class_fraction="


class DataAnomaliesError(RuntimeError):
    """The data does not match the schema; the message lists every anomaly."""


def read_anomalies(anomalies: standard_artifacts.ExampleAnomalies) -> dict[str, anomalies_pb2.Anomalies]:
    """Loads the anomalies proto ExampleValidator wrote for each split."""
    return read_splits(anomalies.uri, ANOMALIES_FILE, anomalies_pb2.Anomalies)


def describe_anomalies(anomalies_by_split: dict[str, anomalies_pb2.Anomalies]) -> list[str]:
    """One line per anomaly: split, feature, what is wrong."""
    lines = []
    for split, anomalies in sorted(anomalies_by_split.items()):
        for feature, info in sorted(anomalies.anomaly_info.items()):
            reasons = "; ".join(r.description or r.short_description for r in info.reason)
            lines.append(f"[{split}] feature '{feature}': {info.short_description or 'anomaly'}: {reasons}")
        if anomalies.HasField("dataset_anomaly_info"):
            info = anomalies.dataset_anomaly_info
            reasons = "; ".join(r.description or r.short_description for r in info.reason)
            lines.append(f"[{split}] whole dataset: {info.short_description or 'anomaly'}: {reasons}")
    return lines


def _tagged(annotation: schema_pb2.Annotation, prefix: str, where: str) -> float | None:
    """The number of the contract's ``prefix<number>`` tag in ``annotation``, if there is one."""
    for tag in annotation.tag:
        if tag.startswith(prefix):
            try:
                return float(tag[len(prefix) :])
            except ValueError:
                raise ValueError(f"The data contract's tag {tag!r} on {where} needs a number: {prefix}0.3") from None
    return None


def missing_tolerances(schema: schema_pb2.Schema) -> dict[str, float]:
    """Column -> the largest share of rows the contract lets go without a value."""
    found = {}
    for feature in schema.feature:
        if (tolerance := _tagged(feature.annotation, MISSING_TAG, f"'{feature.name}'")) is not None:
            found[feature.name] = tolerance
    return found


def min_label_class_fraction(schema: schema_pb2.Schema) -> float:
    """The contract's minimum share of each label class, else ``problem.MIN_LABEL_CLASS_FRACTION``."""
    from models.problem import MIN_LABEL_CLASS_FRACTION

    found = _tagged(schema.annotation, LABEL_BALANCE_TAG, "the schema")
    return MIN_LABEL_CLASS_FRACTION if found is None else found


def missing_share(feature: statistics_pb2.FeatureNameStatistics, rows: int) -> float:
    """The share of ``rows`` in which a column has no value. CSV columns hold one value or
    none per row (an empty cell is a feature present with no value), so it is 1 - values/rows."""
    kind = feature.WhichOneof("stats")
    values = getattr(feature, kind).common_stats.tot_num_values if kind else 0
    return 1.0 - values / rows if rows else 0.0


def describe_missing(
    statistics_by_split: dict[str, statistics_pb2.DatasetFeatureStatisticsList], schema: schema_pb2.Schema
) -> list[str]:
    """One line per split and column with more rows without a value than the contract allows."""
    tolerances = missing_tolerances(schema)
    lines = []
    for split, statistics in sorted(statistics_by_split.items()):
        dataset = statistics.datasets[0]
        for feature in dataset.features:
            name = ".".join(feature.path.step) or feature.name
            if name not in tolerances or not dataset.num_examples:
                continue
            missing = missing_share(feature, dataset.num_examples)
            if missing > tolerances[name]:
                lines.append(
                    f"[{split}] feature '{name}': {missing:.1%} of rows have no value; the contract allows "
                    f"{tolerances[name]:.0%} ({MISSING_TAG}{tolerances[name]:g})"
                )
    return lines


def label_counts(examples: standard_artifacts.Examples, schema: schema_pb2.Schema, problem) -> dict[str, list[int]]:
    """Per split, rows per class of a classification label: [value not a class, class 0,
    class 1, ...], the label computed as ``preprocessing_fn`` computes it, from the
    label's source columns only: read from the columns the fast ExampleGen kept beside the
    examples where every record file has them (``runtime.decoded_columns``), as Transform
    reads them, else parsed from the records."""
    import tensorflow as tf
    from tensorflow_transform.tf_metadata import schema_utils

    from models import data, preprocessing

    spec = schema_utils.schema_as_feature_spec(schema).feature_spec
    sources = {key: spec[key] for key in problem.label.sources}
    size = problem.num_classes + 1

    def bincount(features: dict) -> tf.Tensor:
        labels = tf.cast(preprocessing.label(features, problem)[problem.label_key], tf.int32)
        return tf.math.bincount(tf.reshape(labels, [-1]) + 1, minlength=size, maxlength=size, dtype=tf.int64)

    count = data.without_autograph(lambda block: bincount(tf.io.parse_example(block, sources)))
    add = data.without_autograph(lambda total, block: total + block)

    counts = {}
    for split in artifact_utils.decode_split_names(examples.split_names):
        split_dir = artifact_utils.get_split_uri([examples], split)
        kept = _kept_label_columns(split_dir, schema, problem.label.sources)
        if kept is not None:
            total = tf.zeros([size], tf.int64)
            for features in kept:
                total += bincount(features)
            counts[split] = [int(c) for c in total.numpy()]
            continue
        files = sorted(tf.io.gfile.glob(os.path.join(split_dir, "*")))
        # Files read and blocks parsed in parallel, summed in the graph, in one pass (no
        # autotuning thread to join: models.data.untuned).
        blocks = data.record_blocks(files, block_rows=8192).map(
            count, num_parallel_calls=tf.data.AUTOTUNE, deterministic=False
        )
        counts[split] = [int(c) for c in data.untuned(blocks).reduce(tf.zeros([size], tf.int64), add).numpy()]
    return counts


def _kept_label_columns(split_dir: str, schema: schema_pb2.Schema, sources):
    """The label's source columns of a split, batch by batch as tensors (as tfx_bsl's
    TensorAdapter gives Transform's ``preprocessing_fn`` its inputs), read from the
    columns ExampleGen kept; None unless every record file has them, of the schema's types."""
    from tfx_bsl.tfxio import tensor_representation_util, tf_example_record

    from runtime import decoded_columns

    file_pattern = os.path.join(split_dir, "*")
    files = decoded_columns.kept_columns_files(file_pattern)
    if files is None:
        return None
    projected = tensor_representation_util.ProjectTensorRepresentationsInSchema(schema, list(sources))
    tfxio = tf_example_record.TFExampleRecord(file_pattern=file_pattern, schema=projected)
    arrow_schema = tfxio.ArrowSchema()
    if not decoded_columns.decodes_to(files, arrow_schema):
        return None
    adapter = tfxio.TensorAdapter()
    return (
        adapter.ToBatchTensors(batch) for path in files for batch in decoded_columns.read_batches(path, arrow_schema)
    )


def _not_numbers(statistics_by_split: dict[str, statistics_pb2.DatasetFeatureStatisticsList], column: str) -> list:
    """A few of the column's most frequent values that are not numbers, from its statistics."""
    found: list[str] = []
    for statistics in statistics_by_split.values():
        for feature in statistics.datasets[0].features:
            if (".".join(feature.path.step) or feature.name) != column:
                continue
            for bucket in feature.string_stats.top_values:
                try:
                    float(bucket.value)
                except ValueError:
                    if bucket.value not in found:
                        found.append(bucket.value)
    return found[:3]


def _top_values(statistics_by_split: dict[str, statistics_pb2.DatasetFeatureStatisticsList], column: str) -> list:
    """The column's most frequent values, from its statistics (text columns only)."""
    found: list[str] = []
    for statistics in statistics_by_split.values():
        for feature in statistics.datasets[0].features:
            if (".".join(feature.path.step) or feature.name) == column:
                found += [b.value for b in feature.string_stats.top_values if b.value not in found]
    return found


def describe_label(
    examples: standard_artifacts.Examples,
    schema: schema_pb2.Schema,
    problem,
    statistics_by_split: dict[str, statistics_pb2.DatasetFeatureStatisticsList] | None = None,
) -> list[str]:
    """One line per split whose label cannot be learned from: a source column missing or
    holding text where the label needs numbers (a schema inferred from the data types such
    a column as text), values that are none of the classes, or a class under the
    contract's minimum share of the rows (``min_label_class_fraction``)."""
    from models.problem import Task

    least = min_label_class_fraction(schema)
    known = {f.name: f for f in schema.feature}
    label = problem.label
    rule = label.describe()
    if missing := [key for key in label.sources if key not in known]:
        return [f"[all] {rule}: column(s) {', '.join(missing)} not in the data; the label cannot be computed"]
    named = dict.fromkeys(problem.features.inputs + problem.slices)
    if missing := [key for key in named if key not in known]:
        return [
            f"[all] problem '{problem.name}': column(s) {', '.join(missing)} named in its problem.toml (features or "
            f"evaluation.slices) not in the data, whose columns are {', '.join(sorted(known))}. Fix the spec's "
            "column names, or the data"
        ]
    numeric = label.expression is not None or problem.task == Task.REGRESSION
    if numeric and (text := [key for key in label.sources if known[key].type == schema_pb2.BYTES]):
        lines = []
        for key in text:
            seen = _not_numbers(statistics_by_split or {}, key)
            example = f" (such as {', '.join(repr(v) for v in seen)})" if seen else ""
            lines.append(
                f"[all] {rule}: column '{key}' holds text{example} where the label needs numbers. Fix those "
                "cells, or check the data against the problem's contract (schema.pbtxt), which names them"
            )
        return lines
    if problem.task == Task.REGRESSION:
        return []
    names = ["0", "1"] if problem.task == Task.BINARY else list(label.classes)
    lines = []
    for split, counts in sorted(label_counts(examples, schema, problem).items()):
        unknown, per_class = counts[0], counts[1:]
        rows = sum(counts)
        if unknown:
            others = [v for v in _top_values(statistics_by_split or {}, label.column) if v not in label.classes]
            example = f" (such as {', '.join(repr(v) for v in others[:3])})" if others else ""
            lines.append(
                f"[{split}] {rule}: {unknown} of {rows} rows hold a value that is none of the classes{example}. "
                "Add it to label.classes in problem.toml, or fix those rows"
            )
            continue
        for name, count in zip(names, per_class, strict=True):
            if rows and count / rows < least:
                lines.append(
                    f"[{split}] {rule}: {count} of {rows} rows are class {name} ({count / rows:.1%}); each class "
                    f"needs at least {least:.0%} of a split to learn from ({LABEL_BALANCE_TAG}{least:g}). Check "
                    f"the label's column(s) {', '.join(label.sources)} (all one value, or in another unit?)"
                )
    return lines


def headers_named(lines: list[str], problem) -> list[str]:
    """A line naming the CSV header of each renamed column ``lines`` name by feature name
    (the contract's names), so a person finds the column in their file; none otherwise."""
    named = [f for f in problem.columns if any(re.search(rf"\b{re.escape(f)}\b", line) for line in lines)]
    if not named:
        return []
    return [
        "Named in the CSV header (problem.toml [columns]): "
        + ", ".join(f"{feature} is {problem.columns[feature]!r}" for feature in named)
    ]


def check_data(
    anomalies: standard_artifacts.ExampleAnomalies,
    examples: standard_artifacts.Examples,
    schema_file: str,
    statistics: standard_artifacts.ExampleStatistics,
    problem,
) -> None:
    """Raises ``DataAnomaliesError`` naming every anomaly, column missing too many values and
    a label that cannot be learned, or returns when the data is clean."""
    schema = io_utils.parse_pbtxt_file(schema_file, schema_pb2.Schema())
    statistics_by_split = read_statistics_dir(statistics.uri)
    lines = describe_anomalies(read_anomalies(anomalies)) + describe_missing(statistics_by_split, schema)
    # The label's source is read with the schema's types: only once the data matches them.
    if not lines:
        lines = describe_label(examples, schema, problem, statistics_by_split)
    if lines:
        lines += headers_named(lines, problem)
        raise DataAnomaliesError(
            "The data breaks its contract, so Transform and training did not run on it:\n  "
            + "\n  ".join(lines)
            + f"\nDetails: {anomalies.uri}\nFix the data, or, if the change is intended, update the problem's "
            "data contract (schema.pbtxt in its folder, or --schema-path) and run the pipeline again."
        )


@component
def AnomalyGate(
    anomalies: InputArtifact[standard_artifacts.ExampleAnomalies],
    schema: InputArtifact[standard_artifacts.Schema],
    examples: InputArtifact[standard_artifacts.Examples],
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    validated_schema: OutputArtifact[standard_artifacts.Schema],
    problem: Parameter[str],
) -> None:
    """Fails when the data has anomalies, columns missing more values than the contract
    allows, or a label with nothing to learn; otherwise passes the schema on. ``problem``:
    the problem spec as JSON (``Problem.to_json``)."""
    from models.problem import Problem

    source = io_utils.get_only_uri_in_dir(schema.uri)
    check_data(anomalies, examples, source, statistics, Problem.from_json(problem))
    io_utils.copy_file(source, os.path.join(validated_schema.uri, SCHEMA_FILE), overwrite=True)
