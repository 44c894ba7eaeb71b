"""The Transform ``preprocessing_fn``: every useful column, missing values explicit.

Missing values: numbers take the mean of the present values, strings a ``__MISSING__``
vocabulary entry, coordinates a bucket of their own, integer categories index 0.
Columns that are sometimes empty in the CSV reach Transform as ``SparseTensor`` (the
schema marks them optional); columns always present arrive dense. ``_dense`` handles
both, so the same code serves the default data, a user's CSV and a tiny test batch.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from models import features


def _dense(x: tf.Tensor | tf.SparseTensor | tf.RaggedTensor, default) -> tf.Tensor:
    """Returns ``x`` as a dense [batch] tensor, ``default`` where the value is missing."""
    if isinstance(x, tf.RaggedTensor):
        x = x.to_sparse()
    if isinstance(x, tf.SparseTensor):
        x = tf.sparse.to_dense(
            tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]),
            default_value=tf.cast(default, x.dtype),
        )
    return tf.reshape(x, [-1])


def _is_missing(x: tf.Tensor | tf.SparseTensor | tf.RaggedTensor) -> tf.Tensor:
    """A [batch] bool tensor, True where the raw value is absent."""
    if isinstance(x, tf.RaggedTensor):
        return tf.equal(x.row_lengths(), 0)
    if isinstance(x, tf.SparseTensor):
        counts = tf.math.bincount(
            tf.cast(x.indices[:, 0], tf.int32),
            minlength=tf.cast(x.dense_shape[0], tf.int32),
            maxlength=tf.cast(x.dense_shape[0], tf.int32),
        )
        return tf.equal(counts, 0)
    return tf.zeros([tf.shape(tf.reshape(x, [-1]))[0]], tf.bool)


def _as_column(x: tf.Tensor) -> tf.Tensor:
    return tf.reshape(x, [-1, 1])


def _to_float(x) -> tf.Tensor:
    return tf.cast(_dense(x, 0), tf.float32)


def _values(x) -> tf.Tensor:
    """The values present, as a flat tensor (for analyzers that must skip missing ones)."""
    if isinstance(x, tf.RaggedTensor):
        return x.flat_values
    if isinstance(x, tf.SparseTensor):
        return x.values
    return tf.reshape(x, [-1])


def _impute_mean(x, transform, dtype=tf.float32) -> tf.Tensor:
    """``transform`` of each value as ``dtype``; a missing value becomes the mean of the
    present ones (over the whole data set), so it lands in the middle, not at zero."""
    value = transform(tf.cast(_dense(x, 0), dtype))
    mean = tft.mean(transform(tf.cast(_values(x), dtype)))
    return tf.where(_is_missing(x), tf.cast(mean, dtype), value)


def _to_string(x) -> tf.Tensor:
    """Strings as they are; numbers (census tracts) as integer strings. Missing: a token."""
    if x.dtype == tf.string:
        return _dense(x, features.MISSING_TOKEN)
    as_text = tf.strings.as_string(tf.cast(_dense(x, 0), tf.int64))
    return tf.where(_is_missing(x), features.MISSING_TOKEN, as_text)


def big_tipper(tips: tf.Tensor, fare: tf.Tensor) -> tf.Tensor:
    """The label: 1 when tips exceed 20% of the fare. Missing tips or fare count as 0."""
    return tf.cast(tips > features.BIG_TIPPER_FRACTION * fare, tf.int64)


def preprocessing_fn(inputs: dict) -> dict:
    """Maps raw columns to model-ready features (``<name>_xf``), each of shape [batch, 1]."""
    outputs = {}
    for key in features.LOG_NUMERIC_FEATURES:
        value = _impute_mean(inputs[key], lambda v: tf.math.log1p(tf.maximum(v, 0.0)))
        outputs[features.transformed_name(key)] = _as_column(tft.scale_to_z_score(value))
    for key in features.NUMERIC_FEATURES:
        # float64: a float32 holds a Unix timestamp only to the nearest 128 s.
        value = _impute_mean(inputs[key], tf.identity, tf.float64)
        outputs[features.transformed_name(key)] = _as_column(tf.cast(tft.scale_to_z_score(value), tf.float32))
    for key in features.VOCAB_FEATURES:
        outputs[features.transformed_name(key)] = _as_column(
            tft.compute_and_apply_vocabulary(
                _to_string(inputs[key]),
                top_k=features.VOCAB_TOP_K,
                num_oov_buckets=features.VOCAB_OOV_BUCKETS,
                vocab_filename=key,
            )
        )
    for key, max_value in features.RANGE_CATEGORICAL_FEATURES.items():
        raw = inputs[key]
        index = tf.clip_by_value(tf.cast(_dense(raw, 0), tf.int64), 0, max_value) + 1
        index = tf.where(_is_missing(raw), tf.constant(0, tf.int64), index)
        outputs[features.transformed_name(key)] = _as_column(index)
    for key in features.BUCKET_FEATURES:
        # tf.cast keeps sparsity, so quantiles are computed over the present values only;
        # densifying then puts the missing ones in a bucket of their own.
        buckets = tft.bucketize(tf.cast(inputs[key], tf.float32), features.NUM_BUCKETS)
        outputs[features.transformed_name(key)] = _as_column(_dense(buckets, features.NUM_BUCKETS))

    tips = _to_float(inputs[features.TIPS])
    fare = _to_float(inputs[features.FARE])
    outputs[features.transformed_name(features.LABEL_KEY)] = _as_column(big_tipper(tips, fare))
    return outputs
