"""The raw columns of the taxi data, how each is used, and the label.

One place that says what every column is for, so preprocessing, the model and the
serving signature agree. Nothing here imports TensorFlow.
"""

from __future__ import annotations

# Heavy-tailed, non-negative numbers: log1p, then z-score.
LOG_NUMERIC_FEATURES: tuple[str, ...] = ("fare", "trip_miles", "trip_seconds")
# Plain numbers: z-score (the timestamp captures the slow drift of tipping over years).
NUMERIC_FEATURES: tuple[str, ...] = ("trip_start_timestamp",)
# Free-text categories: a vocabulary computed over the training data.
VOCAB_FEATURES: tuple[str, ...] = ("payment_type", "company", "dropoff_census_tract")
VOCAB_TOP_K = 1000
VOCAB_OOV_BUCKETS = 1
# Integer categories with a known range: name -> largest valid value. Index 0 is kept
# for a missing value, so the number of categories is max + 2.
RANGE_CATEGORICAL_FEATURES: dict[str, int] = {
    "trip_start_hour": 23,
    "trip_start_day": 7,
    "trip_start_month": 12,
    "pickup_community_area": 77,
    "dropoff_community_area": 77,
}
# Coordinates: quantile buckets over the training data, plus one bucket for "missing".
BUCKET_FEATURES: tuple[str, ...] = (
    "pickup_latitude",
    "pickup_longitude",
    "dropoff_latitude",
    "dropoff_longitude",
)
NUM_BUCKETS = 10

# Columns deliberately not used as model inputs, with the reason.
UNUSED_FEATURES: dict[str, str] = {
    "pickup_census_tract": "present in 1 of 15,002 rows of the default data: no signal",
    "tips": "the label is derived from it; it is unknown at serving time",
}

# The label: a "big tipper" leaves more than 20% of the fare as tip.
TIPS = "tips"
FARE = "fare"
BIG_TIPPER_FRACTION = 0.2
LABEL_KEY = "big_tipper"
# Each class of the label must be at least this share of every split, or there is nothing to
# learn (AnomalyGate checks it before Transform); a contract may set its own with a
# schema-level `annotation { tag: "min_label_class_fraction=0.05" }`.
MIN_LABEL_CLASS_FRACTION = 0.01

# Missing string values become this token, so the vocabulary has an explicit entry.
MISSING_TOKEN = "__MISSING__"


def transformed_name(key: str) -> str:
    """Name of a feature after Transform (keeps raw and transformed apart in one dict)."""
    return f"{key}_xf"


def categorical_size(key: str) -> int:
    """Number of categories of a range-categorical feature (including "missing")."""
    return RANGE_CATEGORICAL_FEATURES[key] + 2


def bucket_size() -> int:
    """Number of categories of a bucketized coordinate (including "missing")."""
    return NUM_BUCKETS + 1


def model_input_features() -> tuple[str, ...]:
    """Every raw column that feeds the model (everything but the unused ones)."""
    return (
        LOG_NUMERIC_FEATURES + NUMERIC_FEATURES + VOCAB_FEATURES + tuple(RANGE_CATEGORICAL_FEATURES) + BUCKET_FEATURES
    )


def raw_columns() -> tuple[str, ...]:
    """Every column the default data has: inputs, unused ones and the label's sources."""
    return tuple(dict.fromkeys(model_input_features() + tuple(UNUSED_FEATURES) + (TIPS, FARE)))
