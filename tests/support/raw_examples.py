"""Raw tf.Examples as a serving client builds them from CSV rows."""

from __future__ import annotations

import tensorflow as tf

from runs.scoring import tf_example
from tests.support.problems import TAXI

LABEL_ONLY = TAXI.label_only_columns

_STRINGS = ("payment_type", "company")
_FLOATS = (
    "fare",
    "trip_miles",
    "pickup_latitude",
    "pickup_longitude",
    "dropoff_latitude",
    "dropoff_longitude",
    *LABEL_ONLY,
)


def _dtype(key: str) -> tf.dtypes.DType:
    return tf.string if key in _STRINGS else tf.float32 if key in _FLOATS else tf.int64


def raw_example(row: dict, keep_label_source: bool = False) -> bytes:
    """Typed values; empty cells left out, and the label's source (tips) unless kept. Encoded
    by the rehearsal's serving client (``runs.scoring.tf_example``)."""
    kept = [key for key in row if key not in LABEL_ONLY or keep_label_source]
    return tf_example(row, {key: tf.io.FixedLenFeature([], _dtype(key)) for key in kept})
