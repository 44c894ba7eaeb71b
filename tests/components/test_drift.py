"""Drift measurement: TFDV's comparators over numeric histograms laid on common buckets, so
the distance measures the distribution, not where each dataset's extremes happen to lie."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from components import drift

H = statistics_pb2.Histogram


def _quantiles(*buckets: tuple[float, float, float]) -> statistics_pb2.Histogram:
    histogram = H(type=H.QUANTILES)
    for low, high, count in buckets:
        histogram.buckets.add(low_value=low, high_value=high, sample_count=count)
    return histogram


def test_a_bucket_spreads_over_the_buckets_it_overlaps():
    counts = drift.spread(_quantiles((0.0, 10.0, 10.0)), np.array([2.0, 7.0]))
    assert counts == pytest.approx([2.0, 5.0, 3.0])


def test_a_repeated_value_lands_in_the_bucket_that_holds_it():
    boundaries = np.array([1.0, 3.0])
    assert drift.spread(_quantiles((3.0, 3.0, 4.0)), boundaries) == pytest.approx([0.0, 0.0, 4.0])
    assert drift.spread(_quantiles((0.5, 0.5, 4.0)), boundaries) == pytest.approx([4.0, 0.0, 0.0])


def test_extremes_fall_in_the_open_outer_buckets():
    counts = drift.spread(_quantiles((0.0, 1.0, 5.0), (1.0, 1001.0, 5.0)), np.array([1.0, 2.0]))
    assert counts == pytest.approx([5.0, 0.005, 4.995])


def _stats(values: dict[str, np.ndarray]) -> statistics_pb2.DatasetFeatureStatisticsList:
    return tfdv.generate_statistics_from_dataframe(pd.DataFrame(values))


def _contract(threshold: float = 0.05) -> schema_pb2.Schema:
    schema = schema_pb2.Schema()
    feature = schema.feature.add(name="miles", type=schema_pb2.FLOAT)
    feature.drift_comparator.jensen_shannon_divergence.threshold = threshold
    colour = schema.feature.add(name="colour", type=schema_pb2.BYTES)
    colour.drift_comparator.infinity_norm.threshold = 0.1
    return schema


def _frame(rng: np.random.Generator, rows: int, outlier: float, scale: float = 1.0, red: float = 0.5):
    miles = rng.exponential(3.0, rows) * scale
    miles[0] = outlier  # one absurd trip
    return {"miles": miles, "colour": np.where(rng.random(rows) < red, "red", "blue")}


@pytest.fixture(scope="module")
def same_distribution():
    """Two samples of one distribution whose single extremes differ (2,000 vs 60 miles)."""
    rng = np.random.default_rng(7)
    return _stats(_frame(rng, 4000, 2000.0)), _stats(_frame(rng, 4000, 60.0))


def test_tfdv_alone_sees_drift_between_samples_of_one_distribution(same_distribution):
    """Why the buckets are ours: TFDV's equal-width histograms span each sample's extremes."""
    current, baseline = same_distribution
    anomalies = tfdv.validate_statistics(current, _contract(), previous_statistics=baseline)
    (miles,) = [m.value for i in anomalies.drift_skew_info if i.path.step == ["miles"] for m in i.drift_measurements]
    assert miles > 0.05


def test_common_buckets_find_no_drift_between_samples_of_one_distribution(same_distribution):
    current, baseline = same_distribution
    measured, anomalies = drift.measure(current, baseline, _contract(), "train")
    assert {(d.feature, d.measure) for d in measured} == {
        ("miles", "Jensen-Shannon divergence"),
        ("colour", "L-infinity distance"),
    }
    assert not any(d.breached for d in measured), measured
    assert not anomalies.anomaly_info


def test_a_scaled_column_and_a_shifted_share_are_drift():
    rng = np.random.default_rng(11)
    baseline = _stats(_frame(rng, 4000, 60.0))
    current = _stats(_frame(rng, 4000, 60.0, scale=3.0, red=0.8))
    measured, anomalies = drift.measure(current, baseline, _contract(), "eval")
    by_feature = {d.feature: d for d in measured}
    assert by_feature["miles"].breached and by_feature["colour"].breached
    assert by_feature["colour"].value == pytest.approx(0.3, abs=0.05)
    assert set(anomalies.anomaly_info) == {"miles", "colour"}
    assert by_feature["miles"].line().startswith("[eval] feature 'miles': Jensen-Shannon divergence ")
    assert by_feature["miles"].line().endswith("(contract allows 0.05)")


def test_the_inputs_are_left_as_they_were(same_distribution):
    current, baseline = same_distribution
    before = (current.SerializeToString(), baseline.SerializeToString())
    drift.on_common_buckets(current, baseline)
    assert (current.SerializeToString(), baseline.SerializeToString()) == before


def test_a_contract_without_comparators_is_known():
    assert drift.has_comparators(_contract())
    assert not drift.has_comparators(schema_pb2.Schema(feature=[schema_pb2.Feature(name="x")]))


def test_statistics_are_read_per_split(statistics):
    found = drift.read_statistics_dir(statistics[0].uri)
    assert set(found) == {"train", "eval"}
    assert all(s.datasets[0].num_examples > 0 for s in found.values())


def _serving_contract() -> schema_pb2.Schema:
    schema = _contract()
    schema.default_environment.extend([drift.TRAINING, drift.SERVING])
    for feature in schema.feature:
        feature.skew_comparator.CopyFrom(feature.drift_comparator)
    label = schema.feature.add(name="tips", type=schema_pb2.FLOAT)
    label.not_in_environment.append(drift.SERVING)
    return schema


def test_skew_compares_training_data_with_what_serving_was_asked():
    rng = np.random.default_rng(5)
    training = _frame(rng, 4000, 60.0)
    training["tips"] = rng.random(4000)
    same, shifted = _frame(rng, 2000, 60.0), _frame(rng, 2000, 60.0, red=0.9)
    schema = _serving_contract()
    measured, _ = drift.measure_skew(_stats(training), _stats(same), schema, "train vs serving")
    assert {d.feature for d in measured} == {"miles", "colour"} and not any(d.breached for d in measured)
    measured, anomalies = drift.measure_skew(_stats(training), _stats(shifted), schema, "train vs serving")
    (colour,) = [d for d in measured if d.breached]
    assert colour.feature == "colour" and colour.line().startswith("[train vs serving] feature 'colour': L-infinity")
    assert "colour" in anomalies.anomaly_info


def test_serving_data_is_checked_against_the_serving_environment():
    rng = np.random.default_rng(6)
    serving = _stats(_frame(rng, 500, 60.0))  # no tips: as expected at serving time
    assert not drift.check_serving_data(serving, _serving_contract()).anomaly_info
    with pytest.raises(ValueError, match='declares no SERVING environment.*default_environment: "SERVING"'):
        drift.check_serving_data(serving, _contract())
