"""Raw tf.Examples as a serving client builds them from CSV rows."""

from __future__ import annotations

import tensorflow as tf

from models import features

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


def raw_example(row: dict, keep_label_source: bool = False) -> bytes:
    """Typed values; empty cells left out, and the label's source (tips) unless kept."""
    feature = {}
    for key, value in row.items():
        if value == "" or (key == features.TIPS and not keep_label_source):
            continue
        if key in _STRINGS:
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
        elif key in _FLOATS:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(float(value))]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
