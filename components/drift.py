"""DriftGate's measures: drift between this run's data and the data the champion learned
from, and skew between the training data and the data the model is asked about at serving
time, each by TFDV with the data contract's comparators, numeric histograms first laid on
the baseline's quantile buckets (``on_common_buckets``; docs/drift.md says why).
"""

from __future__ import annotations

import copy
import dataclasses
import os

import numpy as np
from google.protobuf.message import Message
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

# Inside a ModelBlessing: the statistics of the data the blessed model was trained and
# evaluated on (components/evaluator.py writes them), the next run's baseline.
STATISTICS_DIR = "statistics"
STATS_FILE = "FeatureStats.pb"
SPLIT_PREFIX = "Split-"
# The contract's environments: the label's source is present in training data only.
TRAINING, SERVING = "TRAINING", "SERVING"

_Histogram = statistics_pb2.Histogram
_MEASURES = {
    anomalies_pb2.DriftSkewInfo.Measurement.L_INFTY: "L-infinity distance",
    anomalies_pb2.DriftSkewInfo.Measurement.JENSEN_SHANNON_DIVERGENCE: "Jensen-Shannon divergence",
    anomalies_pb2.DriftSkewInfo.Measurement.NORMALIZED_ABSOLUTE_DIFFERENCE: "normalized absolute difference",
}


@dataclasses.dataclass(frozen=True)
class Drift:
    """One comparator's verdict on one column of one split."""

    split: str
    feature: str
    measure: str
    value: float
    threshold: float

    @property
    def breached(self) -> bool:
        return self.value > self.threshold

    def line(self) -> str:
        where = f"[{self.split}] feature '{self.feature}'"
        return f"{where}: {self.measure} {self.value:.4f} (contract allows {self.threshold:g})"


def has_comparators(schema: schema_pb2.Schema, kind: str = "drift_comparator") -> bool:
    """True when the contract sets a ``kind`` threshold (drift or skew) for at least one column."""
    return any(feature.HasField(kind) for feature in schema.feature)


def read_splits(uri: str, file_name: str, message_class: type[Message]) -> dict[str, Message]:
    """Per split, the ``file_name`` proto a component wrote under ``uri`` (Split-<name>/<file>):
    StatisticsGen's statistics, ExampleValidator's or DriftGate's anomalies."""
    import tensorflow as tf

    found = {}
    for path in sorted(tf.io.gfile.glob(os.path.join(uri, SPLIT_PREFIX + "*", file_name))):
        split = os.path.basename(os.path.dirname(path))[len(SPLIT_PREFIX) :]
        with tf.io.gfile.GFile(path, "rb") as f:
            found[split] = message_class.FromString(f.read())
    return found


def read_statistics_dir(uri: str) -> dict[str, statistics_pb2.DatasetFeatureStatisticsList]:
    """Per split, the statistics StatisticsGen wrote under ``uri`` (Split-<name>/FeatureStats.pb)."""
    return read_splits(uri, STATS_FILE, statistics_pb2.DatasetFeatureStatisticsList)


def _quantiles(feature: statistics_pb2.FeatureNameStatistics) -> statistics_pb2.Histogram | None:
    if not feature.HasField("num_stats"):
        return None
    return next((h for h in feature.num_stats.histograms if h.type == _Histogram.QUANTILES and h.buckets), None)


def spread(quantiles: statistics_pb2.Histogram, boundaries: np.ndarray) -> np.ndarray:
    """Counts of a quantile histogram in the buckets (-inf, b0), [b0, b1), ..., [bk, inf): a
    bucket's count spread evenly over its range, a zero-width bucket (a repeated value) into
    the bucket holding its value."""
    edges = np.concatenate([[-np.inf], boundaries, [np.inf]])
    counts = np.zeros(len(edges) - 1)
    for bucket in quantiles.buckets:
        low, high, count = bucket.low_value, bucket.high_value, bucket.sample_count
        if high <= low:
            counts[np.searchsorted(boundaries, low, side="right")] += count
            continue
        overlap = np.clip(np.minimum(high, edges[1:]) - np.maximum(low, edges[:-1]), 0.0, None)
        counts += count * overlap / (high - low)
    return counts


def _standard_histogram(counts: np.ndarray, boundaries: np.ndarray) -> statistics_pb2.Histogram:
    # TFDV needs finite bucket limits; the outer buckets are closed one unit beyond the
    # boundaries, the same for both datasets, so the comparison is unchanged.
    limits = np.concatenate([[boundaries[0] - 1.0], boundaries, [boundaries[-1] + 1.0]])
    histogram = _Histogram(type=_Histogram.STANDARD)
    for low, high, count in zip(limits[:-1], limits[1:], counts, strict=True):
        histogram.buckets.add(low_value=float(low), high_value=float(high), sample_count=float(count))
    return histogram


def _replace_standard(feature: statistics_pb2.FeatureNameStatistics, histogram: statistics_pb2.Histogram) -> None:
    kept = [h for h in feature.num_stats.histograms if h.type != _Histogram.STANDARD]
    del feature.num_stats.histograms[:]
    feature.num_stats.histograms.extend([*kept, histogram])


def on_common_buckets(
    current: statistics_pb2.DatasetFeatureStatisticsList, baseline: statistics_pb2.DatasetFeatureStatisticsList
) -> tuple[statistics_pb2.DatasetFeatureStatisticsList, statistics_pb2.DatasetFeatureStatisticsList]:
    """Copies of both statistics whose numeric columns' standard histograms share buckets
    (the baseline's interior quantile boundaries), for TFDV's Jensen-Shannon comparator."""
    current, baseline = copy.deepcopy(current), copy.deepcopy(baseline)
    base_features = {tuple(f.path.step) or (f.name,): f for f in baseline.datasets[0].features}
    for feature in current.datasets[0].features:
        base_feature = base_features.get(tuple(feature.path.step) or (feature.name,))
        if base_feature is None:
            continue
        current_quantiles, base_quantiles = _quantiles(feature), _quantiles(base_feature)
        if current_quantiles is None or base_quantiles is None:
            continue
        boundaries = np.unique([b.high_value for b in base_quantiles.buckets[:-1]])
        if boundaries.size == 0:
            continue
        for target, quantiles in ((feature, current_quantiles), (base_feature, base_quantiles)):
            _replace_standard(target, _standard_histogram(spread(quantiles, boundaries), boundaries))
    return current, baseline


def _found(anomalies: anomalies_pb2.Anomalies, split: str, field: str) -> list[Drift]:
    found = [
        Drift(split, ".".join(info.path.step), _MEASURES.get(m.type, "distance"), m.value, m.threshold)
        for info in anomalies.drift_skew_info
        for m in getattr(info, field)
    ]
    return sorted(found, key=lambda d: (d.feature, d.measure))


def measure(
    current: statistics_pb2.DatasetFeatureStatisticsList,
    baseline: statistics_pb2.DatasetFeatureStatisticsList,
    schema: schema_pb2.Schema,
    split: str,
) -> tuple[list[Drift], anomalies_pb2.Anomalies]:
    """Every ``drift_comparator`` of the contract, measured by TFDV between one split and the
    same split of the baseline; also TFDV's anomalies proto, kept as the gate's output."""
    import tensorflow_data_validation as tfdv

    current, baseline = on_common_buckets(current, baseline)
    anomalies = tfdv.validate_statistics(current, schema, previous_statistics=baseline)
    return _found(anomalies, split, "drift_measurements"), anomalies


def measure_skew(
    training: statistics_pb2.DatasetFeatureStatisticsList,
    serving: statistics_pb2.DatasetFeatureStatisticsList,
    schema: schema_pb2.Schema,
    label: str,
) -> tuple[list[Drift], anomalies_pb2.Anomalies]:
    """Every ``skew_comparator`` of the contract, measured by TFDV between the training data
    and what the model was asked at serving time (the training data's buckets)."""
    import tensorflow_data_validation as tfdv

    serving, training = on_common_buckets(serving, training)
    anomalies = tfdv.validate_statistics(training, schema, environment=TRAINING, serving_statistics=serving)
    return _found(anomalies, label, "skew_measurements"), anomalies


def check_serving_data(
    serving: statistics_pb2.DatasetFeatureStatisticsList, schema: schema_pb2.Schema
) -> anomalies_pb2.Anomalies:
    """The serving data against the contract's SERVING environment (no label there)."""
    import tensorflow_data_validation as tfdv

    if SERVING not in schema.default_environment:
        raise ValueError(
            f"The data contract declares no {SERVING} environment, so the serving data cannot be checked "
            f'against it: add default_environment: "{TRAINING}" and default_environment: "{SERVING}", and '
            f'not_in_environment: "{SERVING}" to the label\'s source columns (data/taxi/schema.pbtxt shows how).'
        )
    return tfdv.validate_statistics(serving, schema, environment=SERVING)
