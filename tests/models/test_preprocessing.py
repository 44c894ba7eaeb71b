"""preprocessing_fn on a tiny in-memory batch of taxi rows through real tf.Transform (Beam,
in-process), with the taxi problem's spec as the pipeline passes it."""

from __future__ import annotations

import datetime

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from models import preprocessing
from models.problem import MISSING_TOKEN, Problem, transformed_name
from tests.support.problems import TAXI, with_problem

xf = transformed_name
NUM_BUCKETS = TAXI.features.num_buckets


def preprocessing_fn(inputs):
    return preprocessing.preprocessing_fn(inputs, with_problem())


_F32, _I64, _STR = tf.float32, tf.int64, tf.string
# Always-present columns are dense; columns that can be empty in the CSV are VarLen,
# exactly as the inferred schema makes them.
RAW_SPEC = {
    "fare": tf.io.FixedLenFeature([], _F32),
    "tips": tf.io.FixedLenFeature([], _F32),
    "trip_miles": tf.io.FixedLenFeature([], _F32),
    "trip_seconds": tf.io.VarLenFeature(_I64),
    "trip_start_timestamp": tf.io.FixedLenFeature([], _I64),
    "trip_start_hour": tf.io.FixedLenFeature([], _I64),
    "trip_start_day": tf.io.FixedLenFeature([], _I64),
    "trip_start_month": tf.io.FixedLenFeature([], _I64),
    "payment_type": tf.io.FixedLenFeature([], _STR),
    "company": tf.io.VarLenFeature(_STR),
    "dropoff_census_tract": tf.io.VarLenFeature(_I64),
    "pickup_community_area": tf.io.VarLenFeature(_I64),
    "dropoff_community_area": tf.io.VarLenFeature(_I64),
    "pickup_latitude": tf.io.VarLenFeature(_F32),
    "pickup_longitude": tf.io.VarLenFeature(_F32),
    "dropoff_latitude": tf.io.VarLenFeature(_F32),
    "dropoff_longitude": tf.io.VarLenFeature(_F32),
}


def _row(i: int, **overrides) -> dict:
    row = {
        "fare": 10.0 + i,
        "tips": 0.0,
        "trip_miles": 1.0 + i,
        "trip_seconds": [600 + 10 * i],
        "trip_start_timestamp": 1400000000 + 3600 * i,
        "trip_start_hour": i % 24,
        "trip_start_day": 1 + i % 7,
        "trip_start_month": 1 + i % 12,
        "payment_type": "Cash",
        "company": ["Flash Cab"],
        "dropoff_census_tract": [17031081500 + i % 3],
        "pickup_community_area": [8],
        "dropoff_community_area": [32],
        "pickup_latitude": [41.89 + 0.001 * i],
        "pickup_longitude": [-87.63 - 0.001 * i],
        "dropoff_latitude": [41.88 + 0.001 * i],
        "dropoff_longitude": [-87.62 - 0.001 * i],
    }
    row.update(overrides)
    return row


ROWS = [_row(i) for i in range(20)] + [
    _row(20, tips=3.0, fare=10.0, payment_type="Credit Card"),  # 30% tip: big tipper
    _row(21, tips=1.0, fare=10.0, payment_type="Credit Card"),  # 10%: not
    _row(22, tips=0.0, fare=0.0),  # no fare, no tip: not
    _row(
        23,
        company=[],
        dropoff_census_tract=[],
        dropoff_latitude=[],
        dropoff_longitude=[],
        dropoff_community_area=[],
        trip_seconds=[],
    ),  # every optional value missing
    _row(24, company=[], trip_start_hour=0),
    _row(25, trip_start_hour=23),
]


def _transform_output(fn, rows: list[dict], feature_spec: dict, temp) -> tuple[list[dict], tft.TFTransformOutput]:
    """``fn`` analysed and applied over ``rows`` (raw ``feature_spec``): the transformed rows,
    and the transform as the Trainer and the serving graph read it (written under ``temp``)."""
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(feature_spec))
    with tft_beam.Context(temp_dir=str(temp / "tmp"), force_tf_compat_v1=False):
        (rows, _), transform_fn = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            fn, output_record_batches=False
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(temp / "transform_fn"))
    return rows, tft.TFTransformOutput(str(temp / "transform_fn"))


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    return _transform_output(preprocessing_fn, ROWS, RAW_SPEC, tmp_path_factory.mktemp("tft"))


def _analyze_and_transform(fn, temp_dir) -> list[dict]:
    """``fn`` as a preprocessing_fn over ROWS: the transformed rows."""
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(RAW_SPEC))
    with tft_beam.Context(temp_dir=str(temp_dir), force_tf_compat_v1=False):
        (rows, _), _ = (ROWS, metadata) | tft_beam.AnalyzeAndTransformDataset(fn, output_record_batches=False)
    return rows


def _column(rows, key) -> np.ndarray:
    return np.array([np.asarray(r[key]).reshape(-1)[0] for r in rows])


def test_every_model_input_and_the_label_is_produced(transformed):
    rows, _ = transformed
    expected = {xf(k) for k in TAXI.features.inputs} | {TAXI.label_key}
    assert set(rows[0]) == expected
    assert all(np.asarray(r[k]).shape == (1,) for r in rows for k in expected)


def test_label_is_tips_over_twenty_percent_of_fare(transformed):
    label = _column(transformed[0], TAXI.label_key)
    assert label[20] == 1 and label[21] == 0 and label[22] == 0
    assert label[:20].sum() == 0


def test_numeric_features_are_z_scored(transformed):
    rows, _ = transformed
    for key in TAXI.features.log_numeric[:2] + TAXI.features.numeric:
        values = _column(rows, xf(key))
        assert abs(values.mean()) < 1e-4 and abs(values.std() - 1.0) < 1e-3, key
    fare = _column(rows, xf("fare"))
    assert fare[19] > fare[0]  # monotonic in the raw value (log1p then z-score)


def test_missing_strings_get_an_explicit_vocabulary_entry(transformed):
    rows, output = transformed
    company = _column(rows, xf("company"))
    assert company[23] == company[24] != company[0]
    vocabulary = output.vocabulary_by_name("company")
    assert vocabulary[company[23]] == MISSING_TOKEN.encode()
    assert vocabulary[company[0]] == b"Flash Cab"


def test_census_tracts_become_integer_strings(transformed):
    vocabulary = transformed[1].vocabulary_by_name("dropoff_census_tract")
    assert b"17031081500" in vocabulary and MISSING_TOKEN.encode() in vocabulary


def test_missing_coordinates_get_their_own_bucket(transformed):
    rows, _ = transformed
    buckets = _column(rows, xf("dropoff_latitude"))
    assert buckets[23] == NUM_BUCKETS
    present = np.delete(buckets, 23)
    assert present.max() < NUM_BUCKETS and len(set(present)) > 1


def test_time_and_area_categories_reserve_zero_for_missing(transformed):
    rows, _ = transformed
    hour = _column(rows, xf("trip_start_hour"))
    assert hour[24] == 1 and hour[25] == 24  # hour h -> h + 1
    area = _column(rows, xf("dropoff_community_area"))
    assert area[23] == 0 and area[0] == 33


def test_missing_numbers_take_the_mean_not_zero(transformed):
    seconds = _column(transformed[0], xf("trip_seconds"))
    others = np.delete(seconds, 23)
    # Imputed in log space with the mean of the present values: z-score near 0, while a
    # zero-second trip would sit far below every real one.
    assert abs(seconds[23]) < 0.1 and others.min() < seconds[23] < others.max()


def test_one_pass_imputed_z_scores_equal_tft_z_scores_of_the_imputed_values(tmp_path):
    """The one-analyzer formula against the two-pass reference: impute with tft.mean, then
    tft.scale_to_z_score (which needs that mean first)."""
    keys = {
        "trip_seconds": preprocessing._log1p,
        "fare": preprocessing._log1p,
        "dropoff_latitude": tf.identity,
        "trip_start_timestamp": tf.identity,
    }

    def reference(x, transform):
        value = transform(tf.cast(preprocessing._dense(x, 0), tf.float64))
        mean = tft.mean(transform(tf.cast(preprocessing._values(x), tf.float64)))
        return tft.scale_to_z_score(tf.where(preprocessing._is_missing(x), mean, value))

    def both(inputs):
        one = preprocessing.z_scores_imputed({k: (inputs[k], t) for k, t in keys.items()})
        out = {f"{k}_one": v for k, v in one.items()}
        out.update({f"{k}_two": tf.cast(reference(inputs[k], t), tf.float32) for k, t in keys.items()})
        return out

    rows = _analyze_and_transform(both, tmp_path)
    for key in keys:
        one, two = _column(rows, f"{key}_one"), _column(rows, f"{key}_two")
        assert np.allclose(one, two, atol=1e-5), key
        assert np.std(two) > 0.5  # a real spread, not two constant columns agreeing


def test_one_quantiles_analyzer_buckets_like_tft_bucketize_per_column(tmp_path):
    """The shared quantiles analyzer against tft.bucketize of each column's present values
    (TFX's usual one analyzer per column), missing values in a bucket of their own."""
    keys = TAXI.features.bucketized + ("fare", "trip_seconds")  # dense and sparse, spreads of every size

    def both(inputs):
        one = preprocessing.quantile_buckets({k: inputs[k] for k in keys}, NUM_BUCKETS)
        out = {f"{k}_one": v for k, v in one.items()}
        for k in keys:
            per_column = tft.bucketize(tf.cast(inputs[k], tf.float32), NUM_BUCKETS)
            out[f"{k}_two"] = preprocessing._dense(per_column, NUM_BUCKETS)
        return out

    rows = _analyze_and_transform(both, tmp_path)
    for key in keys:
        one, two = _column(rows, f"{key}_one"), _column(rows, f"{key}_two")
        assert one.tolist() == two.tolist(), key
        assert len(set(two)) > 3  # real buckets, not two constant columns agreeing
    assert _column(rows, "dropoff_latitude_one")[23] == NUM_BUCKETS


# ---------------------------------------------------------------- dates and rare values

DATES = ["2024-02-29", "1970-01-01", "1969-12-31", "2000-03-01", "1900-02-28", "2023-02-29", "29/02/2024", None]
STAMPS = ["2024-02-29 13:45", "1999-12-31 23:59", "2021-06-01 00:00", "2024-01-01 07:30"] * 2
DATED_SPEC = {
    "opened": tf.io.VarLenFeature(_STR),
    "stamp": tf.io.FixedLenFeature([], _STR),
    "kind": tf.io.FixedLenFeature([], _STR),
    "answer": tf.io.FixedLenFeature([], _STR),
}
DATED = Problem.from_dict(
    {
        "name": "dated",
        "task": "binary",
        "label": {"column": "answer", "positive": "yes"},
        "features": {
            "categorical": ["kind"],
            "dates": {"opened": "%Y-%m-%d", "stamp": "%Y-%m-%d %H:%M"},
            "vocab_min_count": {"kind": 3},
        },
        "evaluation": {"threshold": 0.6},
    }
)
DATED_ROWS = [
    {"opened": [] if d is None else [d], "stamp": s, "kind": "common" if i < 5 else f"rare{i}", "answer": "yes"}
    for i, (d, s) in enumerate(zip(DATES, STAMPS, strict=True))
]


def _python_parts(text: str | None, form: str) -> dict[str, float] | None:
    """The parts as Python's datetime computes them (None where it reads no date)."""
    try:
        moment = datetime.datetime.strptime(text or "", form)
    except ValueError:
        return None
    since = moment - datetime.datetime(1970, 1, 1)
    parts = {"days": since.total_seconds() / 86_400, "year": moment.year, "month": moment.month}
    parts["weekday"] = moment.weekday()
    return parts | ({"hour": moment.hour} if "%H" in form else {})


def _dated_transform(fn, temp_dir):
    return _transform_output(fn, DATED_ROWS, DATED_SPEC, temp_dir)


def test_date_parts_computed_by_tf_transform_are_pythons_and_a_bad_date_is_missing(tmp_path):
    def fn(inputs):
        # Whole numbers, exact in int64: the days as seconds, the other parts as they are.
        outputs = {}
        for key, form in DATED.features.dates.items():
            parts, missing = preprocessing.date_parts(inputs[key], form)
            assert tuple(f"{key}_{part}" for part in parts) == DATED.features.date_parts[key]
            parts["days"] = parts["days"] * 86_400
            outputs.update(
                {f"{key}_{p}": tf.reshape(tf.cast(tf.round(v), tf.int64), [-1, 1]) for p, v in parts.items()}
            )
            outputs[f"{key}_missing"] = tf.reshape(tf.cast(missing, tf.int64), [-1, 1])
        return outputs

    rows, _ = _dated_transform(fn, tmp_path)
    for key, cells in (("opened", DATES), ("stamp", STAMPS)):
        form = DATED.features.dates[key]
        for row, cell in zip(rows, cells, strict=True):
            expected = _python_parts(cell, form)
            assert _column([row], f"{key}_missing")[0] == (expected is None), cell
            if expected is not None:
                expected["days"] = round(expected["days"] * 86_400)
                assert {part: _column([row], f"{key}_{part}")[0] for part in expected} == expected, cell


def test_date_parts_are_z_scored_numbers_missing_at_the_mean_and_rare_values_share_one_index(tmp_path):
    rows, output = _dated_transform(
        lambda inputs: preprocessing.preprocessing_fn(inputs, with_problem(problem=DATED)), tmp_path
    )
    spec = output.transformed_feature_spec()
    for part in DATED.features.numbers:
        assert spec[xf(part)].dtype == tf.float32
    days = _column(rows, xf("opened_days"))
    present = [_python_parts(d, "%Y-%m-%d") for d in DATES]
    values = np.array([p["days"] for p in present if p is not None])
    mean, std = values.mean(), np.sqrt(((values - values.mean()) ** 2).sum() / len(DATES))
    for found, parts in zip(days, present, strict=True):
        assert found == pytest.approx(0.0 if parts is None else (parts["days"] - mean) / std, abs=1e-5)
    kinds = _column(rows, xf("kind"))
    assert output.vocabulary_by_name("kind") == [b"common"]  # the rare values, once each, have no entry
    assert set(kinds[:5]) == {0} and set(kinds[5:]) == {1}  # 1: the out-of-vocabulary index
    # The serving graph parses a raw request's date the same way.
    raw = {"opened": tf.sparse.from_dense(tf.constant([["2024-02-29"]])), "stamp": tf.constant(["nonsense"])}
    raw.update(kind=tf.constant(["common"]), answer=tf.constant(["yes"]))
    served = output.transform_raw_features(raw)
    assert float(served[xf("opened_days")][0, 0]) == pytest.approx(days[0], abs=1e-5)
    assert float(served[xf("stamp_hour")][0, 0]) == pytest.approx(0.0, abs=1e-6)  # no date: the mean
