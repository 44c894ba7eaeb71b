"""Comparing two TFDV statistics protos as StatisticsGen's consumers read them."""

from __future__ import annotations

import pytest


def assert_same_statistics(ours, theirs) -> None:
    """Every feature's statistics equal, field by field; means and standard deviations to
    1e-12 (sums taken in another order); and the schema TFDV infers from them equal."""
    import tensorflow_data_validation as tfdv
    from tensorflow_metadata.proto.v0 import statistics_pb2

    (mine,), (reference,) = ours.datasets, theirs.datasets
    assert mine.num_examples == reference.num_examples > 0
    features = {tuple(f.path.step): f for f in mine.features}
    expected = {tuple(f.path.step): f for f in reference.features}
    assert features.keys() == expected.keys()
    for path, feature in features.items():
        got, want = statistics_pb2.FeatureNameStatistics(), statistics_pb2.FeatureNameStatistics()
        got.CopyFrom(feature)
        want.CopyFrom(expected[path])
        for field in ("mean", "std_dev"):
            assert getattr(got.num_stats, field) == pytest.approx(getattr(want.num_stats, field), rel=1e-12, abs=1e-12)
            setattr(got.num_stats, field, 0.0)
            setattr(want.num_stats, field, 0.0)
        assert got == want, path
    assert tfdv.infer_schema(ours) == tfdv.infer_schema(theirs)
