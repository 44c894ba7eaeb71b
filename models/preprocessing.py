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
            tf.SparseTensor(x.indices, x.values, tf.concat([_batch_size(x), [1]], 0)),
            default_value=tf.cast(default, x.dtype),
        )
    return tf.reshape(x, [-1])


# Transform traces preprocessing_fn five times per run, and the Trainer and the
# Evaluator run its graph on every batch: the helpers below build few graph operations
# (tf.slice rather than Python indexing, which adds constants and a strided slice).
def _batch_size(x: tf.SparseTensor) -> tf.Tensor:
    """The batch size of a [batch, ...] sparse tensor, as a shape [1] tensor."""
    return tf.slice(x.dense_shape, [0], [1])


def _is_missing(x: tf.Tensor | tf.SparseTensor | tf.RaggedTensor) -> tf.Tensor:
    """A [batch] bool tensor, True where the raw value is absent."""
    if isinstance(x, tf.RaggedTensor):
        return tf.equal(x.row_lengths(), 0)
    if isinstance(x, tf.SparseTensor):
        # Values per row: a scatter-add of ones at each value's row index.
        rows = tf.slice(x.indices, [0, 0], [-1, 1])
        counts = tf.scatter_nd(rows, tf.fill(tf.shape(x.values), 1), _batch_size(x))
        return tf.equal(counts, 0)
    return tf.zeros_like(tf.reshape(x, [-1]), tf.bool)


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


def _log1p(v: tf.Tensor) -> tf.Tensor:
    return tf.math.log1p(tf.maximum(v, tf.zeros_like(v)))


def z_scores_imputed(columns: dict[str, tuple]) -> dict[str, tf.Tensor]:
    """For each ``name: (x, transform)``: the z-score of ``transform(x)`` where a missing
    value stands for the mean of the present ones (over the whole data set), so it lands
    at 0, not far below. float32 results, computed in float64 (timestamps need it).

    Equal to imputing with ``tft.mean`` then ``tft.scale_to_z_score``, which takes two
    analysis passes per column (the variance needs the mean first). Here one analyzer
    over all columns computes, per column, the fraction present and the first two moments
    of the present values; imputing the mean keeps the mean and scales the variance by
    the fraction present. Every analyzer costs Transform a fixed set of Beam stages, so
    one instead of two per column matters even on small data.
    """
    missing, values, parts = {}, {}, []
    for name, (x, transform) in columns.items():
        missing[name] = _is_missing(x)
        values[name] = transform(tf.cast(_dense(x, 0), tf.float64))
        present = 1.0 - tf.cast(missing[name], tf.float64)
        value = values[name] * present
        parts += [present, value, value * value]
    # Per column: E[present], E[value * present], E[value^2 * present].
    moments = tft.mean(tf.stack(parts, axis=1), reduce_instance_dims=False)
    moments = tf.unstack(moments, num=len(parts))
    result = {}
    for i, name in enumerate(columns):
        fraction, first, second = moments[3 * i : 3 * i + 3]
        mean = tf.math.divide_no_nan(first, fraction)
        variance = tf.maximum(tf.math.divide_no_nan(second, fraction) - mean * mean, 0.0)
        deviation = tf.where(missing[name], mean, values[name]) - mean
        std = tf.sqrt(variance * fraction)
        # As tft.scale_to_z_score: a constant column is only centred.
        result[name] = tf.cast(tf.where(std > 0, tf.math.divide_no_nan(deviation, std), deviation), tf.float32)
    return result


def quantile_buckets(columns: dict[str, tf.Tensor | tf.SparseTensor], num_buckets: int) -> dict[str, tf.Tensor]:
    """For each column, its quantile bucket (0 .. ``num_buckets - 1``) over the present
    values of the whole data set, and ``num_buckets`` (a bucket of its own) where missing.
    int64 results.

    Equal to ``tft.bucketize`` of each column's present values, but one quantiles analyzer
    computes every column's boundaries (``elementwise``: one sketch per column). Missing
    values enter it as NaN, which the quantiles analyzer ignores. Like the moments above,
    one analyzer instead of one per column saves Transform its fixed per-analyzer stages.
    """
    missing = {name: _is_missing(x) for name, x in columns.items()}
    nan = tf.constant(float("nan"), tf.float32)
    stacked = tf.stack(
        [tf.where(missing[name], nan, tf.cast(_dense(x, 0), tf.float32)) for name, x in columns.items()], axis=1
    )
    buckets = tft.bucketize(stacked, num_buckets, elementwise=True)
    missing_bucket = tf.constant(num_buckets, tf.int64)
    per_column = tf.unstack(tf.cast(buckets, tf.int64), num=len(columns), axis=1)
    return {
        name: tf.where(missing[name], missing_bucket, column) for name, column in zip(columns, per_column, strict=True)
    }


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
    numeric = {key: (inputs[key], _log1p) for key in features.LOG_NUMERIC_FEATURES}
    numeric.update({key: (inputs[key], tf.identity) for key in features.NUMERIC_FEATURES})
    for key, value in z_scores_imputed(numeric).items():
        outputs[features.transformed_name(key)] = _as_column(value)
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
    coordinates = {key: inputs[key] for key in features.BUCKET_FEATURES}
    for key, value in quantile_buckets(coordinates, features.NUM_BUCKETS).items():
        outputs[features.transformed_name(key)] = _as_column(value)

    outputs.update(label(inputs))
    return outputs


def label(inputs: dict) -> dict:
    """The label from raw columns, ``{big_tipper_xf: [batch, 1]}``. Needs no analyzer, so
    the exported model also computes it alone for the Evaluator (``models/signatures.py``)."""
    tips = _to_float(inputs[features.TIPS])
    fare = _to_float(inputs[features.FARE])
    return {features.transformed_name(features.LABEL_KEY): _as_column(big_tipper(tips, fare))}
