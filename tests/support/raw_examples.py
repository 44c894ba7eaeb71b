"""Raw tf.Examples as a serving client builds them from CSV rows."""

from __future__ import annotations

import tensorflow as tf

from models import features
from pipeline.rehearsal.serving import tf_example

_STRINGS = ("payment_type", "company")
_FLOATS = (
    "fare",
    "trip_miles",
    "pickup_latitude",
    "pickup_longitude",
    "dropoff_latitude",
    "dropoff_longitude",
    features.TIPS,
)


def _dtype(key: str) -> tf.dtypes.DType:
    return tf.string if key in _STRINGS else tf.float32 if key in _FLOATS else tf.int64


def raw_example(row: dict, keep_label_source: bool = False) -> bytes:
    """Typed values; empty cells left out, and the label's source (tips) unless kept. Encoded
    by the rehearsal's serving client (``pipeline.rehearsal.serving.tf_example``)."""
    kept = [key for key in row if key != features.TIPS or keep_label_source]
    return tf_example(row, {key: tf.io.FixedLenFeature([], _dtype(key)) for key in kept})
